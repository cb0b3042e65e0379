"""Training throughput (and, with ``--eval-episodes``, final success) of fp32 eager against ``precision=bf16``
and ``compile=true``, in one run on one device, so the options are judged beside their floor.

Why: bf16 autocast and torch.compile are GPU options (tensor cores, fused kernels); a figure is only worth
reporting against fp32 eager measured in the same run on the same machine. Each setting trains the same
Diffusion Policy on the same push-v3 demos with the same seed; ``samples_per_s`` is the loop's own figure
(compile's first steps, which pay for the compilation, count too: use enough ``--steps``).

Run: ``python benchmarks/train_precision.py --device cuda --steps 2000 --eval-episodes 100`` (a GPU machine)
or ``--device cpu --steps 200`` here. Prints a markdown table; appends one row per setting to ``--rows``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from results_tables import append_row

from robosteer.scripts.common import run_module

ROOT = Path(__file__).resolve().parents[1]
SETTINGS: dict[str, list[str]] = {
    "fp32 eager": [],
    "bf16": ["precision=bf16"],
    "compile": ["compile=true"],
    "bf16 + compile": ["precision=bf16", "compile=true"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--task", default="push-v3")
    parser.add_argument("--demos", type=int, default=20)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--eval-episodes", type=int, default=0, help="0: throughput only")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--dataset", type=Path, help="train on this demos.hdf5 instead of collecting --demos")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench" / "train_precision")
    parser.add_argument(
        "--rows", default="docs/results/train_precision.jsonl", help="append rows here ('': don't)"
    )
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    demos = out / "demos"
    if args.dataset is None and not (demos / "metrics.json").exists():
        collect = [
            "robosteer.scripts.collect",
            f"task={args.task}",
            f"episodes={args.demos}",
            "progress=false",
        ]
        run_module([*collect, f"out={demos}"], out / "collect.log", ROOT)
    print("| setting | device | steps | samples/s | vs fp32 eager | final loss | success |")
    print("|---|---|---|---:|---:|---:|---:|")
    floor = None
    for name in args.settings:
        run = out / f"{args.device}_{name.replace(' + ', '_').replace(' ', '_')}"
        dataset = args.dataset.resolve() if args.dataset else demos / "demos.hdf5"
        train = ["robosteer.scripts.train", "policy=diffusion", f"dataset={dataset}"]
        train += [f"steps={args.steps}", f"batch_size={args.batch_size}", "seed=0", f"device={args.device}"]
        if args.eval_episodes:  # with a task, the run ends with an evaluation of its EMA weights
            train += [f"task={args.task}", f"eval_episodes={args.eval_episodes}", "eval_video_episodes=0"]
        train += ["progress=false", f"out={run}", *SETTINGS[name]]
        if not (run / "metrics.json").exists():
            run_module(train, run.with_suffix(".log"), ROOT)
        m = json.loads((run / "metrics.json").read_text())
        floor = floor or (m["samples_per_s"] if name == "fp32 eager" else None)
        ratio = f"{m['samples_per_s'] / floor:.2f}×" if floor else "n/a"
        success = m.get("success_rate")
        print(
            f"| {name} | {args.device} | {m['steps']} | {m['samples_per_s']:.0f} | {ratio} | "
            f"{m['final_loss']:.4f} | {'-' if success is None else f'{success:.2f}'} |"
        )
        row = {"setting": name, "device": args.device, "task": args.task, "steps": m["steps"]}
        row |= {
            "batch_size": args.batch_size,
            "samples_per_s": m["samples_per_s"],
            "final_loss": m["final_loss"],
        }
        row |= {"success_rate": success, "episodes": args.eval_episodes, "seed": 0}
        if args.rows:
            append_row(args.rows, row, ["python", "-m", *train])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
