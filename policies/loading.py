"""One ``load(run_dir)`` for every run robosteer writes, keyed by the ``kind`` its checkpoint records.

robosteer-train writes ``policy``, robosteer-steer ``dsrl`` or ``expo``, robosteer-value ``critic``. Evaluation,
the policy server and deploy call only :func:`load`; each kind's loader stays beside its algorithm.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robosteer.policies.checkpoint import CheckpointError

ACTING_KINDS = ("policy", "dsrl", "expo")  # what acts (act/reset): robosteer-eval, -serve, -deploy load these
KINDS = (*ACTING_KINDS, "critic")


def run_kind(path: str | os.PathLike) -> str:
    """The ``kind`` a run (or one of its checkpoints) recorded; runs written before kinds existed are policies."""
    p = Path(path)
    for cfg in (p / "checkpoints" / "latest" / "config.json", p / "config.json"):
        if cfg.is_file():
            try:
                kind = json.loads(cfg.read_text()).get("kind", "policy")
            except (OSError, ValueError, AttributeError) as e:
                raise CheckpointError(f"{cfg}: not a readable config.json ({e})") from e
            if kind not in KINDS:
                near = difflib.get_close_matches(str(kind), KINDS, n=1)
                hint = f"; nearest valid choice: {near[0]!r}" if near else ""
                raise CheckpointError(f"{cfg}: key 'kind' is {kind!r}, expected one of {list(KINDS)}{hint}")
            return str(kind)
    return "policy"  # a train run's best/ or ema/ only: load_policy finds it (or names what is missing)


def load(
    path: str | os.PathLike, which: str = "best", deterministic: bool = True, device: str = "cpu"
) -> Any:
    """Whatever the run at ``path`` holds, ready to use in eval mode.

    - ``policy`` (robosteer-train): the ``GenerativePolicy`` (``which``: best | latest | ema);
    - ``dsrl`` / ``expo`` (robosteer-steer): its frozen base + steering actor as one ``ChunkPolicy``
      (``which``: best | latest; ``ema`` means latest; ``deterministic``: DSRL's actor plays its mean);
    - ``critic`` (robosteer-value): the frozen ``NormalizedCritic``.
    """
    return LOADERS[run_kind(path)](Path(path), which, deterministic, device).eval()


def _policy(path: Path, which: str, deterministic: bool, device: str) -> Any:
    from robosteer.policies.checkpoint import load_policy

    return load_policy(path, which=which, device=device)


def _steering_which(which: str) -> str:
    return "best" if which == "best" else "latest"


def _dsrl(path: Path, which: str, deterministic: bool, device: str) -> Any:
    from robosteer.policies.steering.dsrl import load_steered_policy

    return load_steered_policy(str(path), deterministic, _steering_which(which), device)


def _expo(path: Path, which: str, deterministic: bool, device: str) -> Any:
    from robosteer.policies.steering.expo import load_expo_policy

    return load_expo_policy(str(path), _steering_which(which), device)  # OTF edits sampled, as the reference


def _critic(path: Path, which: str, deterministic: bool, device: str) -> Any:
    from robosteer.policies.value import load_critic

    return load_critic(path, device=device)


LOADERS: dict[str, Callable[[Path, str, bool, str], Any]] = {
    "policy": _policy,
    "dsrl": _dsrl,
    "expo": _expo,
    "critic": _critic,
}
