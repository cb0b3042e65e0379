"""Per-key affine normaliser stored inside the policy (diffusion_policy's ``LinearNormalizer`` idea).

Why a module: its buffers travel in the policy's ``state_dict``, so a checkpoint carries the exact
statistics it was trained with, and ``make_policy(..., stats=None)`` + ``load_state_dict`` restores them.
Actions and low-dim observations are mapped min-max to [-1, 1] per dimension; constant dimensions
(max - min < ``range_eps``) are mapped to 0 instead of being divided by ~0 (diffusion_policy's rule).
Images (uint8, channel-last) are scaled to [-1, 1] or [0, 1] without statistics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

RANGE_EPS = 1e-4


def buffer_key(key: str) -> str:
    """Module names may not contain '.', and '/' reads badly in state dicts: ``image/corner2`` -> ``image__corner2``."""
    return key.replace("/", "__").replace(".", "_")


class NormalizerNotFittedError(RuntimeError):
    """Raised when a policy is used before its normaliser received statistics or a state dict."""


class _Affine(nn.Module):
    """y = x * scale + offset for one key; ``fitted`` is a buffer so loading a state dict marks it fitted."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.register_buffer("scale", torch.ones(dim))  # (D,)
        self.register_buffer("offset", torch.zeros(dim))  # (D,)
        self.register_buffer("fitted", torch.zeros((), dtype=torch.bool))


class Normalizer(nn.Module):
    """Normalises the low-dim keys and ``action`` from stats; scales ``rgb`` keys by a fixed rule."""

    def __init__(
        self,
        shape_meta: Mapping[str, Any],
        stats: Mapping[str, Mapping[str, Any]] | None = None,
        image_range: str = "-1_1",
        range_eps: float = RANGE_EPS,
    ) -> None:
        super().__init__()
        if image_range not in ("-1_1", "0_1"):
            raise ValueError(f"image_range must be '-1_1' or '0_1', got {image_range!r}")
        self.image_range = image_range
        self.range_eps = range_eps
        self.lowdim_keys: list[str] = []
        self.rgb_keys: list[str] = []
        for key, meta in shape_meta["obs"].items():
            kind = meta.get("type", "low_dim")
            if kind == "low_dim":
                self.lowdim_keys.append(key)
            elif kind == "rgb":
                self.rgb_keys.append(key)
            else:
                raise ValueError(f"obs key {key!r}: unknown type {kind!r} (expected 'low_dim' or 'rgb')")
        self.affine = nn.ModuleDict()
        for key in [*self.lowdim_keys, "action"]:
            shape = shape_meta["action"]["shape"] if key == "action" else shape_meta["obs"][key]["shape"]
            self.affine[buffer_key(key)] = _Affine(int(np.prod(shape)))
        # per-call fast path: raw key -> its _Affine's buffer dict (the live dict, so .to() / load_state_dict
        # / fit are always seen), and the obs keys in output order
        self._bufs: dict[str, dict[str, Any]] = {
            key: self.affine[buffer_key(key)]._buffers for key in [*self.lowdim_keys, "action"]
        }
        self._obs_order: list[str] = [*self.lowdim_keys, *self.rgb_keys]
        if stats is not None:
            self.fit(stats)

    @property
    def fitted(self) -> bool:
        return all(bool(m.fitted) for m in self.affine.values())

    def fit(self, stats: Mapping[str, Mapping[str, Any]]) -> None:
        """Set scale/offset from ``stats[key]["min"|"max"]`` for every low-dim key and ``action``."""
        for key in [*self.lowdim_keys, "action"]:
            if key not in stats:
                raise KeyError(f"normaliser stats lack key {key!r}; stats have {sorted(stats)}")
            mod = self.affine[buffer_key(key)]
            lo = torch.as_tensor(np.asarray(stats[key]["min"], dtype=np.float64)).reshape(-1)
            hi = torch.as_tensor(np.asarray(stats[key]["max"], dtype=np.float64)).reshape(-1)
            if lo.numel() != mod.scale.numel():
                raise ValueError(f"stats[{key!r}] has {lo.numel()} dims, shape_meta says {mod.scale.numel()}")
            rng = hi - lo
            const = rng < self.range_eps
            rng = torch.where(const, torch.full_like(rng, 2.0), rng)  # output range is 2 for [-1, 1]
            scale = 2.0 / rng
            offset = -1.0 - scale * lo
            offset = torch.where(const, -lo, offset)  # constant dims -> (x - min) = 0, the midpoint
            mod.scale.copy_(scale.float())
            mod.offset.copy_(offset.float())
            mod.fitted.fill_(True)

    def _fitted_buffers(self, key: str) -> dict[str, Any]:
        """The scale/offset buffers of ``key`` (low-dim or ``action``); raises if unknown or not fitted."""
        bufs = self._bufs.get(key)
        if bufs is None or not bool(bufs["fitted"]):
            self.affine[buffer_key(key)]  # an unknown key raises ModuleDict's KeyError here
            raise NormalizerNotFittedError(
                f"normaliser for {key!r} is not fitted: pass stats= to make_policy or load a state dict"
            )
        return bufs

    def normalize(self, key: str, x: torch.Tensor) -> torch.Tensor:
        """Raw units -> network units. Low-dim/action: (..., D); rgb: uint8 (..., H, W, 3) -> float."""
        if key in self.rgb_keys:
            x = x.float() / 255.0
            return x * 2.0 - 1.0 if self.image_range == "-1_1" else x
        bufs = self._fitted_buffers(key)
        return x * bufs["scale"] + bufs["offset"]

    def unnormalize(self, key: str, x: torch.Tensor) -> torch.Tensor:
        """Network units -> raw units (low-dim keys and ``action`` only)."""
        bufs = self._fitted_buffers(key)
        return (x - bufs["offset"]) / bufs["scale"]

    def normalize_obs(self, obs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {key: self.normalize(key, obs[key]) for key in self._obs_order}
