"""Steering methods that improve a frozen generative policy without retraining it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

STEERING_KINDS = ("dsrl", "expo")


def is_steering_run(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a robosteer-steer run (or its checkpoint) rather than a robosteer-train one."""
    return _run_kind(Path(path)) in STEERING_KINDS


def load_steered_policy(path: str | os.PathLike, deterministic: bool = True, which: str = "latest") -> Any:
    """Base + steering actor of a steering run, as one policy with ``act``/``reset`` (see the method's module)."""
    from policies.steering.dsrl import load_steered_policy as load_dsrl

    if _run_kind(Path(path)) == "expo":
        from policies.steering.expo import load_expo_policy

        return load_expo_policy(str(path), which=which)  # OTF edits are sampled, as the reference evaluates
    return load_dsrl(str(path), deterministic=deterministic, which=which)


def _run_kind(p: Path) -> str | None:
    """The ``kind`` recorded in a steering run's (or checkpoint's) config.json, if readable."""
    for cfg in (p / "checkpoints" / "latest" / "config.json", p / "config.json"):
        if cfg.is_file():
            try:
                return json.loads(cfg.read_text()).get("kind")
            except (OSError, ValueError, AttributeError):
                return None
    return None


__all__ = ["STEERING_KINDS", "is_steering_run", "load_steered_policy"]
