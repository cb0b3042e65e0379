"""A policy served over the network (robosteer-serve, or any openpi-protocol server that takes initial noise)
as a frozen steering base: ``robosteer-steer base=ws://HOST:PORT``.

Why: the generalist a user wants to steer often runs on another machine (a GPU host, openpi's serving stack);
DSRL needs only its noise -> chunk map, which the wire carries. :class:`ServedBase` is a module without
parameters around the client, so the steering code moves, freezes and acts through it as through a local
base; chunks come back on the device the steering networks live on.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from robosteer.real.client import PolicyConnectionError, connect


class ServedBase(nn.Module):
    """``sample(obs, noise)`` over the wire, with the base surface steering reads (To, Ta, shape_meta, task)."""

    name = "served"
    rows_per_request = 256  # DSRL decodes thousands of latents per update; servers cap a request (max_batch)

    def __init__(self, client: Any, url: str) -> None:
        super().__init__()
        self.client, self.url = client, url
        self.noise_shape = tuple(int(d) for d in client.noise_shape)  # (Tp, Da)
        self.shape_meta = client.shape_meta
        self.task = client.task
        self.config = SimpleNamespace(
            n_obs_steps=int(client.n_obs_steps),
            n_action_steps=int(client.n_action_steps),
            horizon=self.noise_shape[0],
        )
        self.register_buffer("_where", torch.zeros(()), persistent=False)  # follows .to(device)

    @property
    def device(self) -> torch.device:
        return self._where.device

    def sample(self, obs: dict[str, torch.Tensor], noise: torch.Tensor | None = None) -> torch.Tensor:
        """Chunks (B, Tp, Da) for obs windows {key: (B, To, ...)}, on this module's device."""
        b, n = len(next(iter(obs.values()))), self.rows_per_request
        parts = [
            self.client.sample(
                {k: v[i : i + n] for k, v in obs.items()}, None if noise is None else noise[i : i + n]
            )
            for i in range(0, b, n)
        ]
        return torch.cat([torch.as_tensor(p) for p in parts]).to(self.device)  # (B, Tp, Da)

    def act(self, obs: dict[str, Any]) -> Any:
        """The served policy acting as served (its own noise): the run's "before" figure."""
        return self.client.act(obs)

    def reset(self, env_ids: Any = None) -> None:
        self.client.reset(env_ids)

    def close(self) -> None:
        self.client.close()


def served_base(
    url: str, protocol: str = "robosteer", token: Any = None, timeout_s: float = 10.0
) -> ServedBase:
    """The policy served at ``url`` as a :class:`ServedBase`; a server that cannot be one (it announces no
    To / Ta / noise shape, or takes no initial noise) is refused in one line."""
    client = connect(url, protocol, None if token is None else str(token), timeout_s)
    missing = [
        k for k in ("shape_meta", "noise_shape", "n_obs_steps", "n_action_steps") if not getattr(client, k)
    ]
    takes_noise = getattr(client, "noise_key", "") is not None  # robosteer's wire always does; openpi's says
    if missing or not takes_noise:
        client.close()
        what = f"announces no {', '.join(missing)}" if missing else "takes no initial noise (no noise key)"
        raise PolicyConnectionError(
            f"the policy served at {url} {what}: DSRL steers a base through its initial noise, so the server "
            "must take it (robosteer-serve does, in either protocol; openpi's own servers do not)"
        )
    return ServedBase(client, url)
