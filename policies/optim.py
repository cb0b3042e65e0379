"""Learning-rate schedules shared by the trainer and the learners (diffusers' curves, without diffusers)."""

from __future__ import annotations

import math
from collections.abc import Callable

LR_SCHEDULERS = ("cosine", "linear", "constant")  # after a linear warm-up


def lr_lambda(name: str, warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """LR multiplier: linear warm-up, then cosine / linear decay to 0 at ``total_steps``, or constant.

    Same curves as diffusers' ``get_scheduler`` (cosine with half a period), without importing diffusers.
    """
    if name not in LR_SCHEDULERS:
        raise ValueError(f"lr_scheduler={name!r}: expected one of ['cosine', 'linear', 'constant']")

    def fn(step: int) -> float:
        if step < warmup_steps:
            return float(step) / float(max(1, warmup_steps))
        if name == "constant":
            return 1.0
        progress = float(step - warmup_steps) / float(max(1, total_steps - warmup_steps))
        if name == "linear":
            return max(0.0, 1.0 - progress)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    return fn
