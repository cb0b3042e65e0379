"""Demonstration quality and exact regeneration, per task.

For each task: collect N scripted-expert demos (success-only, as `make demo` does), then replay every kept
episode from its recorded episode seed with its recorded actions. Prints the expert's success over all
attempts, the success of the kept episodes on replay, and the largest observation mismatch on replay
(0.0 means the dataset regenerates bit for bit). Each task's row (with its provenance: command, commit,
machine, load) is appended to ``--rows``.

    python benchmarks/collect_quality.py [--episodes 100] [--tasks reach-v3 push-v3 ...]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from hydra import compose, initialize_config_dir
from results_tables import append_row

from robosteer.scripts.collect import collect
from robosteer.scripts.common import CONFIG_DIR, format_table
from robosteer.scripts.evaluate import replay_dataset

ROOT = Path(__file__).resolve().parents[1]
# the printed table's columns: the rows' keys
COLUMNS = [
    "task", "kept", "attempts", "expert_success", "replay_success", "replay_max_obs_diff", "mean_length", "collect_s",
]  # fmt: skip
TASKS = ["reach-v3", "push-v3", "pick-place-v3", "button-press-topdown-v3", "drawer-open-v3"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--tasks", nargs="+", default=TASKS)
    parser.add_argument(
        "--rows", default="docs/results/collect_quality.jsonl", help="append rows here ('': don't)"
    )
    parser.add_argument(
        "--out", type=Path, help="keep the datasets here, one folder per task (default: removed)"
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.out or scratch
        for task in args.tasks:
            with initialize_config_dir(
                config_dir=CONFIG_DIR, version_base=None
            ):  # collect.yaml and its groups
                cfg = compose("collect", [f"task={task}", f"episodes={args.episodes}", "progress=false"])
            m = collect(cfg, Path(tmp) / task)
            r = replay_dataset(m["dataset"], None, progress=False)
            rows.append(
                {
                    "task": task,
                    "kept": m["episodes"],
                    "attempts": m["attempts"],
                    "expert_success": m["success_rate"],
                    "replay_success": r["success_rate"],
                    "replay_max_obs_diff": r["max_obs_abs_diff"],
                    "mean_length": m["mean_episode_length"],
                    "collect_s": m["wall_time_s"],
                }
            )
            if args.rows:
                append_row(args.rows, {**rows[-1], "episodes": args.episodes})
            print(format_table(rows[-1:], COLUMNS), flush=True)
    print()
    print(format_table(rows, COLUMNS))


if __name__ == "__main__":
    main()
