"""The "from scratch" base: an action chunk *is* the latent, so DSRL-SAC over it is plain chunked SAC.

The issue's baseline for DSRL is SAC from scratch with the same budget. Rather than a second SAC
implementation, the identity decoder lets the one DSRL-SAC code path (same actor, critics, replay, chunk MDP,
logging, checkpoints, evaluation) run with no pretrained policy: ``w = tanh(u) ∈ [-1, 1]^(Ta·Da)`` is the
executed chunk itself. ``robosteer-steer variant=sac base=scratch task=push-v3``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from robosteer.policies.base import GenerativePolicy, PolicyConfig

SCRATCH = "scratch"


class IdentityChunkPolicy(GenerativePolicy):
    """``sample(obs, noise) = clip(noise, -1, 1)`` in the env's [-1, 1] action units; nothing to train."""

    name: ClassVar[str] = SCRATCH

    def _build_denoiser(self) -> nn.Module:
        return nn.Identity()

    def loss(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        raise TypeError("the scratch base has no parameters to train: it is the identity noise -> action map")

    def _sample_normalized(self, cond: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return noise.clamp(-1.0, 1.0)  # (B, Ta, Da); normalised units equal raw ones (stats span [-1, 1])


def make_scratch_base(state_dim: int, action_dim: int, n_action_steps: int) -> IdentityChunkPolicy:
    """One-step observations (To=1) and a chunk of exactly Ta rows, all executed."""
    shape_meta = {
        "obs": {"state": {"shape": [state_dim], "type": "low_dim"}},
        "action": {"shape": [action_dim]},
    }

    def span(d: int) -> dict[str, np.ndarray]:
        lo, hi = -np.ones(d, np.float32), np.ones(d, np.float32)
        return {"min": lo, "max": hi, "mean": np.zeros(d, np.float32), "std": np.ones(d, np.float32)}

    cfg = PolicyConfig(n_obs_steps=1, horizon=n_action_steps, n_action_steps=n_action_steps)
    policy = IdentityChunkPolicy(shape_meta, cfg, {"state": span(state_dim), "action": span(action_dim)})
    policy.task = None
    return policy.eval()
