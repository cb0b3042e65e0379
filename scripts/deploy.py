"""robosteer-deploy: run a policy (a checkpoint, or ws://HOST:PORT) on a robot through the safety filter.

Writes into ``out``: ``episodes.hdf5`` (robomimic layout, every episode including aborted ones),
``metrics.json`` (success_rate, episodes, env_steps, wall_time_s, latency and safety figures) and
``safety_events.jsonl``. A fault (server gone, policy stalled, link lost) stops the arm, keeps the data,
writes the metrics with ``error`` and exits with status 1.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from robosteer.scripts.common import (
    UsageError,
    atomic_write_text,
    check_policy_inputs,
    console_main,
    exit_codes,
    format_table,
    start_run,
    write_metrics,
)

log = logging.getLogger("robosteer.deploy")


def check_safety_switch(cfg: DictConfig) -> None:
    """``safety.enabled=false`` runs an arm without limits: only with ``unsafe_ack=true``, and with a warning."""
    if OmegaConf.is_missing(cfg.safety, "enabled") or cfg.safety.enabled:
        return
    if not cfg.get("unsafe_ack", False):
        raise UsageError(
            "safety.enabled=false turns off every limit and the workspace box (NaN rejection and the watchdog "
            "stay): add unsafe_ack=true to confirm, or keep safety.enabled=true"
        )
    log.warning("safety.enabled=false (unsafe_ack=true): the safety filter enforces no limits in this run")


def cli_overrides(args: list[str]) -> list[str]:
    """``policy=`` is also the name of a config group (configs/policy/), which Hydra would try to load, so
    the user's ``policy=`` override is passed on as ``policy_source=``."""
    return [("policy_source=" + a.split("=", 1)[1]) if a.startswith("policy=") else a for a in args]


def _plain(node: Any) -> dict[str, Any]:
    """An OmegaConf mapping (or None) as a plain dict."""
    if node is None:
        return {}
    out = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)
    assert isinstance(out, dict)
    return {str(k): v for k, v in out.items()}


def load_chunk_policy(cfg: DictConfig) -> Any:
    """A local checkpoint (wrapped as a numpy backend) or a remote policy client."""
    spec = str(cfg.policy_source)
    if spec.startswith(("ws://", "wss://")):
        from robosteer.real.client import PolicyClient

        return PolicyClient(spec, token=cfg.token, timeout_s=float(cfg.policy_timeout_s))
    from robosteer.real.server import load_backend

    return load_backend(spec, which=str(cfg.which), deterministic=bool(cfg.deterministic))


def runtime_config(cfg: DictConfig, **fixed: Any) -> Any:
    """The control loop's knobs from ``cfg`` (deploy's top-level keys, or steer's ``runtime`` node: keys it
    lacks keep :class:`~robosteer.real.runtime.RuntimeConfig`'s defaults), ``fixed`` over them; validated."""
    from robosteer.real.runtime import RuntimeConfig

    given = {f.name: cfg[f.name] for f in dataclasses.fields(RuntimeConfig) if cfg.get(f.name) is not None}
    rc = RuntimeConfig(**{**given, **fixed})
    rc.validate()
    return rc


def robot_driver(cfg: DictConfig, shape_meta: dict[str, Any], task: str | None) -> dict[str, Any]:
    """The driver's keyword arguments; the sim twin also gets the task, the seed, and renders what the
    policy reads (state, or proprio + its cameras at its image size)."""
    driver = _plain(cfg.robot.driver)
    if cfg.robot.name == "sim_twin":
        if not task:
            raise ValueError(
                "robot=sim_twin needs task=<name> (the policy names no training task), e.g. task=push-v3"
            )
        from robosteer.scripts.evaluate import obs_mode

        mode, cams, size = obs_mode(shape_meta)
        driver.update(task=str(task), seed=int(cfg.seed), obs=mode, cameras=list(cams), image_size=size)
    return driver


def safety_filter(cfg: DictConfig, robot: Any) -> Any:
    """The safety filter over the robot's own defaults, then ``robot.safety``, then the ``safety.*`` keys given."""
    from robosteer.real.safety import SafetyConfig, SafetyFilter

    defaults = robot.safety_defaults() if hasattr(robot, "safety_defaults") else {}
    given = {k: v for k, v in _plain(cfg.get("safety")).items() if v != "???"}  # ???: not given
    overrides = {**_plain(cfg.robot.get("safety")), **given}
    return SafetyFilter(
        SafetyConfig.from_dict({**defaults, **overrides}), robot.action_spec.shape[0], 1 / robot.rate_hz
    )


# Stages whose ValueError/KeyError/TypeError/FileNotFoundError is a configuration mistake, not a fault.
CONFIG_STAGES = (
    "loading the policy",
    "setting up the robot",
    "setting up the safety filter and control loop",
)


def _user_error(e: BaseException) -> bool:
    """A bad argument, key, value or file (reported as such), not a fault of a link, server or robot."""
    from robosteer.policies.checkpoint import CheckpointError
    from robosteer.real.protocol import ProtocolError

    if isinstance(e, ProtocolError):  # a ValueError, but the link's fault
        return False
    # a missing or corrupt checkpoint (CheckpointError) too: exit_codes reports it (2)
    return isinstance(e, CheckpointError | ValueError | KeyError | TypeError | FileNotFoundError)


def open_recording(
    cfg: DictConfig, run_dir: Path, task: str | None, driver: dict[str, Any], fps: float
) -> Any:
    """The episodes' file (robomimic layout, trainable), with what ran them in its env_args and the rate its
    steps stand for (``fps``: a LeRobot export reads it)."""
    from robosteer.policies.data import DatasetWriter

    env_args = {
        "env_name": str(task or cfg.robot.name),
        "type": 2,
        "env_kwargs": {
            "suite": "metaworld" if cfg.robot.name == "sim_twin" else "real",
            "obs": driver.get("obs", "state"),
            **driver,
        },
        "deploy": {"robot": str(cfg.robot.name), "policy": str(cfg.policy_source), "mode": str(cfg.mode)},
    }
    return DatasetWriter(
        run_dir / "episodes.hdf5", env_args=env_args, split_seed=int(cfg.seed), attrs={"fps": float(fps)}
    )


def print_episode(show: bool, ep: dict[str, Any]) -> None:
    """One line per finished episode (progress=true)."""
    if show:
        print(f"episode seed={ep.get('seed')}: {ep.get('status')} in {ep.get('steps')} steps", flush=True)


def close_all(*steps: tuple[str, Callable[[], Any] | None]) -> list[str]:
    """Attempt every (what, close) step in order; each failure is recorded, none stops the rest."""
    errors = []
    for what, close in steps:
        if close is None:
            continue
        try:
            close()
        except Exception as e:
            errors.append(f"{what}: {type(e).__name__}: {e}")
    return errors


def deploy(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Build policy, robot, safety filter and control loop; run the episodes; return the metrics.

    Every fault, at any point (connecting, resetting between episodes, recording, closing), follows one
    contract: the arm is stopped, what was recorded is kept, and the metrics come back with ``error`` set
    (the caller writes them and exits 1). Configuration mistakes found before the first episode raise.
    """
    import time

    from robosteer.real.drivers import make_robot
    from robosteer.real.runtime import ControlLoop, episode_metrics, run_episodes

    start = time.perf_counter()
    runtime_cfg = runtime_config(cfg)  # before a twin is spawned or an arm connected
    check_safety_switch(cfg)
    events_path = run_dir / "safety_events.jsonl"
    driver = _plain(cfg.robot.driver)
    task = cfg.task
    policy: Any = None
    robot: Any = None
    safety: Any = None
    loop: Any = None
    writer: Any = None
    metrics: dict[str, Any] | None = None
    errors: list[str] = []
    stage = "loading the policy"
    try:
        policy = load_chunk_policy(cfg)
        check_policy_inputs(cfg, policy.shape_meta, f"policy={cfg.policy_source}")
        task = cfg.task or getattr(policy, "task", None)
        driver = robot_driver(cfg, policy.shape_meta, task)
        stage = "setting up the robot"
        robot = make_robot(str(cfg.robot.name), **driver)
        stage = "connecting to the robot"
        robot.connect()
        stage = "setting up the safety filter and control loop"
        safety = safety_filter(cfg, robot)
        loop = ControlLoop(robot, policy, safety, runtime_cfg)
        stage = "opening the recording"
        writer = open_recording(cfg, run_dir, task, driver, robot.data_rate_hz) if cfg.record else None
        seeds = [int(cfg.seed) + k for k in range(int(cfg.episodes))]
        stage = "running episodes"
        progress = partial(print_episode, bool(cfg.progress))
        metrics = run_episodes(loop, int(cfg.episodes), seeds, writer=writer, on_episode=progress)
    except (Exception, KeyboardInterrupt) as e:
        if _user_error(e) and stage in CONFIG_STAGES:
            _close_quietly(robot, writer, loop, policy)
            raise
        reached_arm = robot is not None and stage != "setting up the robot"
        if reached_arm:
            with contextlib.suppress(Exception):  # the link may be what failed
                robot.stop()
        errors.append(f"{stage}: {type(e).__name__}: {e}" + ("; the arm was stopped" if reached_arm else ""))
    # cleanup: each step is attempted; a failure in one is a fault too (after any earlier error)
    errors += close_all(
        ("closing the recording", None if writer is None else writer.close),
        ("closing the control loop", None if loop is None else loop.close),
        ("writing safety events", lambda: _write_events(events_path, safety)),
        ("disconnecting the robot", None if robot is None else robot.disconnect),
        ("closing the policy", getattr(policy, "close", None)),
    )
    if metrics is None:  # the run failed before any episode finished
        counts = dict(safety.counts) if safety is not None else {}
        metrics = episode_metrics([], None, time.perf_counter() - start, counts)
    metrics["error"] = metrics["error"] or (errors[0] if errors else None)
    later = [e for e in errors if e != metrics["error"]]
    if later:  # faults while closing, after the first one
        metrics["cleanup_errors"] = later
    metrics.update(
        task=task,
        robot=str(cfg.robot.name),
        policy=str(cfg.policy_source),
        mode=str(cfg.mode),
        driver=driver,
        dataset=str(run_dir / "episodes.hdf5") if cfg.record else None,
        safety_events_file=str(events_path),
    )
    return metrics


def _write_events(path: Path, safety: Any) -> None:
    events = [] if safety is None else safety.events
    atomic_write_text(path, "".join(json.dumps(e.to_dict()) + "\n" for e in events))


def _close_quietly(robot: Any, writer: Any, loop: Any, policy: Any) -> None:
    """Release what a configuration error left open (it is reported instead of any of these)."""
    for part, method in ((writer, "close"), (loop, "close"), (robot, "disconnect"), (policy, "close")):
        with contextlib.suppress(Exception):
            getattr(part, method, lambda: None)()


def _main(cfg: DictConfig) -> None:
    import torch

    torch.set_num_threads(int(cfg.threads))
    run_dir = start_run(cfg)
    with exit_codes("robosteer-deploy"):  # a missing or corrupt checkpoint: 2
        metrics = deploy(cfg, run_dir)
    write_metrics(run_dir, metrics)
    row = {
        "robot": metrics["robot"],
        "task": metrics["task"],
        "mode": metrics["mode"],
        "episodes": metrics["episodes"],
        "success": metrics["success_rate"],
        "infer ms": metrics["infer_ms_mean"] or 0.0,
        "stale dropped": metrics["stale_dropped"],
        "wall s": metrics["wall_time_s"],
    }
    print(format_table([row]))
    print(f"run: {run_dir}")
    if metrics["error"]:
        print(f"error: {metrics['error']} (recorded data kept in {metrics['dataset']})", file=sys.stderr)
        raise SystemExit(1)


def main() -> None:
    """Console-script entry point (``policy=`` arrives as ``policy_source=``: :func:`cli_overrides`)."""
    sys.argv = cli_overrides(sys.argv)
    console_main("robosteer-deploy", "deploy", _main)


if __name__ == "__main__":
    main()
