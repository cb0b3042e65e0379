"""The temperature's defaults (α = 1, target entropy 0) through the loss's gradient by hand, and check_lr's
boundary (0 keeps α fixed and is allowed; a negative rate is refused)."""

from __future__ import annotations

import pytest
import torch

from robosteer.policies.rl import Temperature


def test_defaults_alpha_one_and_target_entropy_zero_by_the_gradient() -> None:
    """loss = −log α · mean(log π + H̄): at log α = 0 its value is 0 and d/dlog α = −mean(log π) − H̄."""
    temp = Temperature()
    assert temp.alpha.item() == 1.0
    loss = temp.loss(torch.tensor([0.5, 1.5]))
    loss.backward()
    assert loss.item() == 0.0 and temp.log_alpha.grad.item() == pytest.approx(-1.0)


def test_check_lr_allows_zero_and_refuses_negative() -> None:
    Temperature.check_lr("dsrl", 0.0)
    Temperature.check_lr("dsrl", 3e-4)
    with pytest.raises(ValueError, match=r"dsrl temperature_lr=-0\.001 must be >= 0"):
        Temperature.check_lr("dsrl", -1e-3)
