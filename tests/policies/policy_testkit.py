"""Shared helpers of the policy tests: tiny sizes, observation windows, randomised denoisers."""

from __future__ import annotations

import numpy as np
import torch

STATE_DIM, ACTION_DIM = 5, 3
TINY = {"mlp_hidden_dim": 32, "mlp_n_blocks": 2, "time_embed_dim": 16, "level_embed_dim": 8}


def obs_window(b: int, to: int = 2, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"state": torch.randn(b, to, STATE_DIM, generator=g)}


def randomize(policy: torch.nn.Module, seed: int = 0, scale: float = 0.3) -> None:
    """Give an untrained denoiser non-trivial outputs so that sampler tests can tell paths apart."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * scale)


def tiny_steering_base(to: int = 2, tp: int = 8, ta: int = 4, state_dim: int = 39, action_dim: int = 4):
    """The tiny diffusion base the steering tests share: reach-v3's state/action sizes, unit stats, seed 0."""
    from robosteer.policies import make_policy

    shape_meta = {
        "obs": {"state": {"shape": [state_dim], "type": "low_dim"}},
        "action": {"shape": [action_dim]},
    }
    stats = {
        k: {"min": -np.ones(d), "max": np.ones(d), "mean": np.zeros(d), "std": np.ones(d)}
        for k, d in (("state", state_dim), ("action", action_dim))
    }
    torch.manual_seed(0)
    return make_policy(
        "diffusion",
        shape_meta,
        stats,
        n_obs_steps=to,
        horizon=tp,
        n_action_steps=ta,
        mlp_hidden_dim=32,
        mlp_n_blocks=1,
        num_inference_steps=2,
    ).eval()
