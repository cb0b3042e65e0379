"""The one replay buffer: preallocated tensors on the training device, any named fields.

Transitions are stored field by field (``obs/state``, ``action``, ``reward``, ...), so one buffer holds any
transitions, actions or latents, offline or online. ``sample_mixed``: a fixed offline share (RLPD's).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch


class ReplayBuffer:
    """A ring buffer of ``capacity`` transitions with fields ``spec = {name: (shape, dtype)}``."""

    def __init__(
        self,
        capacity: int,
        spec: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
        device: str | torch.device = "cpu",
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"replay capacity must be positive, got {capacity}")
        self.capacity = int(capacity)
        self.device = torch.device(device)
        self.spec = {k: (tuple(shape), dtype) for k, (shape, dtype) in spec.items()}
        self.data = {
            k: torch.zeros((self.capacity, *shape), dtype=dtype, device=self.device)
            for k, (shape, dtype) in self.spec.items()
        }
        self.ptr = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(self, **fields: torch.Tensor) -> None:
        """Append a batch of N transitions; every field of the spec must be given, shaped (N, *shape)."""
        missing = set(self.spec) - set(fields)
        extra = set(fields) - set(self.spec)
        if missing or extra:
            raise KeyError(
                f"replay add: missing fields {sorted(missing)}, unknown fields {sorted(extra)}; "
                f"expected exactly {sorted(self.spec)}"
            )
        n = next(iter(fields.values())).shape[0]
        idx = (self.ptr + torch.arange(n)) % self.capacity
        for k, v in fields.items():
            v = torch.as_tensor(v).to(self.device, self.spec[k][1])
            if v.shape != (n, *self.spec[k][0]):
                raise ValueError(
                    f"replay field {k!r}: got shape {tuple(v.shape)}, expected {(n, *self.spec[k][0])}"
                )
            self.data[k][idx.to(self.device)] = v
        self.ptr = int((self.ptr + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """``batch_size`` transitions drawn uniformly with replacement."""
        if self.size == 0:
            raise RuntimeError("cannot sample from an empty replay buffer")
        # Indices come from the generator's own device (the loop's generator lives on the training device).
        where = generator.device if generator is not None else torch.device("cpu")
        idx = torch.randint(0, self.size, (batch_size,), generator=generator, device=where).to(self.device)
        return {k: v[idx] for k, v in self.data.items()}

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Tensors for an exact resume (only the filled part is stored)."""
        state = {f"data/{k}": v[: self.size].clone() for k, v in self.data.items()}
        return {**state, "ptr": torch.tensor(self.ptr), "size": torch.tensor(self.size)}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        self.size = int(state["size"])
        self.ptr = int(state["ptr"])
        for k in self.data:
            self.data[k][: self.size] = state[f"data/{k}"].to(self.device)


def sample_mixed(
    offline: ReplayBuffer | None,
    online: ReplayBuffer,
    batch_size: int,
    offline_ratio: float,
    generator: torch.Generator | None = None,
) -> dict[str, torch.Tensor]:
    """Exactly ``round(batch_size · offline_ratio)`` transitions from ``offline``, the rest from ``online``."""
    n_off = round(batch_size * offline_ratio) if offline is not None and len(offline) else 0
    on = online.sample(batch_size - n_off, generator)
    if n_off == 0:
        return on
    off = offline.sample(n_off, generator)
    return {k: torch.cat([off[k], on[k]]) for k in on}
