"""The frozen base a steering run wraps, opened in one place: a run directory of robosteer-train, a policy
served over the network (``ws://...``), or plain SAC's identity map (``scratch``).

Why one module: the same three cases are met when a steering run starts (:func:`open_base`) and again when
its checkpoint is loaded for evaluation, serving or deployment (:func:`load_run`, which also follows a runs/
folder that was moved and refuses a base whose weights changed). Beside :mod:`robosteer.policies.loading`,
which loads every run kind through these.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robosteer.policies.checkpoint import (
    CheckpointError,
    find_checkpoint,
    load_checkpoint,
    load_policy,
    read_checkpoint_config,
    state_dict_hash,
)
from robosteer.policies.steering.scratch import SCRATCH, make_scratch_base

log = logging.getLogger(__name__)


def base_source(spec: str) -> str:
    """``served`` (a ``ws://`` / ``wss://`` URL), ``scratch``, or ``run`` (a run directory)."""
    from robosteer.real.client import is_url

    return "served" if is_url(spec) else SCRATCH if spec == SCRATCH else "run"


@dataclass
class LoadedBase:
    """The frozen base, the task it acts in, and what a later load needs to find the same one again."""

    policy: Any
    task: str
    source: str  # run | served | scratch (:func:`base_source`)
    ckpt_dir: Path | None = None  # a run's checkpoint directory (its offline data sits beside it)
    scratch_shape: list[int] | None = None  # scratch: [state_dim, action_dim, Ta]

    def record(self, spec: str, which: str, protocol: str) -> dict[str, Any]:
        """The checkpoint's fields for :func:`load_run`: where the base is, how to reach it, its weights' hash
        (a served base's weights are the server's to keep: no hash)."""
        return {
            "task": self.task,
            "base": str(Path(spec).resolve()) if self.source == "run" else spec,
            "base_protocol": protocol if self.source == "served" else None,
            "scratch_shape": self.scratch_shape,
            "base_which": which,
            "base_hash": None if self.source == "served" else state_dict_hash(self.policy),
        }


def open_base(
    spec: str,
    *,
    device: Any = "cpu",
    which: str = "best",
    task: str | None = None,
    protocol: str = "robosteer",
    token: Any = None,
    timeout_s: float = 10.0,
    scratch_shape: Sequence[int] | None = None,
) -> LoadedBase:
    """The base named by ``spec`` on ``device``; a base that cannot be steered is refused in one line.

    ``scratch_shape`` ([state_dim, action_dim, Ta]) is the identity map's size, which only the task's env
    knows: the command that builds envs measures it (policies never import the simulator).
    """
    from robosteer.policies.steering.served import served_base
    from robosteer.real.client import PolicyConnectionError

    source = base_source(spec)
    if source == "served":  # DSRL over the wire: only the noise -> chunk map is needed
        try:
            served = served_base(spec, protocol, token, timeout_s)
        except PolicyConnectionError as e:
            raise ValueError(f"base={spec}: {e}") from None
        if not (task or served.task):
            raise ValueError(f"the policy served at {spec} names no task: pass task=<name>")
        return LoadedBase(served.to(device), str(task or served.task), source)
    if source == SCRATCH:
        if scratch_shape is None or not task:
            raise ValueError("base=scratch needs task=<name> (the identity map takes its size from the env)")
        shape = [int(d) for d in scratch_shape]
        return LoadedBase(make_scratch_base(*shape).to(device), task, source, scratch_shape=shape)
    policy = load_policy(spec, which=which, device=device)
    if getattr(policy, "name", "") == "streaming":
        raise ValueError(
            "steering needs a stateless noise->chunk map: use a diffusion or flow base, not streaming"
        )
    ckpt_dir, _ = find_checkpoint(spec, which)
    task = task or read_checkpoint_config(ckpt_dir).get("task")
    if not task:
        raise ValueError(f"the base {spec} names no task: pass task=<name>")
    return LoadedBase(policy, str(task), source, ckpt_dir=ckpt_dir)


def load_run(path: str, which: str, kind: str, keys: tuple[str, ...]) -> tuple[Any, Any]:
    """(checkpoint with module ``agent``, its base policy) of a steering run directory or checkpoint.

    ``which``: ``latest`` or ``best`` (``latest`` when the run never evaluated). The base is reloaded from its
    recorded path and refused if its weights' hash changed; ``base=scratch`` gets its identity map back.
    """
    p = Path(path)
    if which not in ("best", "latest"):
        raise CheckpointError(f"which={which!r} is not valid for a steering run: expected 'best' or 'latest'")
    ckpt_dir = p
    if (p / "checkpoints").is_dir():
        ckpt_dir = p / "checkpoints" / (which if (p / "checkpoints" / which).exists() else "latest")
    ck = load_checkpoint(ckpt_dir, names=["agent"])
    cfg, where = ck.config, ck.path / "config.json"
    if cfg.get("kind") != kind:
        raise CheckpointError(f"{where}: key 'kind' is {cfg.get('kind')!r}, expected {kind!r}")
    for key in ("base", "base_which", *keys):
        if key not in cfg:
            raise CheckpointError(f"{where}: key {key!r} is missing (written by an older robosteer?)")
    run_dir = ck.path.parent.parent if ck.path.parent.name == "checkpoints" else ck.path
    return ck, reopen_base(cfg, where, run_dir, kind)


def reopen_base(cfg: dict[str, Any], where: Path, run_dir: Path, kind: str) -> Any:
    """The base a steering checkpoint's ``cfg`` recorded (:meth:`LoadedBase.record`): the identity map, the
    server dialled again, or the run directory — or, if runs/ moved as a whole, the one beside the run."""
    from robosteer.policies.steering.served import served_base
    from robosteer.real.client import PolicyConnectionError

    source = base_source(cfg["base"])
    if source == SCRATCH:  # plain SAC from scratch: the identity noise -> chunk map
        return make_scratch_base(*cfg["scratch_shape"])
    if source == "served":  # steered over the wire (base=ws://...): dial the server again
        try:
            return served_base(cfg["base"], cfg.get("base_protocol") or "robosteer")
        except PolicyConnectionError as e:
            raise CheckpointError(
                f"{where}: this run steers the policy served at {cfg['base']}: {e}"
            ) from None
    base_dir = Path(cfg["base"])
    beside = run_dir.parent / base_dir.name  # runs/ moved or copied as a whole: the base sits beside the run
    if not base_dir.exists() and "base_hash" in cfg and beside.is_dir():
        log.info(
            "the recorded base %s is gone; using %s beside the run (its weight hash is checked)",
            base_dir,
            beside,
        )
        base_dir = beside
    if not base_dir.exists():
        raise CheckpointError(
            f"{where}: key 'base' points to {cfg['base']}, which no longer exists (nor does {beside}): "
            f"{kind.upper()} steers that exact base policy, restore it there"
        )
    base = load_policy(base_dir, which=cfg["base_which"])
    if "base_hash" in cfg and state_dict_hash(base) != cfg["base_hash"]:
        raise CheckpointError(
            f"{where}: the base at {base_dir} (which={cfg['base_which']}) is not the one this actor was "
            "trained on (weight hash differs)"
        )
    return base
