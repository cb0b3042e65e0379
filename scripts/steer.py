"""robosteer-steer: steer a frozen base policy with DSRL on a task of the suite.

Writes the run directory: config.yaml, TensorBoard curves (tb/), checkpoints/latest (actor, critics,
optimizers, replay buffer, RNG), plots/learning_curve.png and metrics.json with the before/after success.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from scripts.common import CONFIG_DIR, atomic_write_text, format_table, start_run, write_metrics

ALGOS = ("dsrl",)


def plot_learning_curve(history: list[dict[str, float]], path: Path, title: str) -> None:
    """Success rate vs env steps (one point per evaluation)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([h["env_steps"] for h in history], [h["success_rate"] for h in history], marker="o")
    ax.set_xlabel("env steps")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def steer(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Build base, env, agent and evaluation from the config and run DSRL."""
    import torch

    import sim
    from policies import load_policy
    from policies.checkpoint import find_checkpoint, read_checkpoint_config, state_dict_hash
    from policies.steering.dsrl import DSRL, DSRLConfig, DSRLRunConfig, run_dsrl
    from policies.steering.scratch import SCRATCH, make_scratch_base

    torch.set_num_threads(int(cfg.threads))
    if not cfg.base:
        raise ValueError("steering needs base=<run directory of robosteer-train>, e.g. base=runs/dp")
    if cfg.base == SCRATCH:
        if not cfg.task or cfg.variant != "sac":
            raise ValueError(
                "base=scratch is plain SAC from scratch: it needs variant=sac and task=<name>, "
                f"got variant={cfg.variant} task={cfg.task}"
            )
        task = cfg.task
        with sim.make_env(task, num_envs=1, obs="state") as probe:
            state_dim = int(probe.single_observation_space["state"].shape[0])
            action_dim = int(probe.single_action_space.shape[0])
        base = make_scratch_base(state_dim, action_dim, int(cfg.scratch_chunk))
    else:
        base = load_policy(cfg.base, which=cfg.which)
        if getattr(base, "name", "") == "streaming":
            raise ValueError(
                "DSRL needs a stateless noise->chunk map: use a diffusion or flow base, not streaming"
            )
        ckpt_dir, _ = find_checkpoint(cfg.base, cfg.which)
        task = cfg.task or read_checkpoint_config(ckpt_dir).get("task")
        if not task:
            raise ValueError(f"the base {cfg.base} names no task: pass task=<name>")
    keys = tuple(k for k, m in base.shape_meta["obs"].items() if m.get("type", "low_dim") == "low_dim")
    if len(keys) != len(base.shape_meta["obs"]):
        raise ValueError("DSRL here steers state-based policies: the base uses image observations")
    to, ta = base.config.n_obs_steps, base.config.n_action_steps
    env = sim.make_env(
        task,
        num_envs=int(cfg.num_envs),
        seed=int(cfg.seed),
        obs="state",
        action_chunk=ta,
        obs_history=to,
        max_episode_steps=cfg.max_episode_steps,
        vectorization=cfg.vectorization,
    )
    obs_dim = sum(to * int(torch.tensor(base.shape_meta["obs"][k]["shape"]).prod()) for k in keys)
    offline = None
    if cfg.offline:
        if cfg.variant != "na":
            raise ValueError(
                f"offline={cfg.offline} needs variant=na: DSRL-SAC's critic is over latents, not actions"
            )
        from policies.rl import chunk_transitions

        offline = chunk_transitions(str(cfg.offline), keys, to, ta, reward=str(cfg.run.reward))
        offline["taken"] = offline.pop("action")
    agent = DSRL(
        base,
        obs_dim,
        slice(to - 1, to - 1 + ta),
        DSRLConfig(variant=cfg.variant, **OmegaConf.to_container(cfg.dsrl)),
        obs_keys=keys,
    )
    run_cfg = DSRLRunConfig(
        env_steps=int(cfg.env_steps), seed=int(cfg.seed), **OmegaConf.to_container(cfg.run)
    )

    def eval_fn(policy: Any) -> dict[str, Any]:
        with (
            torch.no_grad(),
            sim.make_env(
                task,
                num_envs=int(cfg.eval_envs),
                seed=int(cfg.eval_seed),
                obs="state",
                max_episode_steps=cfg.max_episode_steps,
            ) as eval_env,
        ):
            return sim.evaluate(
                eval_env, policy, episodes=run_cfg.eval_episodes, seed=int(cfg.eval_seed), progress=False
            )

    base_hash = state_dict_hash(base)
    base_metrics = None
    if cfg.eval_base and not (cfg.resume and (run_dir / "base_eval.json").exists()):
        base_metrics = eval_fn(base)  # the stock sampler (fresh N(0, I) noise): the "before" figure
        atomic_write_text(run_dir / "base_eval.json", json.dumps(base_metrics, indent=2))
    elif (run_dir / "base_eval.json").exists():
        base_metrics = json.loads((run_dir / "base_eval.json").read_text())
    with env:
        metrics = run_dsrl(
            agent,
            env,
            run_cfg,
            str(run_dir),
            eval_fn=eval_fn,
            offline=offline,
            resume=bool(cfg.resume),
            checkpoint_config={
                "task": task,
                "base": SCRATCH if cfg.base == SCRATCH else str(Path(cfg.base).resolve()),
                "scratch_shape": [state_dim, action_dim, int(cfg.scratch_chunk)]
                if cfg.base == SCRATCH
                else None,
                "base_which": str(cfg.which),
                "base_hash": base_hash,
            },
        )
    if state_dict_hash(base) != base_hash:
        raise RuntimeError(
            "the base policy's weights changed during steering: this is a bug, please report it"
        )
    metrics["task"] = task
    metrics["base_hash"] = base_hash
    metrics["base_success_rate"] = base_metrics["success_rate"] if base_metrics else None
    metrics["offline_transitions"] = 0 if offline is None else len(offline["reward"])
    if metrics["history"]:
        plot_learning_curve(
            metrics["history"], run_dir / "plots" / "learning_curve.png", f"DSRL-{cfg.variant} on {task}"
        )
    return metrics


@hydra.main(config_path=CONFIG_DIR, config_name="steer", version_base=None)
def _main(cfg: DictConfig) -> None:
    run_dir = start_run(cfg)
    metrics = steer(cfg, run_dir)
    write_metrics(run_dir, metrics)
    print(
        format_table(
            [
                {
                    "task": metrics["task"],
                    "variant": metrics["variant"],
                    "env steps": metrics["env_steps"],
                    "base success": metrics["base_success_rate"],
                    "latent-0 success": metrics["initial_success_rate"],
                    "steered success": metrics["success_rate"],
                    "wall s": metrics["wall_time_s"],
                }
            ]
        )
    )
    print(f"metrics: {run_dir / 'metrics.json'}")


def main() -> None:
    """Console-script entry point."""
    _main()


if __name__ == "__main__":
    main()
