"""Learned entropy temperature α (SAC's automatic entropy tuning)."""

from __future__ import annotations

import math

import torch
from torch import nn


class Temperature(nn.Module):
    """α = exp(log α), trained so the policy's entropy tracks ``target_entropy``."""

    def __init__(self, init: float = 1.0, target_entropy: float = 0.0) -> None:
        super().__init__()
        self.log_alpha = nn.Parameter(torch.tensor(math.log(init)))
        self.target_entropy = float(target_entropy)

    @staticmethod
    def check_lr(owner: str, lr: float) -> None:
        """Every learner's ``temperature_lr`` check: 0 keeps α fixed; a negative rate is refused."""
        if lr < 0:
            raise ValueError(f"{owner} temperature_lr={lr} must be >= 0 (0: α fixed)")

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.exp().detach()

    def loss(self, log_prob: torch.Tensor) -> torch.Tensor:
        """SB3's form: −(log α · (log π + H̄)).mean(), with log π detached."""
        return -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean()
