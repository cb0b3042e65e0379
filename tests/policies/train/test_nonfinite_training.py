"""A NaN/inf loss or gradient stops training before the optimizer step: NonFiniteError naming the step and
the value, checkpoints/latest left as the last good one (finite), nothing written after the fault."""

from __future__ import annotations

import pytest
import torch
from _trainkit import SHAPE_META, TinyDataset, TinyPolicy

from robosteer.policies.checkpoint import load_checkpoint
from robosteer.policies.engine import NonFiniteError
from robosteer.policies.train import TrainConfig, Trainer

torch.set_num_threads(1)

BASE = dict(batch_size=8, lr=3e-3, lr_warmup_steps=0, checkpoint_every=3, log_every=1, progress=False, seed=0)


class FaultyPolicy(TinyPolicy):
    """TinyPolicy whose ``fault_at``-th loss is NaN ("loss") or finite with a NaN gradient ("grad")."""

    def __init__(self, fault_at: int, kind: str) -> None:
        super().__init__()
        self.fault_at, self.kind, self.calls = fault_at, kind, 0

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict]:
        loss, info = super().loss(batch)
        self.calls += 1
        if self.calls == self.fault_at:
            w = self.net[0].weight
            if self.kind == "loss":
                loss = loss + float("nan") * w.sum()
            else:  # 0·sqrt(0) = 0 forward, but its gradient is 0·inf = NaN
                loss = loss + 0.0 * torch.sqrt(w - w.detach()).sum()
        return loss, info


def _fit(out, fault_at: int, kind: str, steps: int = 10) -> tuple[Trainer, FaultyPolicy]:
    torch.manual_seed(0)
    policy = FaultyPolicy(fault_at, kind)
    cfg = TrainConfig.from_dict({**BASE, "steps": steps})
    trainer = Trainer(policy, TinyDataset(), cfg, out, policy_name="tiny", shape_meta=SHAPE_META)
    return trainer, policy


@pytest.mark.parametrize(("kind", "named"), [("loss", "loss = nan"), ("grad", "grad_norm = nan")])
def test_non_finite_loss_or_gradient_stops_before_the_step_and_keeps_the_last_good_checkpoint(
    tmp_path, kind, named
):
    trainer, policy = _fit(tmp_path, fault_at=5, kind=kind)
    with pytest.raises(NonFiniteError) as info:
        trainer.fit()
    msg = str(info.value)
    latest = tmp_path / "checkpoints" / "latest"
    assert f"training: non-finite {named}" in msg and "at step 5" in msg, msg
    assert f"{latest} holds the last good state (step 3)" in msg, msg
    assert trainer.step == 4  # the faulty update was never applied
    for v in policy.state_dict().values():
        assert torch.isfinite(v).all()  # the optimizer never stepped on the NaN gradient
    ck = load_checkpoint(latest)
    assert ck.extra["step"] == 3 and ck.config["step"] == 3  # nothing saved after the fault
    for name in ("model", "ema"):
        assert all(torch.isfinite(t).all() for t in ck.modules[name].values())
    assert not (tmp_path / "metrics.json").exists() and not (tmp_path / "checkpoints" / "best").exists()


def test_fault_before_any_checkpoint_writes_none(tmp_path):
    trainer, _ = _fit(tmp_path, fault_at=2, kind="loss")
    with pytest.raises(
        NonFiniteError, match=r"at step 2; stopped without saving: no checkpoint had been written"
    ):
        trainer.fit()
    assert not (tmp_path / "checkpoints").exists()
