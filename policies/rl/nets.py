"""Small network pieces: an MLP builder, a vectorised ensemble of linear layers, one optimizer step."""

from __future__ import annotations

import math

import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "gelu": nn.GELU, "mish": nn.Mish, "silu": nn.SiLU}


def activation(name: str) -> type[nn.Module]:
    """The activation class for ``name``; a clear error names the valid choices."""
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"activation {name!r} is not known: expected one of {sorted(ACTIVATIONS)}") from None


def mlp(
    in_dim: int,
    hidden: list[int] | tuple[int, ...],
    out_dim: int,
    act: str = "relu",
    layer_norm: bool = False,
) -> nn.Sequential:
    """Linear → [LayerNorm] → act, repeated, then a linear head (LayerNorm after each hidden layer as in RLPD)."""
    layers: list[nn.Module] = []
    dim = in_dim
    for width in hidden:
        layers.append(nn.Linear(dim, width))
        if layer_norm:
            layers.append(nn.LayerNorm(width))
        layers.append(activation(act)())
        dim = width
    layers.append(nn.Linear(dim, out_dim))
    return nn.Sequential(*layers)


def optimizer_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """Clear ``optimizer``'s gradients, backpropagate ``loss`` and step."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


class EnsembleLinear(nn.Module):
    """E independent linear layers applied in one batched matmul: x (E, B, in) → (E, B, out)."""

    def __init__(self, in_dim: int, out_dim: int, ensemble: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(ensemble, in_dim, out_dim))
        self.bias = nn.Parameter(torch.empty(ensemble, 1, out_dim))
        bound = 1.0 / math.sqrt(in_dim)  # nn.Linear's default init, per member
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        """``heads``: evaluate only these members (x is then (len(heads), B, in))."""
        if heads is None:
            return torch.baddbmm(self.bias, x, self.weight)  # (E, B, out)
        return torch.baddbmm(self.bias[heads], x, self.weight[heads])  # (H, B, out)


class EnsembleLayerNorm(nn.Module):
    """LayerNorm with a separate affine per ensemble member: x (E, B, D)."""

    def __init__(self, dim: int, ensemble: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ensemble, 1, dim))
        self.bias = nn.Parameter(torch.zeros(ensemble, 1, dim))

    def forward(self, x: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        w, b = (self.weight, self.bias) if heads is None else (self.weight[heads], self.bias[heads])
        return nn.functional.layer_norm(x, x.shape[-1:]) * w + b
