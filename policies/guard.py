"""Non-finite guards shared by every learning loop: imitation training, value learning and steering.

Why: one NaN in one action of a dataset used to train to the end, exit 0 and write a checkpoint whose
weights were mostly NaN, which was then served and deployed. Each loop checks its losses (and the gradient
norm where it computes one) at every update and its trainable weights before every save, and raises
:class:`NonFiniteError` instead of saving: the checkpoint on disk stays the last good one. The console
scripts turn the error into a one-line message and exit status 1 (a runtime fault, DESIGN.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch


class NonFiniteError(RuntimeError):
    """A loss, gradient norm or weight became NaN/inf: the run stopped and wrote no checkpoint after it."""


def losses(info: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of an update's info whose name ends in ``loss``: the figures that must stay finite (other
    diagnostics may be NaN by design, e.g. Cal-QL's bound rate without Monte-Carlo returns)."""
    return {k: v for k, v in info.items() if k.endswith("loss")}


def _last_good(checkpoint: str | Path | None, checkpoint_step: int | None, unit: str) -> str:
    if checkpoint is None or checkpoint_step is None:
        return "no checkpoint had been written"
    return f"{checkpoint} holds the last good state ({unit} {checkpoint_step})"


def check_finite(
    values: Mapping[str, Any],
    *,
    step: int,
    what: str,
    checkpoint: str | Path | None = None,
    checkpoint_step: int | None = None,
    unit: str = "step",
) -> None:
    """Raise :class:`NonFiniteError` naming ``what``, ``step`` and every NaN/inf among ``values`` (floats or
    one-element tensors), and where the last good checkpoint is (``checkpoint``, written at ``checkpoint_step``;
    ``unit`` names what steps count, e.g. ``"env step"``)."""
    bad = {}
    for name, value in values.items():
        x = float(value.detach()) if isinstance(value, torch.Tensor) else float(value)
        if not math.isfinite(x):
            bad[name] = x
    if bad:
        shown = ", ".join(f"{k} = {v}" for k, v in bad.items())
        raise NonFiniteError(
            f"{what}: non-finite {shown} at {unit} {step}; stopped without saving: "
            f"{_last_good(checkpoint, checkpoint_step, unit)}"
        )


def check_finite_weights(
    params: Iterable[tuple[str, torch.Tensor]],
    *,
    step: int,
    what: str,
    checkpoint: str | Path | None = None,
    checkpoint_step: int | None = None,
    unit: str = "step",
) -> None:
    """Refuse to save NaN/inf weights (``named_parameters()``): catches a non-finite gradient step whose
    loss was still finite, which the per-update loss check cannot see."""
    for name, p in params:
        if p.is_floating_point() and not bool(torch.isfinite(p.detach()).all()):
            raise NonFiniteError(
                f"{what}: weights {name!r} hold NaN/inf at {unit} {step}; stopped without saving: "
                f"{_last_good(checkpoint, checkpoint_step, unit)}"
            )
