"""EXPO vs RLPD vs best-of-N vs DSRL-NA vs the base alone, offline-to-online, from the same base and demos.

For every task: the weak Diffusion Policy base and its 100 noisy demos of ``dsrl_steering.py`` (built once and
shared with that benchmark when ``--out`` matches). Then for every (method, seed) ``robosteer-steer`` runs
for ``--env-steps`` env steps (at most ``--max-minutes``) with the demos as offline data, and the result is
evaluated on ``--episodes`` unseen initial states (eval seed 200000). Methods:

- ``expo``: ``algo=expo`` (base keeps imitating, edit policy, on-the-fly argmax over N + M candidates)
- ``rlpd``: ``algo=expo expo.policy=sac expo.backup_entropy=true`` (Gaussian SAC actor, same critics/data)
- ``rlpd_single``: the same with ``expo.action=single``: one env step per action, as the reference RLPD acts
  (``rlpd`` makes the executed 8-step chunk one 32-d action, like ``expo``)
- ``expo_o2o``: ``expo`` with the reference's offline-to-online script settings (``expo_square_pretrain``: no
  random warm-up, β = 0.1) and the α target adjusted for β (``expo.adjust_target_entropy=true``)
- ``best_of_n``: ``algo=expo expo.edit_scale=0`` (N base samples, critic argmax, no edits)
- ``base``: ``algo=expo expo.num_samples=1 expo.num_edits=0`` (the base alone, still imitating)
- ``dsrl_na``: ``algo=dsrl variant=na`` (latent-noise steering of the frozen base)

Each finished run is appended to ``<out>/expo_results.jsonl``, so an interrupted grid resumes where it
stopped. The table is printed and the success-vs-env-steps curves (each run's periodic evaluations, mean over
seeds per method) are written to ``--figure``. Extra ``robosteer-steer`` overrides go after ``--``.

    python benchmarks/expo_steering.py --tasks push-v3 pick-place-v3 peg-insert-side-v3 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from steering_runs import EVAL_SEED, evaluate, steer_budget, weak_base  # the weak base DSRL steers too

from robosteer.scripts.common import format_table, log_beside, read_results, run_module

ROOT = Path(__file__).resolve().parents[1]
METHODS = {
    "expo": ["algo=expo"],
    "expo_o2o": [
        "algo=expo",
        "run.warmup_chunks=0",
        "expo.edit_scale=0.1",
        "expo.adjust_target_entropy=true",
    ],
    "rlpd": ["algo=expo", "expo.policy=sac", "expo.backup_entropy=true"],
    "rlpd_single": ["algo=expo", "expo.policy=sac", "expo.backup_entropy=true", "expo.action=single"],
    "best_of_n": ["algo=expo", "expo.edit_scale=0"],
    "base": ["algo=expo", "expo.num_samples=1", "expo.num_edits=0"],
    "dsrl_na": ["algo=dsrl", "variant=na"],
}
COLORS = {
    "expo": "tab:red",
    "expo_o2o": "tab:purple",
    "rlpd": "tab:orange",
    "rlpd_single": "tab:brown",
    "best_of_n": "tab:green",
    "base": "tab:gray",
    "dsrl_na": "tab:blue",
}


def overrides_for(method: str, overrides: list[str]) -> list[str]:
    """The extra overrides that apply to ``method``'s algo (``expo.*`` only to EXPO runs, ``dsrl.*`` only to
    DSRL's): one command line can then tune both, as Hydra refuses keys of the other algo's group."""
    other = "dsrl." if METHODS[method][0] == "algo=expo" else "expo."
    return [o for o in overrides if not o.lstrip("+~").startswith(other)]


THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)


def steps_to_reach(history: list[dict], threshold: float) -> float | None:
    """Env steps of the first periodic eval at or above ``threshold``; None if no eval of the run reached it."""
    for h in history:
        if h["success_rate"] >= threshold - 1e-9:
            return float(h["env_steps"])
    return None


def reach_ratio(steps: float | None, ref: float | None, ref_end: float) -> str:
    """``steps / ref`` as text; if the reference never reached the threshold within its ``ref_end`` env steps,
    the ratio is only bounded: below ``steps / ref_end``. "–": no ratio (this run never reached it, or the
    reference had it before any env step)."""
    if steps is None or ref == 0 or (ref is None and ref_end <= 0):
        return "–"
    if ref is None:
        return f"< {steps / ref_end:.2f}"
    return f"{steps / ref:.2f}"


def reach_table(rows: list[dict], reference: str = "rlpd") -> list[dict]:
    """Per row: env steps to the first periodic eval ≥ each threshold ("> N": not within its N env steps), and
    its ratio to the task's ``reference`` run (a row whose label starts with it, of the same seed where there is
    one): the Done-when's "at most 2/3 of RLPD's env steps" reads off the ratio columns."""
    any_ref = any(q["method"].startswith(reference) for q in rows)
    table = []
    for r in sorted(rows, key=lambda r: (r["task"], r["method"], r["seed"])):
        refs = [
            q for q in rows if q["task"] == r["task"] and q["method"].startswith(reference) and q is not r
        ]
        ref = next((q for q in refs if q["seed"] == r["seed"]), refs[0] if refs else None)
        row: dict[str, str | int] = {"task": r["task"], "method": r["method"], "seed": r["seed"]}
        end = r["history"][-1]["env_steps"] if r["history"] else 0
        ratios: dict[str, str] = {}
        for x in THRESHOLDS:
            s = steps_to_reach(r["history"], x)
            row[f"≥ {x}"] = f"{s:,.0f}" if s is not None else f"> {end:,.0f}"
            if any_ref:  # every row has the ratio columns (blank without a reference), so none is dropped
                ratios[f"/ {reference} ≥ {x}"] = (
                    reach_ratio(s, steps_to_reach(ref["history"], x), ref["history"][-1]["env_steps"])
                    if ref is not None and ref["history"]
                    else ""
                )
        table.append({**row, **ratios})
    return table


def report(rows: list[dict], figure: Path) -> None:
    """Both modes' ending: the env-steps-to-reach table and the curves figure."""
    print("\nEnv steps to the first periodic eval at or above each success rate")
    print(format_table(reach_table(rows)))
    plot(rows, figure)
    print(f"curves: {figure}")


def plot(results: list[dict], path: Path) -> None:
    """Success vs env steps per task: one line per method (mean over seeds at shared eval points)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted({r["task"] for r in results})
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), squeeze=False)
    long = max(len(r["method"]) for r in results) > 40  # long labels: one legend below the axes
    for ax, task in zip(axes[0], tasks, strict=True):
        by_method: dict[str, list[dict]] = defaultdict(list)
        for r in results:
            if r["task"] == task:
                by_method[r["method"]].append(r)
        for method, rs in sorted(by_method.items()):
            n = min(len(r["history"]) for r in rs)
            steps = [rs[0]["history"][i]["env_steps"] for i in range(n)]
            mean = [np.mean([r["history"][i]["success_rate"] for r in rs]) for i in range(n)]
            ax.plot(
                steps,
                mean,
                marker="o",
                ms=3,
                color=COLORS.get(method),
                label=f"{method} ({len(rs)} seed{'s' if len(rs) > 1 else ''})",
            )
        ax.axhline(rs[0]["base_success"], color="black", ls="--", lw=0.8, label="base (stock sampler)")
        ax.set_title(task)
        ax.set_xlabel("env steps")
        ax.set_ylabel("success rate (periodic eval)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        if not long:
            ax.legend(fontsize=7)
    fig.tight_layout()
    if long:  # one legend for all tasks, below them
        seen = {label: h for ax in axes[0] for h, label in zip(*ax.get_legend_handles_labels(), strict=True)}
        fig.legend(seen.values(), seen.keys(), loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight" if long else None)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", nargs="+", default=["push-v3", "pick-place-v3", "peg-insert-side-v3"])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--noise", type=float, default=0.3, help="action noise std of the base's demos")
    parser.add_argument(
        "--demos", type=int, default=100, help="demos collected for the base and offline data"
    )
    parser.add_argument("--base-steps", type=int, default=3000)
    parser.add_argument("--env-steps", type=int, default=100_000)
    parser.add_argument("--max-minutes", type=float, default=60.0)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument(
        "--out", default="runs/bench/dsrl", help="shares the weak bases with dsrl_steering.py"
    )
    parser.add_argument("--figure", default="docs/figures/expo_curves.png")
    parser.add_argument(
        "--plot-only",
        type=Path,
        metavar="ROWS",
        help="draw --figure from a results file's rows (e.g. docs/results/expo_probes.jsonl) and run nothing; "
        "each line is labelled by its method and the overrides beyond --label-common",
    )
    parser.add_argument(
        "--plot-base", help="with --plot-only: only rows from this base (e.g. base_dp_noise0.3_8000)"
    )
    parser.add_argument(
        "--label-common",
        nargs="*",
        default=["run.reward=shaped", "run.eval_every=2500"],
        help="with --plot-only: overrides every row shares, left out of the labels",
    )
    parser.add_argument("overrides", nargs="*", help="extra robosteer-steer overrides (after --)")
    args = parser.parse_args()
    if args.plot_only:
        rows = [json.loads(line) for line in args.plot_only.read_text().splitlines() if line.strip()]
        rows = [r for r in rows if args.plot_base in (None, r.get("base"))]
        if not rows:
            sys.exit(
                f"{args.plot_only}: no rows" + (f" from base {args.plot_base!r}" if args.plot_base else "")
            )
        for r in rows:
            extra = [o.split(".", 1)[-1] for o in r.get("overrides", []) if o not in args.label_common]
            r["method"] = " ".join([r["method"], *extra]) + (
                " (stopped)" if r["success_rate"] is None else ""
            )
        report(rows, (ROOT / args.figure).resolve())
        return
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "expo_results.jsonl"
    done = read_results(results_path, ("task", "method", "seed"))
    for task in args.tasks:
        base, demos, base_success = weak_base(
            task, out, args.noise, args.base_steps, args.episodes, args.demos
        )
        print(f"{task}: base {base.name}: {base_success:.2f} success on {args.episodes} episodes", flush=True)
        for method in args.methods:
            for seed in args.seeds:
                if (task, method, seed) in done:
                    continue
                run = out / task / f"{method}_s{seed}"
                start = time.perf_counter()
                steer = [
                    "robosteer.scripts.steer",
                    *METHODS[method],
                    f"base={base}",
                    "which=ema",
                    f"offline={demos}",
                    *steer_budget(args, seed, run),
                    *overrides_for(method, args.overrides),
                ]
                resume = ["resume=true"] if (run / "checkpoints" / "latest").exists() else []
                run_module(steer + resume, log_beside(run), ROOT)
                wall = time.perf_counter() - start
                m = json.loads((run / "metrics.json").read_text())
                steered = evaluate(run, task, args.episodes, Path(f"{run}_eval"), which="latest")
                r = {
                    "task": task,
                    "method": method,
                    "seed": seed,
                    "base": base.name,
                    "base_success": base_success,
                    "success_rate": steered,
                    "episodes": args.episodes,
                    "env_steps": m["env_steps"],
                    "wall_s": wall,
                    "history": m["history"],
                    "overrides": args.overrides,
                }
                done[(task, method, seed)] = r
                with results_path.open("a") as f:
                    f.write(json.dumps(r) + "\n")
                print(json.dumps({k: v for k, v in r.items() if k != "history"}), flush=True)
    rows: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in done.values():
        rows[(r["task"], r["method"])].append(r)
    table = []
    for (task, method), rs in sorted(rows.items()):
        rs = sorted(rs, key=lambda r: r["seed"])
        table.append(
            {
                "task": task,
                "method": method,
                "base": rs[0]["base_success"],
                "per seed": ", ".join(f"{r['success_rate']:.2f}" for r in rs),
                "mean": float(np.mean([r["success_rate"] for r in rs])),
                "env steps": int(np.mean([r["env_steps"] for r in rs])),
                "wall min/run": float(np.mean([r["wall_s"] for r in rs]) / 60),
            }
        )
    print(
        f"\nSuccess on {args.episodes} unseen episodes (eval seed {EVAL_SEED}), offline-to-online from one base"
    )
    print(format_table(table))
    if done:
        report(list(done.values()), (ROOT / args.figure).resolve())


if __name__ == "__main__":
    main()
