"""DSRL on a deliberately weak base policy: success vs env steps, per task, variant and seed (issue: DSRL).

For every task: collect ``--demos`` (100) demos once from the scripted expert with N(0, ``--noise``) action noise, keeping
failures (mixed-quality data, as human teleoperation gives), train a Diffusion Policy on them for
``--base-steps`` steps, and evaluate it on ``--episodes`` unseen initial states (eval seed 200000). Such a
base imitates the noise too: its chunks depend strongly on the latent noise, which is what DSRL steers (a
base trained on clean expert demos barely depends on its noise and leaves DSRL nothing to choose from).
Then for every (variant, seed) run ``robosteer-steer`` on that frozen base for ``--env-steps`` env steps (at
most ``--max-minutes``; NA also loads the demos into its critic's offline buffer), and evaluate the steered
policy on the same unseen states. ``--variants scratch`` runs plain SAC from scratch (no base) as baseline. Each run
is appended to ``<out>/results.jsonl`` as it finishes, so an interrupted grid resumes where it stopped (and a
larger ``--env-steps`` extends finished runs from their checkpoints);
the table and ``<out>/curves.png`` (success vs env steps, from each run's periodic evaluations) are printed
and written at the end. Extra ``robosteer-steer`` overrides go after ``--``. ``--robot sim_twin`` steers on the
twin in its own process (at its real 80 Hz, ``--latency-ms`` of injected round trip, ``--reward``) through the
deploy control loop (docs/steer_robot.md); its rows carry ``where`` and the robot's own figures.
``--unseen-every N`` keeps a checkpoint every N env steps and scores each on the same unseen states as the final
actor (the row's ``unseen_history``), so a late decline is measured where the final figure is.

    python benchmarks/dsrl_steering.py --tasks push-v3 pick-place-v3 --variants na sac scratch \
        --seeds 0 1 2 --out runs/bench/dsrl
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from results_tables import append_row
from steering_runs import (
    EVAL_SEED,
    evaluate,
    evaluate_trained,
    run_logged,
    steer_budget,
    unseen_history,
    weak_base,
)

from robosteer.scripts.common import log_beside, provenance, read_results
from robosteer.scripts.steer import lift

ROOT = Path(__file__).resolve().parents[1]


class NoisePlanner:
    """The frozen base's chunks from i.i.d. N(0, I) latents, or from one Da-vector repeated over its horizon
    (``shared``, what ``dsrl.latent=shared`` plays): a planner that :class:`ChunkPolicy` acts through."""

    def __init__(self, base: Any, shared: bool) -> None:
        self.base, self.shared = base, shared

    def plan(self, obs: dict, rows: object) -> Any:
        import torch

        tp, da = self.base.noise_shape
        b = next(iter(obs.values())).shape[0]
        w = torch.randn(b, 1, da).expand(b, tp, da) if self.shared else torch.randn(b, tp, da)  # (B, Tp, Da)
        return self.base.sample(obs, noise=w.contiguous())

    def reset_rows(self, rows: object) -> None:
        """No planning state beyond the action queue."""

    def eval(self) -> NoisePlanner:
        return self


def shared_noise_check(base: Path, task: str, episodes: int) -> dict[str, float]:
    """The base's success with i.i.d. noise vs one Da-vector repeated over the horizon (``dsrl.latent=shared``).

    The reference notes' faithfulness test 8: some bases degrade with repeated noise (dsrl_pi0 #9/#15).
    """
    import torch

    from robosteer import sim
    from robosteer.policies import load_policy
    from robosteer.policies.acting import ChunkPolicy

    torch.set_num_threads(1)
    policy = load_policy(base, which="ema")
    out = {}
    for mode in ("iid", "shared"):
        acting = ChunkPolicy(NoisePlanner(policy, shared=mode == "shared"), policy).eval()
        torch.manual_seed(0)
        with torch.no_grad(), sim.make_env(task, num_envs=4, seed=EVAL_SEED, obs="state") as env:
            out[mode] = sim.evaluate(env, acting, episodes=episodes, seed=EVAL_SEED, progress=False)[
                "success_rate"
            ]
    return out


def base_record(args: Any) -> dict:
    """How the rows' base was made: its demos (count, action noise), training steps and augmentation."""
    augment = {"augment": args.augment} if args.augment else {}
    return {"noise": args.noise, "demos": args.demos, "steps": args.base_steps, **augment}


def auto_choice(base: Path | None) -> dict:
    """An ``action_noise_std=auto`` base's choice (σ, each probe's ratio and success, the finished base's
    check), from its metrics.json; {} for any other base."""
    metrics = None if base is None else base / "metrics.json"
    if metrics is None or not metrics.exists():
        return {}
    choice = json.loads(metrics.read_text()).get("auto_noise")
    return {"auto_noise": choice} if choice else {}


def _row(
    task: str, variant: str, seed: int, scored: tuple[Path, float], run: Path, m: dict, wall: float, args: Any
) -> dict:
    """One results row: the run's final (``latest``) and validation-selected (``best``) steering actors
    (+ frozen base, + the final trained actor where the run acts with an averaged one), each on
    ``--episodes`` unseen states; ``scored``: the frozen base and its success there."""
    base, base_success = scored
    final = evaluate(run, task, args.episodes, Path(f"{run}_eval_latest"), which="latest")
    best = evaluate(run, task, args.episodes, Path(f"{run}_eval_best"), which="best")
    trained = evaluate_trained(run, task, args.episodes, Path(f"{run}_eval_trained"))
    kept = unseen_history(run, task, args.episodes)
    return {
        "task": task,
        "variant": variant,
        "seed": seed,
        "base": base_record(args),
        **auto_choice(base),
        **({"steerability": m["steerability"]} if m.get("steerability") else {}),
        "base_success": base_success,
        "success_rate": final,
        **lift(base_success, final),  # lift and failures_removed, as robosteer-steer reports them
        "best_actor_success": best,
        **({"trained_actor_success": trained} if trained is not None else {}),
        "best_periodic": max(h["success_rate"] for h in m["history"]) if m["history"] else None,
        "episodes": args.episodes,
        "env_steps": m["env_steps"],
        "wall_s": wall,
        "history": m["history"],
        **({"unseen_history": kept} if kept else {}),
        "overrides": args.overrides,
        **_observations(run),
    }


def _observations(run: Path) -> dict:
    """What the run's actor and critics read, from its resolved config: the default changed (raw until
    1a03da3, the base's normalised observations since), so a row must say it, not leave it to its commit."""
    from omegaconf import OmegaConf

    dsrl = OmegaConf.load(run / "config.yaml").get("dsrl") or {}
    return {"normalize_obs": bool(dsrl["normalize_obs"])} if "normalize_obs" in dsrl else {}


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted({r["task"] for r in results})
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), squeeze=False)
    colors = {"na": "tab:blue", "sac": "tab:orange", "scratch": "tab:gray"}
    for ax, task in zip(axes[0], tasks, strict=True):
        for r in (r for r in results if r["task"] == task):
            h = r["history"]
            ax.plot(
                [p["env_steps"] for p in h],
                [p["success_rate"] for p in h],
                color=colors.get(r["variant"]) if r.get("where", "sim") == "sim" else "tab:green",
                ls=("-", "--", ":")[r["seed"] % 3],
                alpha=0.8,
                label=("SAC from scratch" if r["variant"] == "scratch" else f"DSRL-{r['variant']}")
                + ("" if r.get("where", "sim") == "sim" else f" on {r['where']}")
                + f" s{r['seed']}",
            )
        base = next(r["base_success"] for r in results if r["task"] == task)
        ax.axhline(base, color="gray", ls="--", label="weak base")
        ax.set_title(task)
        ax.set_xlabel("env steps")
        ax.set_ylabel("success rate (periodic eval)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", nargs="+", default=["push-v3", "pick-place-v3"])
    parser.add_argument("--variants", nargs="+", default=["na", "sac"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--noise", type=float, default=0.3, help="action noise std of the base's demos")
    parser.add_argument(
        "--demos", type=int, default=100, help="demos collected for the base and offline data"
    )
    parser.add_argument("--base-steps", type=int, default=3000)
    parser.add_argument(
        "--augment",
        type=lambda v: v if v == "auto" else float(v),
        default=0.0,
        help="train the base with this action noise on its demos' actions (robosteer-train action_noise_std; "
        "auto: the smallest the steerability check calls steerable)",
    )
    parser.add_argument("--env-steps", type=int, default=100_000)
    parser.add_argument("--max-minutes", type=float, default=60.0)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument(
        "--unseen-every",
        type=int,
        default=0,
        help="keep a checkpoint every this many env steps (run.keep_every: the first save past each multiple, so "
        "at most as often as run.checkpoint_every) and evaluate each on the unseen episodes (the row's "
        "unseen_history; 0: off)",
    )
    parser.add_argument("--out", default="runs/bench/dsrl")
    parser.add_argument(
        "--rows", help="also append each finished run's row (with its provenance) to this JSON-lines file"
    )
    parser.add_argument(
        "--noise-check", action="store_true", help="only: each base's success with i.i.d. vs repeated noise"
    )
    parser.add_argument(
        "--bases-only",
        action="store_true",
        help="only: train and score each task's base (choosing the tasks whose base leaves room to steer)",
    )
    parser.add_argument(
        "--robot",
        help="steer on this robot (sim_twin) through the deploy control loop instead of the simulator",
    )
    parser.add_argument(
        "--latency-ms", type=float, default=50.0, help="--robot sim_twin: injected round trip"
    )
    parser.add_argument(
        "--reward",
        default="success",
        help="--robot: success | twin | classifier (robosteer-steer reward=; classifier.data=... after --)",
    )
    parser.add_argument(
        "--learner",
        default="local",
        choices=("local", "ray"),
        help="--robot: local (updates between episodes, in the actor's process) | ray (a learner process)",
    )
    parser.add_argument("overrides", nargs="*", help="extra robosteer-steer overrides (after --)")
    args = parser.parse_args()
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    done = read_results(results_path, ("task", "variant", "seed", "where"), defaults={"where": "sim"})
    where = "sim" if not args.robot else f"{args.robot}_{args.reward}_{args.latency_ms:g}ms"
    where += "_ray" if args.robot and args.learner == "ray" else ""
    for task in args.tasks:
        base, demos, base_success = weak_base(
            task, out, args.noise, args.base_steps, args.episodes, args.demos, args.augment
        )
        if args.noise_check:
            check = shared_noise_check(base, task, args.episodes)
            print(
                f"| {task} | i.i.d. noise {check['iid']:.2f} | repeated noise {check['shared']:.2f} |",
                flush=True,
            )
            if args.rows:
                row = {"task": task, "part": "noise_check", "base": str(base), "episodes": args.episodes}
                append_row(args.rows, {**row, "iid_success": check["iid"], "shared_success": check["shared"]})
            continue
        print(
            f"{task}: weak base {base.name}: {base_success:.2f} success on {args.episodes} episodes",
            flush=True,
        )
        if args.bases_only:
            if args.rows:
                row = {"task": task, "part": "base", "base": base_record(args), "episodes": args.episodes}
                append_row(args.rows, {**row, **auto_choice(base), "base_success": base_success})
            continue
        for variant in args.variants:
            for seed in args.seeds:
                earlier = done.get((task, variant, seed, where))
                if earlier is not None and earlier["env_steps"] >= args.env_steps:
                    continue
                run = (
                    out
                    / task
                    / (f"dsrl_{variant}_s{seed}" if where == "sim" else f"dsrl_{variant}_{where}_s{seed}")
                )
                if variant == "scratch":  # plain SAC from scratch: no base, no demos
                    algo = ["base=scratch", f"task={task}", "variant=sac"]
                else:
                    algo = [f"base={base}", "which=ema", f"variant={variant}"]
                    algo += [f"offline={demos}"] if variant == "na" else []
                if args.robot:  # acting through real/: deploy's control loop, the learner between episodes
                    algo += [f"robot={args.robot}", f"robot.driver.latency_ms={args.latency_ms:g}"]
                    algo += [f"reward={args.reward}", f"learner={args.learner}"]
                kept = [f"run.keep_every={args.unseen_every}"] if args.unseen_every > 0 else []
                command = [
                    "robosteer.scripts.steer",
                    *algo,
                    *steer_budget(args, seed, run),
                    *kept,
                    *args.overrides,
                ]
                wall = None  # a run that finished before its results row was written is reused as it is
                metrics = run / "metrics.json"
                if metrics.exists() and json.loads(metrics.read_text())["env_steps"] < args.env_steps:
                    # a larger --env-steps extends a finished run from its last checkpoint; its evaluations
                    # are redone on the extended actors, its wall time adds to the first session's
                    metrics.unlink()
                    for suffix in ("latest", "best", "trained"):
                        shutil.rmtree(f"{run}_eval_{suffix}", ignore_errors=True)
                if not (run / "metrics.json").exists():
                    start = time.perf_counter()
                    # an interrupted run (another session's) continues exactly from its last checkpoint
                    resume = ["resume=true"] if (run / "checkpoints" / "latest").exists() else []
                    run_logged([*command, *resume], log_beside(run))
                    wall = time.perf_counter() - start + (earlier["wall_s"] if earlier else 0.0)
                m = json.loads((run / "metrics.json").read_text())
                r = _row(task, variant, seed, (base, base_success), run, m, wall or m["wall_time_s"], args)
                r["where"] = where
                if args.robot:  # the robot's own figures (its exploring policy's success, the held steps)
                    r["robot"] = {
                        "name": args.robot,
                        "latency_ms": args.latency_ms,
                        "reward": args.reward,
                        **{
                            k: m.get(k)
                            for k in (
                                "robot_episodes",
                                "robot_success_rate_last50",
                                "robot_held_steps",
                                "robot_held_ticks",
                                "robot_judged_agree",
                                "classifier",
                                "learner",
                                "robot_tick_late_ms_p99",
                            )
                            if k in m
                        },
                        "updates": m.get("updates"),
                    }
                r.update(provenance(["python", "-m", *command], ROOT))
                done[(task, variant, seed, where)] = r
                for path in [results_path, *([Path(args.rows)] if args.rows else [])]:
                    with path.open("a") as f:
                        f.write(json.dumps(r) + "\n")
                print(json.dumps({k: v for k, v in r.items() if k != "history"}), flush=True)
    rows: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in done.values():
        rows[(r["task"], r["variant"] + ("" if r["where"] == "sim" else f" on {r['where']}"))].append(r)
    print(
        f"\nSuccess on {args.episodes} unseen episodes (eval seed {EVAL_SEED}); weak DP base vs DSRL-steered "
        "(final actor)"
    )
    print("| task | variant | base | steered (per seed) | mean | env steps | wall min/run |")
    print("|---|---|---|---|---|---|---|")
    for (task, variant), rs in sorted(rows.items()):
        rs = sorted(rs, key=lambda r: r["seed"])
        per_seed = ", ".join(f"{r['success_rate']:.2f}" for r in rs)
        print(
            f"| {task} | {variant} | {rs[0]['base_success']:.2f} | {per_seed} | "
            f"{np.mean([r['success_rate'] for r in rs]):.2f} | {int(np.mean([r['env_steps'] for r in rs]))} | "
            f"{np.mean([r['wall_s'] for r in rs]) / 60:.1f} |"
        )
    if rows:
        plot([r for rs in rows.values() for r in rs], out / "curves.png")
        print(f"curves: {out / 'curves.png'}")


if __name__ == "__main__":
    main()
