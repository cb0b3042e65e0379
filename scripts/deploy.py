"""robosteer-deploy: run a policy (a checkpoint, or ws://HOST:PORT) on a robot through the safety filter.

Writes into ``out``: ``episodes.hdf5`` (robomimic layout, every episode including aborted ones),
``metrics.json`` (success_rate, episodes, env_steps, wall_time_s, latency and safety figures) and
``safety_events.jsonl``. A fault (server gone, policy stalled, link lost) stops the arm, keeps the data,
writes the metrics with ``error`` and exits with status 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from scripts.common import CONFIG_DIR, atomic_write_text, format_table, start_run, write_metrics


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
        from real.client import PolicyClient

        return PolicyClient(spec, token=cfg.token, timeout_s=float(cfg.policy_timeout_s))
    from real.server import load_backend

    return load_backend(spec, which=str(cfg.which), deterministic=bool(cfg.deterministic))


def deploy(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Build policy, robot, safety filter and control loop; run the episodes; return the metrics."""
    from policies.data import DatasetWriter
    from real.drivers import make_robot
    from real.runtime import ControlLoop, RuntimeConfig, run_episodes
    from real.safety import SafetyConfig, SafetyFilter

    policy = load_chunk_policy(cfg)
    task = cfg.task or getattr(policy, "task", None)
    driver = _plain(cfg.robot.driver)
    if cfg.robot.name == "sim_twin":
        if not task:
            raise ValueError(
                "robot=sim_twin needs task=<name> (the policy names no training task), e.g. task=push-v3"
            )
        driver.update(task=str(task), seed=int(cfg.seed))
    robot = make_robot(str(cfg.robot.name), **driver)
    runtime_cfg = RuntimeConfig(
        mode=str(cfg.mode),
        async_threshold=None if cfg.async_threshold is None else int(cfg.async_threshold),
        noise=str(cfg.noise),
        inpaint=bool(cfg.get("inpaint", True)),
        max_actions=cfg.max_actions,
        blend=float(cfg.blend),
        lead_s=cfg.lead_s,
        policy_timeout_s=float(cfg.policy_timeout_s),
        max_steps=cfg.max_steps,
    )
    runtime_cfg.validate()  # before a twin is spawned or an arm connected
    events_path = run_dir / "safety_events.jsonl"
    writer = None
    with robot:
        defaults = robot.safety_defaults() if hasattr(robot, "safety_defaults") else {}
        overrides = {**_plain(cfg.robot.get("safety")), **_plain(cfg.get("safety"))}
        safety = SafetyFilter(
            SafetyConfig.from_dict({**defaults, **overrides}), robot.action_spec.shape[0], 1 / robot.rate_hz
        )
        loop = ControlLoop(robot, policy, safety, runtime_cfg)
        if cfg.record:
            env_args = {
                "env_name": str(task or cfg.robot.name),
                "type": 2,
                "env_kwargs": {
                    "suite": "metaworld" if cfg.robot.name == "sim_twin" else "real",
                    "obs": "state",
                    **driver,
                },
                "deploy": {
                    "robot": str(cfg.robot.name),
                    "policy": str(cfg.policy_source),
                    "mode": str(cfg.mode),
                },
            }
            writer = DatasetWriter(run_dir / "episodes.hdf5", env_args=env_args, split_seed=int(cfg.seed))
        seeds = [int(cfg.seed) + k for k in range(int(cfg.episodes))]

        def progress(ep: dict[str, Any]) -> None:
            if cfg.progress:
                print(
                    f"episode seed={ep.get('seed')}: {ep.get('status')} in {ep.get('steps')} steps",
                    flush=True,
                )

        try:
            metrics = run_episodes(loop, int(cfg.episodes), seeds, writer=writer, on_episode=progress)
        finally:
            if writer is not None:
                writer.close()
            loop.close()
            atomic_write_text(events_path, "".join(json.dumps(e.to_dict()) + "\n" for e in safety.events))
    if hasattr(policy, "close"):
        policy.close()
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


@hydra.main(config_path=CONFIG_DIR, config_name="deploy", version_base=None)
def _main(cfg: DictConfig) -> None:
    import torch

    torch.set_num_threads(int(cfg.threads))
    run_dir = start_run(cfg)
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
    """Console-script entry point. ``policy=`` is also the name of a config group (configs/policy/), which
    Hydra would try to load, so the override is passed on as ``policy_source=``."""
    sys.argv = [("policy_source=" + a.split("=", 1)[1]) if a.startswith("policy=") else a for a in sys.argv]
    _main()


if __name__ == "__main__":
    main()
