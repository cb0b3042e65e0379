"""diffusion_policy's ConditionalUnet1D (Chi et al.), with FiLM conditioning (``cond_predict_scale``).

Written from the reference architecture: Conv1d+GroupNorm+Mish blocks, residual blocks whose middle is
modulated by a global condition (timestep embedding ++ observation features), down/up sampling by 2 and
skip connections. ``per_position_levels=True`` swaps the timestep encoder for SDP's per-position level
encoder (B, Tp) -> one global FiLM vector.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from torch import nn

from robosteer.policies.nets.embedding import TimestepEncoder


class Conv1dBlock(nn.Module):
    """Conv1d -> GroupNorm -> Mish."""

    def __init__(self, cin: int, cout: int, kernel_size: int, n_groups: int = 8) -> None:
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv1d(cin, cout, kernel_size, padding=kernel_size // 2),
            nn.GroupNorm(n_groups, cout),
            nn.Mish(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class ConditionalResidualBlock1D(nn.Module):
    """Two conv blocks; the first one's output is FiLM-modulated (scale and bias) or biased by the condition."""

    def __init__(
        self,
        cin: int,
        cout: int,
        cond_dim: int,
        kernel_size: int = 3,
        n_groups: int = 8,
        cond_predict_scale: bool = True,
    ) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            [Conv1dBlock(cin, cout, kernel_size, n_groups), Conv1dBlock(cout, cout, kernel_size, n_groups)]
        )
        self.cond_predict_scale = cond_predict_scale
        self.out_channels = cout
        self.cond_encoder = nn.Sequential(
            nn.Mish(), nn.Linear(cond_dim, cout * 2 if cond_predict_scale else cout)
        )
        self.residual_conv = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """(B, Cin, T), (B, C) -> (B, Cout, T)."""
        out = self.blocks[0](x)
        embed = self.cond_encoder(cond)
        if self.cond_predict_scale:
            embed = embed.reshape(embed.shape[0], 2, self.out_channels, 1)
            out = embed[:, 0] * out + embed[:, 1]
        else:
            out = out + embed.unsqueeze(-1)
        out = self.blocks[1](out)
        return out + self.residual_conv(x)


class ConditionalUnet1D(nn.Module):
    """(B, Tp, Da) noisy chunk + timestep (B,) or levels (B, Tp) + global cond (B, G) -> (B, Tp, Da)."""

    def __init__(
        self,
        input_dim: int,
        global_cond_dim: int,
        horizon: int,
        diffusion_step_embed_dim: int = 128,
        down_dims: Sequence[int] = (64, 128, 256),
        kernel_size: int = 5,
        n_groups: int = 8,
        cond_predict_scale: bool = True,
        per_position_levels: bool = False,
        level_embed_dim: int = 32,
    ) -> None:
        super().__init__()
        n_down = len(down_dims) - 1
        if horizon % (2**n_down):
            raise ValueError(
                f"UNet horizon {horizon} must be divisible by 2**(len(down_dims)-1) = {2**n_down}"
            )
        all_dims = [input_dim, *down_dims]
        start_dim = down_dims[0]
        dsed = diffusion_step_embed_dim
        self.diffusion_step_encoder = TimestepEncoder(
            dsed, horizon if per_position_levels else None, level_embed_dim
        )
        cond_dim = dsed + global_cond_dim
        in_out = list(itertools.pairwise(all_dims))

        def res(cin: int, cout: int) -> ConditionalResidualBlock1D:
            return ConditionalResidualBlock1D(cin, cout, cond_dim, kernel_size, n_groups, cond_predict_scale)

        mid_dim = all_dims[-1]
        self.mid_modules = nn.ModuleList([res(mid_dim, mid_dim), res(mid_dim, mid_dim)])
        self.down_modules = nn.ModuleList()
        for ind, (din, dout) in enumerate(in_out):
            blocks = [res(din, dout), res(dout, dout)]
            blocks.append(nn.Identity() if ind == len(in_out) - 1 else nn.Conv1d(dout, dout, 3, 2, 1))
            self.down_modules.append(nn.ModuleList(blocks))
        self.up_modules = nn.ModuleList(  # every up stage upsamples: there is one fewer than down stages
            nn.ModuleList([res(dout * 2, din), res(din, din), nn.ConvTranspose1d(din, din, 4, 2, 1)])
            for din, dout in reversed(in_out[1:])
        )
        self.final_conv = nn.Sequential(
            Conv1dBlock(start_dim, start_dim, kernel_size, n_groups), nn.Conv1d(start_dim, input_dim, 1)
        )

    def forward(
        self, sample: torch.Tensor, timestep: torch.Tensor, global_cond: torch.Tensor
    ) -> torch.Tensor:
        x = sample.moveaxis(-1, -2)  # (B, Da, Tp)
        cond = torch.cat([self.diffusion_step_encoder(timestep, x.shape[0]), global_cond], dim=-1)  # (B, C)
        skips = []
        for resnet, resnet2, downsample in self.down_modules:
            x = resnet2(resnet(x, cond), cond)
            skips.append(x)
            x = downsample(x)
        for mid in self.mid_modules:
            x = mid(x, cond)
        for resnet, resnet2, upsample in self.up_modules:
            x = torch.cat([x, skips.pop()], dim=1)
            x = upsample(resnet2(resnet(x, cond), cond))
        return self.final_conv(x).moveaxis(-1, -2)  # (B, Tp, Da)
