"""Exponential moving average of a policy's weights, as diffusion_policy's ``EMAModel``.

The decay warms up as ``1 - (1 + step / inv_gamma) ** -power`` (power 0.75 reaches 0.999 at ~10k steps and
0.9999 at ~215k), clamped to ``[min_value, max_value]`` and 0 during the first ``update_after_step`` steps.
The averaged copy is what evaluation uses and what a checkpoint's ``ema`` weights hold.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm


class EMAModel:
    """Keeps ``averaged_model``, a frozen deep copy of a model, updated by :meth:`step` after each update."""

    def __init__(
        self,
        model: nn.Module,
        update_after_step: int = 0,
        inv_gamma: float = 1.0,
        power: float = 0.75,
        min_value: float = 0.0,
        max_value: float = 0.9999,
    ) -> None:
        self.averaged_model = copy.deepcopy(model)
        self.averaged_model.eval()
        self.averaged_model.requires_grad_(False)
        self.update_after_step = int(update_after_step)
        self.inv_gamma = float(inv_gamma)
        self.power = float(power)
        self.min_value = float(min_value)
        self.max_value = float(max_value)
        self.decay = 0.0
        self.optimization_step = 0

    def get_decay(self, optimization_step: int) -> float:
        """Decay factor used for the update at ``optimization_step`` (diffusion_policy's formula)."""
        step = optimization_step - self.update_after_step - 1
        if step <= 0:
            return 0.0
        return max(self.min_value, min(1 - (1 + step / self.inv_gamma) ** -self.power, self.max_value))

    @torch.no_grad()
    def step(self, new_model: nn.Module) -> None:
        """Average ``new_model``'s trainable parameters in; copy frozen ones, BatchNorm params and buffers."""
        self.decay = self.get_decay(self.optimization_step)
        ema_avg: list[torch.Tensor] = []
        new_avg: list[torch.Tensor] = []
        for module, ema_module in zip(new_model.modules(), self.averaged_model.modules(), strict=True):
            for param, ema_param in zip(
                module.parameters(recurse=False), ema_module.parameters(recurse=False), strict=True
            ):
                if isinstance(module, _BatchNorm) or not param.requires_grad:
                    ema_param.copy_(param.detach().to(dtype=ema_param.dtype))
                else:
                    ema_avg.append(ema_param)
                    new_avg.append(param.detach().to(dtype=ema_param.dtype))
            for buf, ema_buf in zip(
                module.buffers(recurse=False), ema_module.buffers(recurse=False), strict=True
            ):
                ema_buf.copy_(buf)
        if ema_avg:
            torch._foreach_mul_(ema_avg, self.decay)
            torch._foreach_add_(ema_avg, new_avg, alpha=1 - self.decay)
        self.optimization_step += 1

    def state_dict(self) -> dict[str, Any]:
        """The counters (the averaged weights are saved separately, as the checkpoint's ``ema`` module)."""
        return {"optimization_step": self.optimization_step, "decay": self.decay}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the counters saved by :meth:`state_dict`."""
        self.optimization_step = int(state["optimization_step"])
        self.decay = float(state["decay"])
