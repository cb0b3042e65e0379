"""EMAModel matches diffusion_policy's schedule and update rule."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from robosteer.policies.train import EMAModel

torch.set_num_threads(1)


def test_decay_schedule_matches_diffusion_policy():
    ema = EMAModel(nn.Linear(2, 2), power=0.75, max_value=0.9999, update_after_step=0, inv_gamma=1.0)
    assert ema.get_decay(0) == 0.0 and ema.get_decay(1) == 0.0
    for step in (2, 10, 1000):
        assert ema.get_decay(step) == pytest.approx(1 - (1 + (step - 1)) ** -0.75)
    assert ema.get_decay(10**9) == 0.9999  # clamped
    late = EMAModel(nn.Linear(2, 2), update_after_step=100)
    assert late.get_decay(100) == 0.0 and late.get_decay(102) > 0.0


def test_step_averages_trainable_and_copies_frozen_and_buffers():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    model[0].bias.requires_grad_(False)
    ema = EMAModel(model)
    avg = ema.averaged_model
    assert avg is not model and not avg.training
    assert all(not p.requires_grad for p in avg.parameters())

    before = avg[0].weight.clone()
    for _ in range(3):  # decays 0, 0, then 1 - 2**-0.75
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
            model[1].running_mean.add_(2.0)
        ema.step(model)
    d = 1 - 2**-0.75
    assert ema.decay == pytest.approx(d) and ema.optimization_step == 3
    # After two zero-decay steps the copy equals model-1; the third step averages with decay d.
    expected = d * (before + 2.0) + (1 - d) * (before + 3.0)
    torch.testing.assert_close(avg[0].weight, expected)
    assert torch.equal(avg[0].bias, model[0].bias)  # frozen: copied
    assert torch.equal(avg[1].weight, model[1].weight)  # BatchNorm params: copied
    assert torch.equal(avg[1].running_mean, model[1].running_mean)  # buffers: copied

    state = ema.state_dict()
    other = EMAModel(model)
    other.load_state_dict(state)
    assert other.optimization_step == 3 and other.decay == ema.decay
