"""robosteer-train: imitation training of a diffusion / flow / streaming policy from demonstrations.

    robosteer-train policy=diffusion dataset=runs/demos/demos.hdf5 steps=20000 out=runs/dp
    robosteer-train policy=flow dataset=... task=push-v3 eval_every=5000 eval_episodes=50 out=runs/fm
    robosteer-train ... out=runs/dp resume=true                  # exact continuation
    torchrun --nproc_per_node=2 -m robosteer.scripts.train ...            # data parallel (gloo on CPU)

The dataset fixes the policy's ``shape_meta`` and normalisation stats; the loop lives in
``policies.train.Trainer``. The run directory ``out`` holds ``config.yaml``, ``metrics.json``,
``checkpoints/{latest,best}``, TensorBoard events under ``tb/`` and evaluation videos under ``videos/``.
``sim`` is imported here only (``policies`` never imports it): evaluation is a callback handed to the trainer.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from robosteer.scripts import schemas
from robosteer.scripts.common import (
    console_main,
    dataset_paths,
    exit_codes,
    format_table,
    start_run,
    write_metrics,
)

log = logging.getLogger("robosteer.train")


def policy_config(cfg: DictConfig) -> tuple[str, dict[str, Any]]:
    """(policy name, its hyperparameters) from the ``policy`` config group."""
    pcfg = OmegaConf.to_container(cfg.policy, resolve=True)
    assert isinstance(pcfg, dict)
    return str(pcfg.pop("name")), pcfg


def build_dataset(cfg: DictConfig) -> Any:
    """The training windows; To / Tp / Ta come from the policy config so data and model agree."""
    from robosteer.policies.data import SequenceDataset

    _, p = policy_config(cfg)
    return SequenceDataset(
        dataset_paths(cfg),
        obs_keys=list(cfg.obs_keys),
        n_obs_steps=int(p["n_obs_steps"]),
        horizon=int(p["horizon"]),
        n_action_steps=int(p["n_action_steps"]),
        split="train",
        demo_limit=cfg.demo_limit,
    )


def build_policy(
    cfg: DictConfig, shape_meta: Mapping[str, Any], stats: Mapping[str, Any] | None, **overrides: Any
) -> torch.nn.Module:
    """``policies.make_policy(name, shape_meta, stats, **hyperparameters)`` (``overrides`` win, e.g. task names)."""
    from robosteer.policies.registry import make_policy

    name, p = policy_config(cfg)
    return make_policy(name, shape_meta, stats=stats, **{**p, **overrides})


class SimEvaluation:
    """The trainer's evaluation callback, ``evaluation(policy, step) -> metrics``, over ``sim`` envs of
    ``cfg.task`` (videos under ``<run_dir>/videos``); ``close()`` closes its envs."""

    def __init__(self, cfg: DictConfig, run_dir: Path, shape_meta: Mapping[str, Any]) -> None:
        from robosteer import sim
        from robosteer.scripts.evaluate import obs_mode

        mode, cams, size = obs_mode(dict(shape_meta))
        self.cfg, self.run_dir = cfg, run_dir
        self.env = sim.make_env(
            str(cfg.task),
            num_envs=int(cfg.eval_envs),
            seed=int(cfg.eval_seed),
            obs=mode,
            image_size=size,
            cameras=cams,
            vectorization="sync",  # the evaluation envs step in this process (robosteer-eval has the choice)
            randomization=cfg.get("randomization"),
        )

    def __call__(self, policy: torch.nn.Module, step: int) -> dict[str, Any]:
        from robosteer import sim

        cfg = self.cfg
        if getattr(policy, "task_names", None):  # a multi-task generalist is evaluated on cfg.task
            policy.set_task(str(cfg.task))
        video = self.run_dir / "videos" / f"step_{step:07d}.mp4" if int(cfg.eval_video_episodes) > 0 else None
        m = sim.evaluate(
            self.env,
            policy,
            episodes=int(cfg.eval_episodes),
            seed=int(cfg.eval_seed),
            video_path=video,
            video_episodes=int(cfg.eval_video_episodes),
            progress=False,
        )
        # Per-episode lists stay out of checkpoints and metrics; the scalars and the CI are what matter.
        keep = {k: v for k, v in m.items() if isinstance(v, bool | int | float | str)}
        keep["success_ci95"] = list(m.get("success_ci95", []))
        keep["videos"] = [str(v) for v in m.get("videos", [])]
        if "randomization" in m:  # the drawn parameters' summary (per-episode lists stay out)
            keep["randomization_params"] = m["randomization"]["params"]
        return keep

    def close(self) -> None:
        self.env.close()


def build_eval_fn(cfg: DictConfig, run_dir: Path, shape_meta: Mapping[str, Any]) -> SimEvaluation | None:
    """The evaluation callback over ``cfg.task``; None without a task (training only)."""
    return SimEvaluation(cfg, run_dir, shape_meta) if cfg.task else None


def _init_distributed(cfg: DictConfig) -> tuple[int, str]:
    """Join the process group when launched by torchrun (WORLD_SIZE > 1); return (rank, device)."""
    want = str(cfg.device)
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, want
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if want == "cuda":
        torch.cuda.set_device(local_rank)
        want = f"cuda:{local_rank}"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if want.startswith("cuda") else "gloo")
    return dist.get_rank(), want


def run(cfg: DictConfig) -> dict[str, Any]:
    """Train as configured; return the metrics also written to ``out/metrics.json`` (rank 0)."""
    from robosteer.policies.train import Trainer, seed_everything

    torch.set_num_threads(int(cfg.threads))
    rank, device = _init_distributed(cfg)
    run_dir = start_run(cfg) if rank == 0 else Path(str(cfg.out)).expanduser().resolve()
    seed_everything(int(cfg.seed))  # same on every rank: identical initial weights
    name, pcfg = policy_config(cfg)
    dataset = build_dataset(cfg)
    shape_meta, stats = dataset.shape_meta, dataset.stats()
    tasks = list(getattr(dataset, "task_names", []) or [])
    task = str(cfg.task) if cfg.task else (tasks[0] if len(tasks) == 1 else None)
    # files of several tasks: the policy learns a task embedding (task id = index in dataset.task_names)
    policy = build_policy(cfg, shape_meta, stats, **({"task_names": tasks} if len(tasks) > 1 else {}))
    get_config = getattr(policy, "get_config", None)
    eval_fn = build_eval_fn(cfg, run_dir, shape_meta) if rank == 0 else None
    trainer = Trainer(
        policy,
        dataset,
        schemas.train_config(cfg, device=device),
        run_dir,
        policy_name=name,
        shape_meta=shape_meta,
        policy_config=get_config() if callable(get_config) else pcfg,
        eval_fn=eval_fn,
        run_config=OmegaConf.to_container(cfg, resolve=True),  # type: ignore[arg-type]
        checkpoint_meta={
            "task": task,
            "tasks": tasks,
            "dataset": dataset_paths(cfg),
            "obs_keys": list(cfg.obs_keys),
        },
    )
    log.info(
        "%s: %d windows from %d episodes, %.2fM params, %s",
        name,
        len(dataset),
        getattr(dataset, "num_episodes", -1),
        sum(p.numel() for p in policy.parameters()) / 1e6,
        device,
    )
    try:
        metrics = trainer.fit()
    finally:
        if eval_fn is not None:
            eval_fn.close()
    if rank != 0:
        return metrics
    metrics.setdefault("success_rate", None)
    metrics.setdefault("episodes", 0)  # no evaluation: no env interaction
    metrics.setdefault("env_steps", 0)
    metrics.update(
        {
            "policy": name,
            "task": task,
            "dataset": dataset_paths(cfg),
            "num_windows": len(dataset),
            "num_episodes": getattr(dataset, "num_episodes", None),
        }
    )
    write_metrics(run_dir, metrics)
    return metrics


def _main(cfg: DictConfig) -> None:
    with exit_codes("robosteer-train"):  # bad dataset/checkpoint: 2; NaN loss or gradient: 1
        metrics = run(cfg)
    if int(os.environ.get("RANK", "0")) != 0:
        return
    row = {
        "policy": metrics["policy"],
        "steps": metrics["steps"],
        "final loss": metrics["final_loss"],
        "samples/s": metrics["samples_per_s"],
        "wall s": metrics["wall_time_s"],
    }
    if metrics.get("success_rate") is not None:
        row["success"] = metrics["success_rate"]
        row["best"] = metrics.get("best_success_rate")
    print(format_table([row]))
    print(f"run: {Path(str(cfg.out)).resolve()}")


def main() -> None:
    """Console-script entry point."""
    console_main("robosteer-train", "train", _main)


if __name__ == "__main__":
    main()
