"""Timestep embeddings shared by the denoisers.

A denoiser sees either one timestep per sample, shape (B,), or one noise level per horizon position,
shape (B, Tp) (Streaming Diffusion Policy). The per-position variant embeds each level, flattens the
(Tp, E) embeddings and maps them to one vector (as SDP's ``conditional_unet1d_tedi``), so the horizon is
fixed at construction.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class SinusoidalPosEmb(nn.Module):
    """Transformer sinusoidal embedding of a (float) timestep: (...,) -> (..., dim)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        if dim % 2:
            raise ValueError(f"sinusoidal embedding dim must be even, got {dim}")
        half = dim // 2
        scale = math.log(10000) / (half - 1)
        self.register_buffer("freqs", torch.exp(torch.arange(half) * -scale), persistent=False)  # (dim/2,)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        arg = t.float().unsqueeze(-1) * self.freqs  # (..., dim/2)
        return torch.cat([arg.sin(), arg.cos()], dim=-1)


class TimestepEncoder(nn.Module):
    """(B,) timesteps, or (B, Tp) per-position levels when ``horizon`` is given -> (B, out_dim)."""

    def __init__(self, out_dim: int, horizon: int | None = None, level_embed_dim: int = 32) -> None:
        super().__init__()
        self.horizon = horizon
        emb_dim = out_dim if horizon is None else level_embed_dim
        self.pos_emb = SinusoidalPosEmb(emb_dim)
        in_dim = emb_dim if horizon is None else emb_dim * horizon
        self.mlp = nn.Sequential(nn.Linear(in_dim, out_dim * 4), nn.Mish(), nn.Linear(out_dim * 4, out_dim))
        self.out_dim = out_dim

    def forward(self, t: torch.Tensor, batch: int) -> torch.Tensor:
        if self.horizon is None:
            if t.dim() == 0:
                t = t.expand(batch)
            if t.dim() != 1:
                raise ValueError(
                    f"this denoiser takes one timestep per sample (B,), got shape {tuple(t.shape)}"
                )
            return self.mlp(self.pos_emb(t))  # (B, out_dim)
        if t.dim() != 2 or t.shape[1] != self.horizon:
            raise ValueError(
                f"this denoiser takes per-position levels (B, {self.horizon}), got {tuple(t.shape)}"
            )
        return self.mlp(self.pos_emb(t).flatten(1))  # (B, Tp*E) -> (B, out_dim)
