"""Success rate vs number of demonstrations, per task and policy (issue: imitation policies).

For every (task, policy, demos, seed): collect 100 expert demos once per task, train on the first N
training demos (``demo_limit``) for a fixed number of steps, and evaluate the final EMA weights on
``--episodes`` initial states never seen in training (eval seed 200000). Results are appended to
``<out>/results.jsonl`` as each run finishes, so an interrupted grid resumes where it stopped.

    python benchmarks/data_scaling.py --tasks push-v3 --policies diffusion flow streaming \
        --demos 10 25 100 --seeds 0 1 --steps 15000 --episodes 100 --out runs/bench/data_scaling
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from robosteer.scripts.common import log_beside, read_results, run_module

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], log: Path) -> None:
    run_module(args, log, ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", nargs="+", default=["push-v3"])
    parser.add_argument("--policies", nargs="+", default=["diffusion", "flow", "streaming"])
    parser.add_argument("--demos", nargs="+", type=int, default=[10, 25, 100])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument(
        "--collect",
        type=int,
        default=112,
        help="expert episodes collected per task (112: >= 100 training demos after the 10%% validation split)",
    )
    parser.add_argument("--steps", type=int, default=15000)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--out", default="runs/bench/data_scaling")
    parser.add_argument(
        "--device", default="cpu", help="training device: cpu | cuda (evaluation runs on CPU)"
    )
    args = parser.parse_args()
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    done = read_results(results_path, ("task", "policy", "demos", "seed"))
    for task in args.tasks:
        # 112 kept episodes (the default): 10% go to the validation split, leaving >= 100 training demos
        demos = out / task / ("demos" if args.collect == 112 else f"demos_{args.collect}")
        if not (demos / "demos.hdf5").exists():
            _run(
                [
                    "robosteer.scripts.collect",
                    f"task={task}",
                    f"episodes={args.collect}",
                    "progress=false",
                    f"out={demos}",
                ],
                out / f"{task}_collect.log",
            )
        for policy in args.policies:
            for seed in args.seeds:  # seed outermost: an interrupted grid has whole curves, not half cells
                for n in args.demos:
                    key = (task, policy, n, seed)
                    if key in done:
                        continue
                    run = out / task / f"{policy}_n{n}_s{seed}"
                    start = time.perf_counter()
                    _run(
                        [
                            "robosteer.scripts.train",
                            f"policy={policy}",
                            f"dataset={demos / 'demos.hdf5'}",
                            f"demo_limit={n}",
                            f"steps={args.steps}",
                            f"seed={seed}",
                            f"device={args.device}",
                            "progress=false",
                            f"out={run}",
                        ],
                        log_beside(run, ".train.log"),
                    )
                    train_s = time.perf_counter() - start
                    _run(
                        [
                            "robosteer.scripts.evaluate",
                            f"checkpoint={run}",
                            "which=ema",
                            f"task={task}",
                            f"episodes={args.episodes}",
                            "seed=200000",
                            "video=false",
                            "progress=false",
                            f"out={run}_eval",
                        ],
                        log_beside(run, ".eval.log"),
                    )
                    m = json.loads((Path(f"{run}_eval") / "metrics.json").read_text())
                    r = {
                        "task": task,
                        "policy": policy,
                        "demos": n,
                        "seed": seed,
                        "steps": args.steps,
                        "success_rate": m["success_rate"],
                        "episodes": m["episodes"],
                        "train_s": train_s,
                        "device": args.device,
                    }
                    done[key] = r
                    with results_path.open("a") as f:
                        f.write(json.dumps(r) + "\n")
                    print(json.dumps(r), flush=True)
    table: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in done.values():
        table[(r["task"], r["policy"])][r["demos"]].append(r["success_rate"])
        times[(r["task"], r["policy"])].append(r["train_s"])
    cols = sorted({n for row in table.values() for n in row})
    print("\n| task | policy | " + " | ".join(f"{n} demos" for n in cols) + " | train min/run |")
    print("|---|---|" + "---|" * len(cols) + "---|")
    for (task, policy), row in sorted(table.items()):
        cells = [f"{np.mean(row[n]):.2f} (n={len(row[n])} seeds)" if n in row else "" for n in cols]
        print(
            f"| {task} | {policy} | " + " | ".join(cells) + f" | {np.mean(times[(task, policy)]) / 60:.1f} |"
        )


if __name__ == "__main__":
    main()
