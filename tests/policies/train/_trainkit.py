"""A tiny self-contained policy and dataset for the training-infrastructure tests (no policies/* needed)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

OBS_DIM, ACT_DIM, TO, TP = 3, 2, 2, 4
SHAPE_META = {"obs": {"state": {"shape": [OBS_DIM], "type": "low_dim"}}, "action": {"shape": [ACT_DIM]}}


class TinyPolicy(nn.Module):
    """Regresses noisy action chunks: its loss draws torch RNG (like diffusion noise) and uses dropout,
    and it carries a normaliser buffer, so resume must restore RNG state and buffers to be exact."""

    def __init__(
        self, shape_meta: dict | None = None, stats: Any = None, hidden: int = 16, dropout: float = 0.1
    ):
        super().__init__()
        self.shape_meta = shape_meta or SHAPE_META
        self.hidden, self.dropout_p = hidden, dropout
        self.net = nn.Sequential(
            nn.Linear(TO * OBS_DIM, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, TP * ACT_DIM)
        )
        self.register_buffer("obs_scale", torch.full((OBS_DIM,), 0.5))

    @property
    def noise_shape(self) -> tuple[int, int]:
        return (TP, ACT_DIM)

    def get_config(self) -> dict[str, Any]:
        return {"hidden": self.hidden, "dropout": self.dropout_p}

    def forward(self, obs: dict) -> torch.Tensor:
        x = (obs["state"] * self.obs_scale).flatten(1)
        return self.net(x).view(-1, TP, ACT_DIM)

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict]:
        target = batch["action"] + 0.01 * torch.randn_like(batch["action"])
        loss = ((self(batch["obs"]) - target) ** 2).mean()
        return loss, {"mse": loss.detach()}

    def sample(self, obs: dict, noise: torch.Tensor | None = None) -> torch.Tensor:
        out = self(obs)
        return out if noise is None else out + 0.0 * noise

    def reset(self) -> None:
        pass


class TinyDataset(Dataset):
    """Deterministic windows: item i depends only on i."""

    def __init__(self, n: int = 40) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        g = torch.Generator().manual_seed(i)
        obs = torch.randn(TO, OBS_DIM, generator=g)
        action = torch.tanh(obs.sum() + torch.arange(TP * ACT_DIM, dtype=torch.float32).view(TP, ACT_DIM) / 8)
        return {"obs": {"state": obs}, "action": action, "index": torch.tensor(i)}


def make_tiny(name: str, shape_meta: dict, stats: Any = None, **config: Any) -> TinyPolicy:
    """Stand-in for ``policies.make_policy`` restricted to the name 'tiny'."""
    if name != "tiny":
        raise KeyError(name)
    return TinyPolicy(shape_meta, stats, **config)


def params_equal(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
