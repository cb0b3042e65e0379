"""robosteer-collect: drive Meta-World's scripted experts and write a robomimic-layout dataset.

Every episode k is driven by its own seed, ``episode_seed(seed, k)``, which fixes both the initial state
and the quality-knob noise, so any dataset (or any single episode of it) can be regenerated bit for bit.
``num_envs`` episodes run at once (``sim=warp``: that many MuJoCo Warp worlds). On Meta-World an episode is
the same bit for bit whatever ``num_envs``; on Warp a run regenerates bit for bit at the same ``num_envs``, and at
another the episodes agree to float rounding (Warp's worlds are not bit-identical by index). The dataset
records its simulator (``env_args.env_kwargs.suite``).
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


def _final_obs(info: dict[str, Any], next_obs: dict[str, np.ndarray], i: int = 0) -> dict[str, np.ndarray]:
    """The last observation of env ``i``'s finished episode (the env has already auto-reset)."""
    final = info.get("final_obs")
    if final is None:
        return {k: v[i] for k, v in next_obs.items()}
    if isinstance(final, dict):
        return {k: np.asarray(v[i]) for k, v in final.items()}
    return {k: np.asarray(v) for k, v in final[i].items()}


class _Knobs:
    """One episode's quality knobs, drawn from its own seed exactly as a lone episode draws them."""

    def __init__(self, seed: int, cfg: DictConfig) -> None:
        self.rng, self.cfg, self.random_left = np.random.default_rng(seed), cfg, 0

    def __call__(self, action: np.ndarray) -> np.ndarray:
        cfg, rng = self.cfg, self.rng
        action = action.astype(np.float64)  # (A,)
        if cfg.random_segment_prob > 0 and self.random_left == 0 and rng.random() < cfg.random_segment_prob:
            self.random_left = int(cfg.random_segment_len)
        if self.random_left > 0:
            action = rng.uniform(-1.0, 1.0, size=action.shape)
            self.random_left -= 1
        if cfg.action_noise_std > 0:
            action = action + rng.normal(0.0, float(cfg.action_noise_std), size=action.shape)
        return np.clip(action, -1.0, 1.0).astype(np.float32)


def collect_episodes(env: Any, expert: Any, seeds: list[int], cfg: DictConfig) -> list[dict[str, Any]]:
    """One expert episode per env from ``seeds`` (B,), run together (sim=warp: B worlds); an env whose episode
    ended idles in its next, discarded one until the last ends. Returns their arrays and attrs, in seed order;
    on Meta-World each episode is the same whatever B."""
    knobs = [_Knobs(seed, cfg) for seed in seeds]
    obs = env.reset(seed=list(seeds))
    expert.reset()
    keys, B = list(obs), len(seeds)
    steps: list[dict[str, list]] = [
        {k: [] for k in ("obs", "next_obs", "actions", "rewards", "dones", "states")} for _ in range(B)
    ]
    running, episodes = list(range(B)), [dict(success=False, truncated=False) for _ in range(B)]
    for _ in range(env.max_episode_steps):
        actions = expert.act(obs)  # (B, A)
        for i in running:
            actions[i] = knobs[i](actions[i])
        states = env.get_sim_states()  # (B, S)
        next_obs, reward, terminated, trunc, info = env.step(actions)
        for i in list(running):
            done = bool(terminated[i] or trunc[i])
            rec = steps[i]
            rec["states"].append(states[i])
            rec["obs"].append({k: obs[k][i] for k in keys})
            rec["next_obs"].append(
                _final_obs(info, next_obs, i) if done else {k: v[i] for k, v in next_obs.items()}
            )
            rec["actions"].append(actions[i].copy())
            rec["rewards"].append(float(reward[i]))
            rec["dones"].append(bool(terminated[i]))
            episodes[i]["success"] = episodes[i]["success"] or bool(info["success"][i])
            if done:
                episodes[i]["truncated"] = bool(trunc[i]) and not bool(terminated[i])
                episodes[i].update({k: float(v[i]) for k, v in info.items() if k.startswith("dr_")})
                running.remove(i)
        obs = next_obs
        if not running:
            break
    return [_episode_arrays(rec, keys, {"seed": seed, **ep}) for rec, seed, ep in zip(steps, seeds, episodes)]


def _episode_arrays(rec: dict[str, list], keys: list[str], attrs: dict[str, Any]) -> dict[str, Any]:
    return {
        "obs": {k: np.stack([o[k] for o in rec["obs"]]) for k in keys},
        "next_obs": {k: np.stack([o[k] for o in rec["next_obs"]]) for k in keys},
        "actions": np.stack(rec["actions"]),  # (T, A)
        "rewards": np.asarray(rec["rewards"], dtype=np.float32),  # (T,)
        "dones": np.asarray(rec["dones"], dtype=np.uint8),  # (T,) 1 only on true termination (success)
        "states": np.stack(rec["states"]),  # (T, S)
        # attrs: seed, success, truncated, and dr_*: the episode's drawn randomization (absent without it)
        "attrs": attrs,
    }


def collect_episode(env: Any, expert: Any, seed: int, cfg: DictConfig) -> dict[str, Any]:
    """Run one expert episode with the configured quality knobs; return its arrays and attrs."""
    return collect_episodes(env, expert, [seed], cfg)[0]


def collect_obs_mode(cfg: DictConfig) -> tuple[str, tuple[str, ...]]:
    """The env mode and cameras that record ``cfg.obs_keys``, plus ``state``: the scripted expert acts on it,
    and replay and diagnostics use it. A policy reads only its own obs_keys (obs=pixels: never state)."""
    from robosteer.sim.obs_modes import obs_mode_for_keys

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
            "suite": str(cfg.sim),  # metaworld | warp: where the episodes were recorded (replay needs it)
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


def collection_env(cfg: DictConfig) -> Any:
    """The env the experts collect in: ``num_envs`` envs of ``sim``, recording ``obs_keys`` (refused first:
    a bad ``keep`` or ``num_envs``)."""
    from robosteer import sim

    if cfg.keep not in KEEP_CHOICES:
        raise ValueError(f"keep={cfg.keep!r} is not valid: expected one of {KEEP_CHOICES}")
    if isinstance(cfg.num_envs, bool) or not isinstance(cfg.num_envs, int) or cfg.num_envs < 1:
        raise ValueError(
            f"num_envs={cfg.num_envs!r} is not valid: expected an int >= 1 (episodes run at once)"
        )
    mode, cameras = collect_obs_mode(cfg)
    return sim.make_env(
        cfg.task,
        num_envs=int(cfg.num_envs),
        sim=str(cfg.sim),
        seed=int(cfg.seed),
        obs=mode,
        image_size=int(cfg.image_size),
        cameras=cameras or ("corner2",),
        max_episode_steps=cfg.max_episode_steps,
        terminate_on_success=True,
        randomization=cfg.get("randomization"),
    )


def collect(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Collect ``cfg.episodes`` kept episodes into ``run_dir/demos.hdf5``; return the summary metrics."""
    from robosteer import sim

    max_attempts = int(cfg.max_attempts or 3 * cfg.episodes)
    path = run_dir / "demos.hdf5"
    start = time.perf_counter()
    kept = kept_steps = attempts = env_steps = successes = 0
    interrupted = False
    env, batch = collection_env(cfg), int(cfg.num_envs)
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
                    seeds = [episode_seed(cfg.seed, attempts + j) for j in range(batch)]
                    for ep in collect_episodes(env, expert, seeds, cfg):
                        if kept >= cfg.episodes or attempts >= max_attempts:
                            break  # a batch's episodes past the target are not attempts: discarded
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
