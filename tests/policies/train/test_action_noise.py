"""Action-noise augmentation of the demonstrations (TrainConfig.action_noise_std): what the loss sees,
its bounds, exact resume, and the errors for a bad std or a dataset without an action range."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _trainkit import SHAPE_META, TinyDataset, TinyPolicy, params_equal

from robosteer.policies.train import TrainConfig, Trainer
from robosteer.policies.train.trainer import ActionNoise

torch.set_num_threads(1)

BASE = dict(batch_size=8, lr=3e-3, lr_warmup_steps=3, checkpoint_every=5, log_every=2, progress=False, seed=3)


class RangedDataset(TinyDataset):
    """TinyDataset with the stats() a real dataset has: its actions' per-dimension range."""

    def stats(self) -> dict:
        actions = (
            torch.stack([self[i]["action"] for i in range(len(self))]).flatten(0, 1).numpy()
        )  # (N*TP, A)
        return {"action": {"min": actions.min(0), "max": actions.max(0)}}


class RecordingPolicy(TinyPolicy):
    """Keeps every batch's actions as the loss received them."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict]:
        self.seen.append(batch["action"].clone())
        return super().loss(batch)


def _run(out, steps, policy=None, dataset=None, **over):
    torch.manual_seed(0)
    policy = policy or TinyPolicy()
    cfg = TrainConfig.from_dict({**BASE, "steps": steps, **over})
    trainer = Trainer(policy, dataset or RangedDataset(), cfg, out, policy_name="tiny", shape_meta=SHAPE_META)
    return trainer, trainer.fit()


def test_noise_is_added_then_clipped_per_dimension():
    action = torch.tensor([[[0.0, 0.9], [0.5, -0.9]]]).repeat(4096, 1, 1)  # (B, Tp=2, Da=2)
    low, high = np.array([-1.0, -0.95]), np.array([1.0, 0.95])
    torch.manual_seed(5)
    out = ActionNoise(0.3, low, high)({"action": action, "obs": "kept"})["action"]
    torch.manual_seed(5)
    hand = action + 0.3 * torch.randn(action.shape)
    hand = torch.stack([hand[..., 0].clamp(-1.0, 1.0), hand[..., 1].clamp(-0.95, 0.95)], -1)
    assert torch.equal(out, hand)
    assert out[..., 1].max() <= 0.95 and out[..., 1].min() >= -0.95
    # unclipped entry (0.0 in dim 0): the noise's own std
    assert abs(float(out[:, 0, 0].std()) - 0.3) < 0.02 and abs(float(out[:, 0, 0].mean())) < 0.02


def test_the_loss_sees_noisy_actions_within_the_demos_range(tmp_path):
    dataset = RangedDataset()
    clean = RecordingPolicy()
    _run(tmp_path / "clean", 4, policy=clean, dataset=dataset)
    noisy = RecordingPolicy()
    _run(tmp_path / "noisy", 4, policy=noisy, dataset=dataset, action_noise_std=0.3)
    lo, hi = (torch.as_tensor(dataset.stats()["action"][k]) for k in ("min", "max"))
    for a, b in zip(clean.seen, noisy.seen, strict=True):  # same windows, same order
        diff = b - a
        assert float(diff.abs().max()) > 0.05  # the noise is there...
        assert float(diff.std()) < 0.4  # ... of about the asked size (clipping only shrinks it)
        assert bool(((b >= lo - 1e-6) & (b <= hi + 1e-6)).all())  # ... and inside the demos' range


def test_resume_with_action_noise_is_bit_identical(tmp_path):
    full, _ = _run(tmp_path / "full", 12, action_noise_std=0.3)
    _run(tmp_path / "split", 12, action_noise_std=0.3, stop_at_step=7)
    resumed, m = _run(tmp_path / "split", 12, action_noise_std=0.3, resume=True)
    assert m["resumed_from_step"] == 7
    assert params_equal(full.policy, resumed.policy)
    clean, _ = _run(tmp_path / "clean", 12)
    assert not params_equal(full.policy, clean.policy)


@pytest.mark.parametrize("std", [-0.1, float("nan"), float("inf")])
def test_a_bad_std_is_refused(std):
    with pytest.raises(ValueError, match=r"action_noise_std=.*finite std >= 0"):
        TrainConfig.from_dict({"action_noise_std": std})


def test_a_dataset_without_an_action_range_is_refused(tmp_path):
    with pytest.raises(
        ValueError, match=r"action_noise_std=0.3 needs the dataset's action range.*TinyDataset"
    ):
        _run(tmp_path / "x", 2, dataset=TinyDataset(), action_noise_std=0.3)
