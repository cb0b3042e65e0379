"""Residual MLP denoiser over the flattened action chunk, conditioned by FiLM or by concatenation.

Why: on CPU a ~1M-parameter MLP trains ~17x faster per step than a 4.6M 1-D UNet and reached the same
success on Meta-World in the design card's calibration, so it is the default backbone.
"""

from __future__ import annotations

import torch
from torch import nn

from robosteer.policies.nets.embedding import TimestepEncoder


class _ResBlock(nn.Module):
    """x + W2 act(FiLM(W1 LN(x), cond)) ("film"), or x + W2 act(W1 [LN(x), cond]) ("concat")."""

    def __init__(self, dim: int, cond_dim: int, cond_mode: str) -> None:
        super().__init__()
        self.cond_mode = cond_mode
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim + (cond_dim if cond_mode == "concat" else 0), dim)
        self.fc2 = nn.Linear(dim, dim)
        self.act = nn.Mish()
        self.film = nn.Sequential(nn.Mish(), nn.Linear(cond_dim, 2 * dim)) if cond_mode == "film" else None

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:  # (B, H), (B, C) -> (B, H)
        h = self.norm(x)
        if self.film is None:
            h = self.fc1(torch.cat([h, cond], dim=-1))
        else:
            scale, bias = self.film(cond).chunk(2, dim=-1)  # (B, H) each
            h = self.fc1(h) * (1 + scale) + bias
        return x + self.fc2(self.act(h))


class MLPDenoiser(nn.Module):
    """Maps (noisy chunk (B, Tp, Da), timestep (B,) or levels (B, Tp), global cond (B, G)) -> (B, Tp, Da)."""

    def __init__(
        self,
        action_dim: int,
        horizon: int,
        global_cond_dim: int,
        hidden_dim: int = 256,
        n_blocks: int = 4,
        time_embed_dim: int = 128,
        cond_mode: str = "film",
        per_position_levels: bool = False,
        level_embed_dim: int = 32,
    ) -> None:
        super().__init__()
        if cond_mode not in ("film", "concat"):
            raise ValueError(f"cond_mode must be 'film' or 'concat', got {cond_mode!r}")
        self.horizon, self.action_dim = horizon, action_dim
        self.time_encoder = TimestepEncoder(
            time_embed_dim, horizon if per_position_levels else None, level_embed_dim
        )
        cond_dim = time_embed_dim + global_cond_dim
        self.inp = nn.Linear(horizon * action_dim, hidden_dim)
        self.blocks = nn.ModuleList([_ResBlock(hidden_dim, cond_dim, cond_mode) for _ in range(n_blocks)])
        self.out_norm = nn.LayerNorm(hidden_dim)
        self.out = nn.Linear(hidden_dim, horizon * action_dim)

    def forward(
        self, sample: torch.Tensor, timestep: torch.Tensor, global_cond: torch.Tensor
    ) -> torch.Tensor:
        b = sample.shape[0]
        cond = torch.cat([self.time_encoder(timestep, b), global_cond], dim=-1)  # (B, C)
        h = self.inp(sample.reshape(b, -1))  # (B, H)
        for block in self.blocks:
            h = block(h, cond)
        return self.out(self.out_norm(h)).reshape(b, self.horizon, self.action_dim)  # (B, Tp, Da)
