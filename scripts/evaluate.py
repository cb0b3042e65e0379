"""robosteer-eval: evaluate a trained checkpoint, the scripted expert, or a replay of a dataset.

A checkpoint or the expert runs over vectorised envs through ``sim.evaluate``. A replay re-runs each
recorded episode from its own episode seed with the recorded actions: it both measures the dataset's
success and proves that the data regenerates exactly (it reports the largest observation mismatch).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig
from tqdm import tqdm

from robosteer.scripts.common import (
    UsageError,
    check_policy_inputs,
    console_main,
    env_backend,
    exit_codes,
    format_table,
    start_run,
    write_metrics,
)
from robosteer.scripts.schemas import EVAL_SOURCES


def obs_mode(shape_meta: dict[str, Any]) -> tuple[str, tuple[str, ...], int]:
    """The env observation mode, cameras and image size a policy's inputs need."""
    from robosteer.sim.obs_modes import obs_mode_for_keys

    mode, cams = obs_mode_for_keys(list(shape_meta["obs"]))
    size = int(shape_meta["obs"][f"image/{cams[0]}"]["shape"][0]) if cams else 84
    return mode, cams or ("corner2",), size


def replay_dataset(path: str, episodes: int | None, progress: bool = True) -> dict[str, Any]:
    """Replay recorded actions from each episode's seed; success rate and worst obs mismatch."""
    from robosteer import sim
    from robosteer.policies.data import open_dataset

    start = time.perf_counter()
    with open_dataset(path) as demos:
        kwargs = demos.env_args.get("env_kwargs", {})
        task = demos.env_args["env_name"]
        recorded_in = kwargs.get("suite", "metaworld")  # the simulator (or robot) that recorded it
        if recorded_in != "metaworld":
            raise UsageError(
                f"dataset={path}: its episodes were recorded in {recorded_in!r} (env_args.env_kwargs.suite), and "
                "policy=replay re-runs only Meta-World's: evaluate a policy trained on it instead"
            )
        names = demos.demo_names[: episodes or None]
        env = sim.make_env(
            task,
            num_envs=1,
            obs="state",
            max_episode_steps=kwargs.get("max_episode_steps"),
            randomization=kwargs.get("randomization"),  # a randomized dataset replays under its own draws
        )
        successes, worst, env_steps = [], 0.0, 0
        with env:
            for name in tqdm(names, desc=f"replay {task}", unit="ep", disable=not progress):
                ep = demos.episode(name)
                obs = env.reset(seed=[int(ep["attrs"]["seed"])])
                success = False
                for t, action in enumerate(ep["actions"]):
                    worst = max(worst, float(np.abs(obs["state"][0] - ep["obs"]["state"][t]).max()))
                    obs, _, terminated, truncated, info = env.step(action[None])
                    env_steps += 1
                    success = success or bool(info["success"][0])
                    if terminated[0] or truncated[0]:
                        break
                successes.append(success)
    n = len(successes)
    return {
        "task": task,
        "episodes": n,
        "success_rate": float(np.mean(successes)) if n else 0.0,
        "success_ci95": list(sim.wilson_interval(int(np.sum(successes)), n)),
        "max_obs_abs_diff": worst,
        "env_steps": env_steps,
        "wall_time_s": time.perf_counter() - start,
    }


STEER_CHOICES = ("vgps",)


def steer_policy(cfg: DictConfig, policy: Any, task: str, device: Any = "cpu") -> Any:
    """``steer=vgps``: wrap the generalist with V-GPS over the frozen critic of ``critic=<robosteer-value run>``
    (loaded on ``device``, beside a local policy)."""
    from robosteer.policies.steering.vgps import VGPSPolicy
    from robosteer.policies.value import load_critic

    if cfg.steer not in STEER_CHOICES:
        raise ValueError(f"steer={cfg.steer!r} is not known: expected one of {STEER_CHOICES} (or null)")
    if not cfg.critic:
        raise ValueError("steer=vgps needs critic=<run dir of robosteer-value>, e.g. critic=runs/critic")
    critic = load_critic(cfg.critic, device=device)
    task_id = None
    if critic.num_tasks > 1:
        if task not in critic.task_names:
            raise ValueError(
                f"task {task!r} is not one of the critic's tasks {critic.task_names} ({cfg.critic})"
            )
        task_id = critic.task_names.index(task)
    score = "first" if critic.action_steps == 1 else "chunk"
    ta = int(getattr(policy, "config", policy).n_action_steps)  # a served policy has no config
    every = cfg.get("replan_every")
    if every is not None and not 1 <= int(every) <= ta:
        raise ValueError(
            f"replan_every={every} is not valid for {cfg.checkpoint}: expected 1..{ta} (its n_action_steps), "
            f"or null for {ta}"
        )
    return VGPSPolicy(
        policy,
        critic,
        samples=int(cfg.samples),
        temperature=float(cfg.temperature),
        score=score,
        n_action_steps=None if every is None else int(every),
        task_id=task_id,
        seed=int(cfg.seed),
    ).eval()


def served_policy(cfg: DictConfig) -> Any:
    """``checkpoint=ws://HOST:PORT``: the policy a robosteer-serve (or openpi) server serves, acting here."""
    from robosteer.real.client import PolicyConnectionError, connect

    try:
        policy = connect(str(cfg.checkpoint), str(cfg.protocol), cfg.token, float(cfg.policy_timeout_s))
    except PolicyConnectionError as e:
        raise UsageError(f"checkpoint={cfg.checkpoint}: {e}") from None
    if not policy.shape_meta or policy.acting is None:
        policy.close()
        raise UsageError(
            f"checkpoint={cfg.checkpoint} announces no shape_meta / n_obs_steps / n_action_steps (openpi's own "
            "servers do not): evaluation needs them to build the observations and act"
        )
    return policy


def set_sample_levels(policy: Any, value: str, checkpoint: str) -> None:
    """``sample_levels=``: which stateless ``sample`` path a streaming (SDP) checkpoint uses under steering."""
    if getattr(policy, "name", None) != "streaming":
        raise ValueError(
            f"sample_levels={value!r} applies to streaming (SDP) checkpoints; {checkpoint} is "
            f"{getattr(policy, 'name', type(policy).__name__)!r}: drop sample_levels"
        )
    policy.set_sample_levels(value)


def steer_metrics(cfg: DictConfig, policy: Any) -> dict[str, Any]:
    """The steering settings and its cost: base sampling and critic scoring time per re-plan (ms)."""
    plans = max(1, policy.timing["plans"])
    return {
        "steer": str(cfg.steer),
        "critic": str(cfg.critic),
        "samples": int(cfg.samples),
        "temperature": float(cfg.temperature),
        "score": policy.score,
        "replan_every": policy.n_action_steps,
        "sample_levels": getattr(getattr(policy.policy, "config", None), "sample_levels", None),
        "plan_sample_ms": 1000 * policy.timing["sample_s"] / plans,
        "plan_score_ms": 1000 * policy.timing["score_s"] / plans,
        "plans": policy.timing["plans"],
    }


def local_policy(cfg: DictConfig, device: Any) -> tuple[Any, bool]:
    """(policy, steered) of a local run directory: a robosteer-train run, or a steering run (its base + the
    steering actor); a run that does not act (a critic) is refused naming where it goes."""
    from robosteer.policies.loading import ACTING_KINDS, load, run_kind
    from robosteer.policies.steering import STEERING_KINDS

    kind = run_kind(cfg.checkpoint)
    if kind not in ACTING_KINDS:
        raise ValueError(
            f"checkpoint={cfg.checkpoint} is a {kind} run, which does not act: pass a run of "
            f"robosteer-train or robosteer-steer (a critic goes to critic= with steer=vgps)"
        )
    policy = load(
        cfg.checkpoint, which=str(cfg.which), deterministic=bool(cfg.deterministic), device=str(device)
    )
    return policy, kind in STEERING_KINDS


def evaluate_policy(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Evaluate the expert or a checkpoint over vectorised envs; writes videos into the run dir."""
    import torch

    from robosteer import sim
    from robosteer.policies.engine import resolve_device

    torch.set_num_threads(int(cfg.threads))
    device = resolve_device(cfg.get("device", "cpu"))  # before anything is loaded: a bad value fails first
    steered, which = False, None  # which: the checkpoint of a local run directory (best | latest | ...)
    closing = contextlib.ExitStack()  # a served policy's connection
    if cfg.policy.name == "expert":
        if not cfg.task:
            raise ValueError("policy=expert needs task=<name>, e.g. task=push-v3")
        task, policy, mode, cams, size = cfg.task, sim.ScriptedExpert(cfg.task), "state", ("corner2",), 84
    else:
        if not cfg.checkpoint:
            raise ValueError("policy=checkpoint needs checkpoint=<run dir>, e.g. checkpoint=runs/dp")
        if str(cfg.checkpoint).startswith(("ws://", "wss://")):
            policy = served_policy(cfg)
            closing.callback(policy.close)
            steered = bool(policy.metadata.get("steered"))
        else:
            policy, steered = local_policy(cfg, device)
            which = str(
                cfg.which
            )  # said in the metrics and the table: best (the default) is not the final one
        task = cfg.task or policy.task
        if not task:
            raise ValueError(f"the checkpoint {cfg.checkpoint} names no task: pass task=<name>")
        if getattr(policy, "task_names", None):  # a multi-task generalist acts on the evaluated task
            policy.set_task(task)
        if cfg.get("sample_levels"):
            set_sample_levels(policy, str(cfg.sample_levels), str(cfg.checkpoint))
        check_policy_inputs(cfg, policy.shape_meta, f"checkpoint={cfg.checkpoint}")
        mode, cams, size = obs_mode(policy.shape_meta)
        if cfg.get("steer"):
            policy = steer_policy(cfg, policy, task, device)
    env = sim.make_env(
        task,
        num_envs=int(cfg.num_envs),
        seed=int(cfg.seed),
        obs=mode,
        image_size=size,
        cameras=cams,
        max_episode_steps=cfg.max_episode_steps,
        vectorization=cfg.vectorization,
        randomization=cfg.get("randomization"),
        **env_backend(cfg, device),
    )
    rendered = cfg.video and str(cfg.get("sim", "metaworld")) == "metaworld"  # GPU sims render no frames
    video_path = run_dir / "videos" / f"{task}.mp4" if rendered else None
    with closing, env, torch.no_grad():
        metrics = sim.evaluate(
            env,
            policy,
            episodes=int(cfg.episodes),
            seed=int(cfg.seed),
            video_path=video_path,
            video_episodes=int(cfg.video_episodes),
            progress=bool(cfg.progress),
        )
    metrics["task"] = task
    metrics["steered"] = steered
    if which is not None:
        metrics["which"] = which
    if cfg.get("steer"):
        metrics.update(steer_metrics(cfg, policy))
    if video_path is not None:
        metrics["video"] = str(video_path)
    return metrics


def _main(cfg: DictConfig) -> None:
    if cfg.policy.name not in EVAL_SOURCES:
        raise SystemExit(
            f"policy={cfg.policy.name!r} is not valid for robosteer-eval: expected one of {EVAL_SOURCES}"
        )
    run_dir = start_run(cfg)
    with exit_codes("robosteer-eval"):  # bad dataset/checkpoint: 2
        if cfg.policy.name == "replay":
            if not cfg.dataset:
                raise SystemExit(
                    "policy=replay needs dataset=<file.hdf5>, e.g. dataset=runs/demos/demos.hdf5"
                )
            metrics = replay_dataset(str(cfg.dataset), cfg.episodes, progress=bool(cfg.progress))
        else:
            metrics = evaluate_policy(cfg, run_dir)
    metrics["policy"] = cfg.policy.name
    write_metrics(run_dir, metrics)
    lo, hi = metrics["success_ci95"]
    which = metrics.get("which")
    row = {
        "policy": cfg.policy.name if which is None else f"{cfg.policy.name} ({which})",
        "task": metrics["task"],
        "episodes": metrics["episodes"],
        "success": metrics["success_rate"],
        "95% CI": f"[{lo:.2f}, {hi:.2f}]",
    }
    extra = ("mean_return", "mean_episode_length", "env_steps_per_s", "max_obs_abs_diff")
    row |= {key: metrics[key] for key in extra if key in metrics}
    print(format_table([row]))
    print(f"metrics: {run_dir / 'metrics.json'}")


def main() -> None:
    """Console-script entry point."""
    console_main("robosteer-eval", "eval", _main)


if __name__ == "__main__":
    main()
