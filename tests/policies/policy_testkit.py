"""Shared helpers of the policy tests: tiny sizes, observation windows, randomised denoisers."""

from __future__ import annotations

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
