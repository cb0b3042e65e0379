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

import json
import logging
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from robosteer.policies.checkpoint import jsonable
from robosteer.scripts import schemas
from robosteer.scripts.common import (
    UsageError,
    atomic_write_text,
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


class Training:
    """One run's fixed parts (config, dataset, device, run directory): builds and fits a :class:`Trainer` at
    a given action noise into a given directory (the run's own, or an ``action_noise_std=auto`` probe's)."""

    def __init__(self, cfg: DictConfig, run_dir: Path, rank: int, device: str) -> None:
        self.cfg, self.run_dir, self.rank, self.device = cfg, run_dir, rank, device
        self.name, self.pcfg = policy_config(cfg)
        self.dataset = build_dataset(cfg)
        self.tasks = list(getattr(self.dataset, "task_names", []) or [])
        self.task = str(cfg.task) if cfg.task else (self.tasks[0] if len(self.tasks) == 1 else None)

    def trainer(self, out: Path, sigma: float, **overrides: Any) -> Any:
        """A Trainer of a fresh policy (the run's seed: every probe starts from the same weights)."""
        from robosteer.policies.train import Trainer, seed_everything

        cfg, dataset = self.cfg, self.dataset
        seed_everything(int(cfg.seed))  # same on every rank: identical initial weights
        shape_meta, stats = dataset.shape_meta, dataset.stats()
        # files of several tasks: the policy learns a task embedding (task id = index in dataset.task_names)
        multi = {"task_names": self.tasks} if len(self.tasks) > 1 else {}
        policy = build_policy(cfg, shape_meta, stats, **multi)
        get_config = getattr(policy, "get_config", None)
        eval_fn = build_eval_fn(cfg, out, shape_meta) if self.rank == 0 else None
        train_cfg = schemas.train_config(cfg, device=self.device, action_noise_std=sigma, **overrides)
        return Trainer(
            policy,
            dataset,
            train_cfg,
            out,
            policy_name=self.name,
            shape_meta=shape_meta,
            policy_config=get_config() if callable(get_config) else self.pcfg,
            eval_fn=eval_fn,
            run_config=OmegaConf.to_container(cfg, resolve=True),  # type: ignore[arg-type]
            checkpoint_meta={
                "task": self.task,
                "tasks": self.tasks,
                "dataset": dataset_paths(cfg),
                "obs_keys": list(cfg.obs_keys),
            },
        )

    def fit(self, trainer: Any) -> dict[str, Any]:
        """``trainer.fit()``, its evaluation envs closed after."""
        log.info(
            "%s: %d windows from %d episodes, %.2fM params, %s, action_noise_std=%g",
            self.name,
            len(self.dataset),
            getattr(self.dataset, "num_episodes", -1),
            sum(p.numel() for p in trainer.policy.parameters()) / 1e6,
            self.device,
            trainer.cfg.action_noise_std,
        )
        try:
            return trainer.fit()
        finally:
            if trainer.eval_fn is not None:
                trainer.eval_fn.close()


class NoSteerableBase(RuntimeError):
    """``action_noise_std=auto`` found no candidate the check calls steerable (its message: the one line)."""


def auto_noise(training: Training) -> Any:
    """Probe the candidates (policies/train/auto_noise.py), each in ``<out>/auto/sigma_<σ>``; the choice is
    kept in ``<out>/auto_noise.json``, so ``resume=true`` continues the chosen run without probing again."""
    from robosteer.policies.train.auto_noise import AutoNoiseConfig, Probe, check_base, choose

    cfg, run_dir = training.cfg, training.run_dir
    conf = AutoNoiseConfig()
    probe_steps = min(conf.probe_steps, int(cfg.steps))
    saved = run_dir / "auto_noise.json"
    if bool(cfg.resume) and saved.exists():
        return json.loads(saved.read_text())

    def probe(sigma: float) -> Probe:
        trainer = training.trainer(probe_dir(run_dir, sigma), sigma, stop_at_step=probe_steps)
        metrics = training.fit(trainer)
        check = check_base(trainer.eval_policy(), training.dataset, conf, int(cfg.seed))
        log.info(
            "action_noise_std=%g after %d steps: ratio %.3f, %s",
            sigma,
            probe_steps,
            check.ratio,
            check.verdict,
        )
        return Probe(sigma, check, metrics.get("success_rate"))

    choice = choose(conf, probe, probe_steps)
    atomic_write_text(saved, json.dumps(jsonable(choice.as_dict()), indent=2))
    return choice.as_dict()


def probe_dir(run_dir: Path, sigma: float) -> Path:
    return run_dir / "auto" / f"sigma_{sigma:g}"


def check_finished(training: Training, trainer: Any, choice: dict[str, Any]) -> None:
    """The check again on the finished base (``choice["final"]``): its probe read it earlier in training."""
    from robosteer.policies.train.auto_noise import AutoNoiseConfig, check_base

    final = check_base(trainer.eval_policy(), training.dataset, AutoNoiseConfig(), int(training.cfg.seed))
    if final.verdict == "steerable":
        log.info("finished base: ratio %.3f, steerable", final.ratio)
    else:
        log.warning(
            "finished base: ratio %.3f, %s, though its %d-step probe read steerable: try the next larger "
            "action_noise_std yourself",
            final.ratio,
            final.verdict,
            choice["probe_steps"],
        )
    choice["final"] = {"ratio": final.ratio, "verdict": final.verdict}


def run(cfg: DictConfig) -> dict[str, Any]:
    """Train as configured; return the metrics also written to ``out/metrics.json`` (rank 0).
    ``action_noise_std=auto``: probe first (:func:`auto_noise`), then finish the chosen probe's run here."""
    torch.set_num_threads(int(cfg.threads))
    rank, device = _init_distributed(cfg)
    auto = str(cfg.action_noise_std) == schemas.TRAIN_NUMBER_OR_WORD["action_noise_std"]
    if auto and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise UsageError(
            "action_noise_std=auto probes on one process: run it without torchrun, or give the σ it chose"
        )
    run_dir = start_run(cfg) if rank == 0 else Path(str(cfg.out)).expanduser().resolve()
    training = Training(cfg, run_dir, rank, device)
    if auto and len(training.tasks) > 1:
        raise UsageError("action_noise_std=auto checks one task's base: give one dataset file, or a σ")
    choice = auto_noise(training) if auto else None
    sigma = float(cfg.action_noise_std) if choice is None else choice["chosen"]
    if sigma is None:
        metrics = {"success_rate": None, "episodes": 0, "env_steps": 0, "auto_noise": choice}
        write_metrics(run_dir, {**metrics, "action_noise_std": None, "policy": training.name})
        raise NoSteerableBase(choice["reason"])
    if choice is not None and not (run_dir / "checkpoints" / "latest").exists():  # the chosen probe goes on
        shutil.copytree(
            probe_dir(run_dir, sigma) / "checkpoints", run_dir / "checkpoints", dirs_exist_ok=True
        )
    trainer = training.trainer(run_dir, sigma, **({"resume": True} if choice is not None else {}))
    metrics = training.fit(trainer)
    if rank != 0:
        return metrics
    if choice is not None:
        check_finished(training, trainer, choice)
        if metrics.get("resumed_from_step") == metrics["steps"]:  # the probe was the whole run: its figures
            probe = json.loads((probe_dir(run_dir, sigma) / "metrics.json").read_text())
            metrics |= {k: probe[k] for k in ("final_loss", "samples_per_s", "steps_per_s") if k in probe}
    metrics.setdefault("success_rate", None)
    metrics.setdefault("episodes", 0)  # no evaluation: no env interaction
    metrics.setdefault("env_steps", 0)
    metrics.update(
        {
            "policy": training.name,
            "task": training.task,
            "dataset": dataset_paths(cfg),
            "num_windows": len(training.dataset),
            "num_episodes": getattr(training.dataset, "num_episodes", None),
            "action_noise_std": sigma,
            "auto_noise": choice,
        }
    )
    write_metrics(run_dir, metrics)
    return metrics


def auto_table(choice: dict[str, Any]) -> str:
    """``action_noise_std=auto``'s probes as a table, and the finished base's check."""
    rows = [
        {
            "action_noise_std": f"{p['sigma']:g}" + (" (chosen)" if p["sigma"] == choice["chosen"] else ""),
            "ratio": p["ratio"],
            "verdict": p["verdict"],
            "base success": "-" if p["success_rate"] is None else p["success_rate"],
        }
        for p in choice["probes"]
    ]
    text = (
        f"action_noise_std=auto ({choice['probe_steps']}-step probes, {choice['extra_steps']} extra steps):\n"
    )
    text += format_table(rows)
    if final := choice.get("final"):
        text += f"\nfinished base: ratio {final['ratio']:.2f} ({final['verdict']})"
    return text


def _main(cfg: DictConfig) -> None:
    with exit_codes("robosteer-train"):  # bad dataset/checkpoint: 2; NaN loss or gradient: 1
        try:
            metrics = run(cfg)
        except NoSteerableBase as err:  # the probes' table, then the one line; no base was kept
            print(auto_table(json.loads((Path(str(cfg.out)) / "auto_noise.json").read_text())))
            print(f"robosteer-train: no steerable base: {err}", file=sys.stderr)
            raise SystemExit(1) from None
    if int(os.environ.get("RANK", "0")) != 0:
        return
    if metrics.get("auto_noise"):
        print(auto_table(metrics["auto_noise"]))
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
