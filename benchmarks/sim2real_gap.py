"""The sim-to-real gap in miniature: a policy trained without vs with domain randomization (issue 8).

Two policies of one kind are trained for the same number of steps: "nominal" on expert demos collected in
nominal Meta-World, "randomized" on expert demos collected under ``--randomization`` (dynamics, poses,
noise and 100 ms actuation latency: configs/randomization/). Both are evaluated (final EMA weights,
``--episodes`` unseen initial states, eval seed 200000) in nominal Meta-World and under ``--randomization``.
A policy's loss is its nominal success minus its randomized success; the issue's target is that the
randomized policy loses at most half of what the nominal one loses (mean over ``--seeds``). Every
finished cell is appended to ``<out>/<task>_<policy>_s<seed>/results.jsonl`` and every finished stage
(demos, training) is kept, so a rerun resumes. Demos use collection seed 0 whatever the training seed.

    python benchmarks/sim2real_gap.py --task push-v3 --policy diffusion --demos 100 --steps 5000 \
        --episodes 50 --seeds 0 1 2 --out runs/bench/sim2real_gap
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from robosteer.scripts.common import format_table, read_results, run_module

ROOT = Path(__file__).resolve().parents[1]
TRAININGS = ("nominal", "randomized")


def _collect(task: str, demos: int, randomization: str, out: Path, log: Path) -> Path:
    """Expert demos (kept successes) under ``randomization``; reused when already there."""
    path = out / "demos.hdf5"
    if not (out / "metrics.json").exists():  # collect writes metrics.json last: a finished dataset
        args = [f"task={task}", f"episodes={demos}", f"randomization={randomization}"]
        run_module(["robosteer.scripts.collect", *args, "progress=false", f"out={out}"], log, ROOT)
    return path


def _train(dataset: Path, policy: str, steps: int, seed: int, out: Path, log: Path) -> float:
    """Train (resuming an interrupted run); return the wall seconds this call spent."""
    start = time.perf_counter()
    if not (out / "metrics.json").exists():
        resume = (out / "checkpoints" / "latest").exists()
        args = [f"policy={policy}", f"dataset={dataset}", f"steps={steps}", f"seed={seed}"]
        args += ["progress=false", f"resume={str(resume).lower()}", f"out={out}"]
        run_module(["robosteer.scripts.train", *args], log, ROOT)
    return time.perf_counter() - start


def _evaluate(run: Path, task: str, randomization: str, episodes: int, out: Path, log: Path) -> dict:
    args = [f"checkpoint={run}", "which=ema", f"task={task}", f"episodes={episodes}", "seed=200000"]
    args += [f"randomization={randomization}", "video=false", "progress=false", f"out={out}"]
    run_module(["robosteer.scripts.evaluate", *args], log, ROOT)
    return json.loads((out / "metrics.json").read_text())


def _run_seed(args: argparse.Namespace, seed: int) -> dict[tuple[str, str], dict]:
    """Every (training, evaluation) cell of one training seed, resuming what is already done."""
    out = (ROOT / args.out).resolve() / f"{args.task}_{args.policy}_s{seed}"
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    done = read_results(results_path, ("train", "eval"))
    for training in TRAININGS:
        collect_under = "none" if training == "nominal" else args.randomization
        dataset = _collect(
            args.task, args.demos, collect_under, out / f"demos_{training}", out / f"collect_{training}.log"
        )
        run = out / f"train_{training}"
        train_s = _train(dataset, args.policy, args.steps, seed, run, out / f"train_{training}.log")
        for evaluation in ("none", args.randomization):
            if (training, evaluation) in done:
                continue
            m = _evaluate(
                run,
                args.task,
                evaluation,
                args.episodes,
                out / f"eval_{training}_{evaluation}",
                out / "eval.log",
            )
            r = {
                "train": training,
                "eval": evaluation,
                "seed": seed,
                "task": args.task,
                "policy": args.policy,
                "demos": args.demos,
                "steps": args.steps,
                "episodes": m["episodes"],
                "success_rate": m["success_rate"],
                "success_ci95": m["success_ci95"],
                "train_s": train_s,
                "load": os.getloadavg()[0],
            }
            done[(training, evaluation)] = r
            with results_path.open("a") as f:
                f.write(json.dumps(r) + "\n")
            print(json.dumps(r), flush=True)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default="push-v3")
    parser.add_argument("--policy", default="diffusion")
    parser.add_argument("--demos", type=int, default=100)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--randomization", default="default", help="configs/randomization/<name>.yaml")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="training seeds (one run dir each)")
    parser.add_argument("--out", default="runs/bench/sim2real_gap")
    args = parser.parse_args()
    if not (ROOT / "configs" / "randomization" / f"{args.randomization}.yaml").exists():
        choices = sorted(p.stem for p in (ROOT / "configs" / "randomization").glob("*.yaml"))
        raise SystemExit(f"--randomization {args.randomization!r} is not valid: expected one of {choices}")
    cells = {seed: _run_seed(args, seed) for seed in args.seeds}

    rows, loss = [], {t: [] for t in TRAININGS}
    for seed, done in cells.items():
        for training in TRAININGS:
            nominal, randomized = done[(training, "none")], done[(training, args.randomization)]
            loss[training].append(nominal["success_rate"] - randomized["success_rate"])
            rows.append(
                {
                    "trained": f"{training} demos",
                    "seed": seed,
                    "success, nominal eval": nominal["success_rate"],
                    "95% CI (nominal)": "[{:.2f}, {:.2f}]".format(*nominal["success_ci95"]),
                    f"success, {args.randomization}": randomized["success_rate"],
                    f"95% CI ({args.randomization})": "[{:.2f}, {:.2f}]".format(*randomized["success_ci95"]),
                    "loss": loss[training][-1],
                }
            )
    print(
        f"\n{args.task}, {args.policy}, {args.demos} demos, {args.steps} steps, {args.episodes} episodes/cell"
    )
    print(format_table(rows))
    mean = {t: sum(v) / len(v) for t, v in loss.items()}
    target = max(mean["nominal"], 0.0) / 2
    verdict = "met" if mean["randomized"] <= target else "not met"
    print(
        f"\nmean loss over {len(cells)} seed(s): nominal {mean['nominal']:.3f}, randomized {mean['randomized']:.3f}; "
        f"target (randomized <= nominal / 2 = {target:.3f}): {verdict}"
    )


if __name__ == "__main__":
    main()
