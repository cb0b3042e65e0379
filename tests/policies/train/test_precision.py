"""Training options for a GPU: ``precision=bf16`` (autocast of the forward) and ``compile=true``; both leave
the weights, the optimizer and the checkpoint format as fp32 eager training has them."""

from __future__ import annotations

import pytest
import torch
from _trainkit import SHAPE_META, TinyDataset, TinyPolicy

from robosteer.policies.checkpoint import load_checkpoint
from robosteer.policies.train import TrainConfig, Trainer

torch.set_num_threads(1)
BASE = dict(
    batch_size=8, lr=3e-3, lr_warmup_steps=2, checkpoint_every=100, log_every=2, progress=False, seed=3
)


def _fit(out, **over) -> tuple[Trainer, list[torch.dtype]]:
    torch.manual_seed(0)
    policy = TinyPolicy(dropout=0.0)
    seen: list[torch.dtype] = []  # the dtype the first layer computed in, per training forward
    policy.net[0].register_forward_hook(lambda m, i, o: seen.append(o.dtype) if m.training else None)
    cfg = TrainConfig.from_dict({**BASE, "steps": 6, **over})
    trainer = Trainer(policy, TinyDataset(), cfg, out, policy_name="tiny", shape_meta=SHAPE_META)
    trainer.fit()
    return trainer, seen


def test_bf16_runs_the_forward_in_bfloat16_and_keeps_fp32_weights(tmp_path) -> None:
    fp32, seen32 = _fit(tmp_path / "fp32")
    bf16, seen16 = _fit(tmp_path / "bf16", precision="bf16")
    assert set(seen32) == {torch.float32} and set(seen16) == {torch.bfloat16} and len(seen16) == 6
    for p32, p16 in zip(fp32.policy.parameters(), bf16.policy.parameters()):
        assert p16.dtype == torch.float32 and torch.isfinite(p16).all()
        assert torch.allclose(p32, p16, atol=0.05)  # the same training, at bfloat16's precision
    assert any(not torch.equal(a, b) for a, b in zip(fp32.policy.parameters(), bf16.policy.parameters()))


def test_an_unknown_precision_names_the_choices() -> None:
    with pytest.raises(
        ValueError, match=r"precision='fp16' is not known: expected one of \('fp32', 'bf16'\)"
    ):
        TrainConfig.from_dict({"precision": "fp16"})


@pytest.mark.slow  # the first compiled call builds C++ kernels (tens of seconds on 2 cores)
def test_compile_trains_as_eager_and_saves_the_same_names(tmp_path) -> None:
    eager, _ = _fit(tmp_path / "eager")
    compiled, _ = _fit(tmp_path / "compiled", compile=True)
    for a, b in zip(eager.policy.parameters(), compiled.policy.parameters()):
        # inductor draws randn_like from its own RNG: the same training, not the same noise (3e-4 apart here)
        assert torch.allclose(a, b, atol=2e-3)
    names = lambda d: sorted(load_checkpoint(d / "checkpoints" / "latest").modules["model"])  # noqa: E731
    assert names(tmp_path / "eager") == names(tmp_path / "compiled")
