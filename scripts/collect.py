"""robosteer-collect: drive Meta-World's scripted experts and write a robomimic-layout dataset.

Every episode k is driven by its own seed, ``episode_seed(seed, k)``, which fixes both the initial state
and the quality-knob noise, so any dataset (or any single episode of it) can be regenerated bit for bit.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig
from tqdm import tqdm

from robosteer.policies.data import DatasetWriter
from robosteer.policies.engine import stop_on_interrupt
from robosteer.scripts.common import console_main, exit_codes, format_table, start_run, write_metrics
from robosteer.sim import episode_seed

KEEP_CHOICES = ("success", "all")


def _final_obs(info: dict[str, Any], next_obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The last observation of a finished episode of env 0 (the env has already auto-reset)."""
    final = info.get("final_obs")
    if final is None:
        return {k: v[0] for k, v in next_obs.items()}
    if isinstance(final, dict):
        return {k: np.asarray(v[0]) for k, v in final.items()}
    return {k: np.asarray(v) for k, v in final[0].items()}


def collect_episode(env: Any, expert: Any, seed: int, cfg: DictConfig) -> dict[str, Any]:
    """Run one expert episode with the configured quality knobs; return its arrays and attrs."""
    rng = np.random.default_rng(seed)
    obs = env.reset(seed=[seed])
    expert.reset()
    keys = list(obs)
    steps: dict[str, list] = {k: [] for k in ("obs", "next_obs", "actions", "rewards", "dones", "states")}
    random_left = 0
    success = truncated = False
    for _ in range(env.max_episode_steps):
        action = expert.act(obs)[0].astype(np.float64)  # (A,)
        if cfg.random_segment_prob > 0 and random_left == 0 and rng.random() < cfg.random_segment_prob:
            random_left = int(cfg.random_segment_len)
        if random_left > 0:
            action = rng.uniform(-1.0, 1.0, size=action.shape)
            random_left -= 1
        if cfg.action_noise_std > 0:
            action = action + rng.normal(0.0, float(cfg.action_noise_std), size=action.shape)
        action = np.clip(action, -1.0, 1.0).astype(np.float32)

        steps["states"].append(env.get_sim_states()[0])
        next_obs, reward, terminated, trunc, info = env.step(action[None])
        done = bool(terminated[0] or trunc[0])
        step_next = _final_obs(info, next_obs) if done else {k: v[0] for k, v in next_obs.items()}
        steps["obs"].append({k: obs[k][0] for k in keys})
        steps["next_obs"].append(step_next)
        steps["actions"].append(action)
        steps["rewards"].append(float(reward[0]))
        steps["dones"].append(bool(terminated[0]))
        success = success or bool(info["success"][0])
        obs = next_obs
        if done:
            truncated = bool(trunc[0]) and not bool(terminated[0])
            break
    drawn = {k: float(v[0]) for k, v in info.items() if k.startswith("dr_")}  # env 0's, of this episode
    return {
        "obs": {k: np.stack([o[k] for o in steps["obs"]]) for k in keys},
        "next_obs": {k: np.stack([o[k] for o in steps["next_obs"]]) for k in keys},
        "actions": np.stack(steps["actions"]),  # (T, A)
        "rewards": np.asarray(steps["rewards"], dtype=np.float32),  # (T,)
        "dones": np.asarray(steps["dones"], dtype=np.uint8),  # (T,) 1 only on true termination (success)
        "states": np.stack(steps["states"]),  # (T, S)
        # dr_*: this episode's drawn randomization parameters (absent without randomization).
        "attrs": {"seed": seed, "success": success, "truncated": truncated, **drawn},
    }


def collect_obs_mode(cfg: DictConfig) -> tuple[str, tuple[str, ...]]:
    """The env mode and cameras that record ``cfg.obs_keys``, plus ``state``: the scripted expert acts on it,
    and replay and diagnostics use it. A policy reads only its own obs_keys (obs=pixels: never state)."""
    from robosteer.sim.metaworld_env import obs_mode_for_keys

    keys = list(cfg.obs_keys)
    return obs_mode_for_keys(keys if "state" in keys else ["state", *keys])


def env_args(cfg: DictConfig, max_episode_steps: int) -> dict[str, Any]:
    """robomimic-style env metadata: enough to rebuild the env and regenerate the data."""
    from robosteer.sim.randomization import as_config

    mode, cameras = collect_obs_mode(cfg)
    args = {
        "env_name": cfg.task,
        "type": 2,  # robomimic's EnvType.GYM_TYPE: the closest of its categories
        "env_kwargs": {
            "suite": "metaworld",
            "obs": mode,
            "image_size": int(cfg.image_size),
            "cameras": list(cameras) or ["corner2"],
            "max_episode_steps": int(max_episode_steps),
            "terminate_on_success": True,
        },
        "collection": {
            "seed": int(cfg.seed),
            "keep": cfg.keep,
            "action_noise_std": float(cfg.action_noise_std),
            "random_segment_prob": float(cfg.random_segment_prob),
            "random_segment_len": int(cfg.random_segment_len),
        },
    }
    randomization = as_config(cfg.get("randomization"))
    if randomization.enabled:  # nominal data keeps the exact env_args it always had
        args["env_kwargs"]["randomization"] = randomization.to_dict()
    return args


def collect(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Collect ``cfg.episodes`` kept episodes into ``run_dir/demos.hdf5``; return the summary metrics."""
    from robosteer import sim

    if cfg.keep not in KEEP_CHOICES:
        raise ValueError(f"keep={cfg.keep!r} is not valid: expected one of {KEEP_CHOICES}")
    max_attempts = int(cfg.max_attempts or 3 * cfg.episodes)
    path = run_dir / "demos.hdf5"
    start = time.perf_counter()
    kept = kept_steps = attempts = env_steps = successes = 0
    interrupted = False
    mode, cameras = collect_obs_mode(cfg)
    env = sim.make_env(
        cfg.task,
        num_envs=1,
        seed=int(cfg.seed),
        obs=mode,
        image_size=int(cfg.image_size),
        cameras=cameras or ("corner2",),
        max_episode_steps=cfg.max_episode_steps,
        terminate_on_success=True,
        randomization=cfg.get("randomization"),
    )
    expert = sim.ScriptedExpert(cfg.task)
    bar = tqdm(total=int(cfg.episodes), desc=f"collect {cfg.task}", unit="ep", disable=not cfg.progress)
    try:
        with (
            stop_on_interrupt() as stop,
            env,
            DatasetWriter(
                path,
                env_args=env_args(cfg, env.max_episode_steps),
                # the control rate (80 Hz: frame_skip 5 x 2.5 ms): an export to LeRobot is labelled with it
                attrs={"fps": 1.0 / env.dt},
                valid_fraction=float(cfg.valid_fraction),
                split_seed=int(cfg.seed),
            ) as writer,
        ):
            try:
                while kept < cfg.episodes and attempts < max_attempts:
                    if stop.is_set():  # Ctrl-C: the episode it landed in has been finished and kept
                        interrupted = True
                        break
                    ep = collect_episode(env, expert, episode_seed(cfg.seed, attempts), cfg)
                    ep["attrs"]["index"] = attempts
                    attempts += 1
                    env_steps += len(ep["actions"])
                    successes += int(ep["attrs"]["success"])
                    if cfg.keep == "all" or ep["attrs"]["success"]:
                        writer.add_episode(**ep)
                        kept += 1
                        bar.update(1)
                    bar.set_postfix(success=f"{successes / attempts:.0%}", attempts=attempts)
            except KeyboardInterrupt:
                interrupted = True
            # The writer is the truth: Ctrl-C can land between add_episode returning and the counters above.
            kept, kept_steps = writer.num_episodes, writer.total_steps
            if interrupted:
                print(f"\ninterrupted: {kept} finished episodes are kept in {path}", file=sys.stderr)
    finally:
        bar.close()
    if kept < cfg.episodes and not interrupted:
        print(f"warning: kept {kept}/{cfg.episodes} episodes after {attempts} attempts", file=sys.stderr)
    return {
        "task": cfg.task,
        "dataset": str(path),
        "episodes": kept,
        "attempts": attempts,
        "success_rate": successes / max(attempts, 1),
        "kept_success_rate": None,  # filled from the file below
        "mean_episode_length": kept_steps / kept if kept else 0.0,
        "env_steps": env_steps,
        "wall_time_s": time.perf_counter() - start,
        "interrupted": interrupted,
    }


def _main(cfg: DictConfig) -> None:
    run_dir = start_run(cfg)
    with exit_codes("robosteer-collect"):  # an existing dataset or salvaged .partial in out: 2
        metrics = collect(cfg, run_dir)
    from robosteer.policies.data import open_dataset

    with open_dataset(metrics["dataset"]) as demos:
        metrics["kept_success_rate"] = demos.summary().get("success_rate")
    write_metrics(run_dir, metrics)
    row = {
        "task": metrics["task"],
        "kept": metrics["episodes"],
        "attempts": metrics["attempts"],
        "expert success": metrics["success_rate"],
        "kept success": metrics["kept_success_rate"],
        "mean length": metrics["mean_episode_length"],
        "wall s": metrics["wall_time_s"],
    }
    print(format_table([row]))
    print(f"dataset: {metrics['dataset']}")
    if metrics["interrupted"]:
        raise SystemExit(130)


def main() -> None:
    """Console-script entry point."""
    console_main("robosteer-collect", "collect", _main)


if __name__ == "__main__":
    main()
