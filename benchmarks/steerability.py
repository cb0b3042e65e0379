"""The steerability check's calibration: its figures for bases DSRL could and could not steer.

For each ``--base RUN=DEMOS`` pair it runs ``robosteer-steer base=RUN offline=DEMOS check_only=true`` (the
check exactly as a user meets it: 128 of the demos' states x 16 latents, and the base held at 4 fixed
latents for 10 evaluation episodes each) and appends a row with the base's
own success (its run's ``metrics.json``) to ``--rows``. The README's "What makes a base steerable" table is
drawn from those rows (``python benchmarks/results_tables.py --write``).

    python benchmarks/steerability.py --base runs/dp_clean=runs/clean/demos.hdf5 --label clean-10 ...

Extra ``robosteer-steer`` overrides go after ``--`` (e.g. ``steerability.episodes=2`` for a quick look; the
row records the episodes the check ran).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from omegaconf import OmegaConf
from results_tables import append_row

from robosteer.scripts.common import format_table

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--base", nargs="+", required=True, help="RUN=DEMOS pairs (a robosteer-train run, its data)"
    )
    parser.add_argument(
        "--label", nargs="+", required=True, help="one label per base (e.g. clean-10, noisy-0.3)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--rows", default="docs/results/steerability.jsonl", help="append rows here ('': don't)"
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        help="extra robosteer-steer overrides (after --), e.g. steerability.episodes=2 for a quick run",
    )
    args = parser.parse_args()
    if len(args.label) != len(args.base):
        parser.error(f"{len(args.base)} --base pairs but {len(args.label)} --label values")
    table = []
    for pair, label in zip(args.base, args.label, strict=True):
        run, _, demos = pair.partition("=")
        with tempfile.TemporaryDirectory() as out:
            cmd = [
                sys.executable,
                "-m",
                "robosteer.scripts.steer",
                f"base={run}",
                f"offline={demos}",
                "check_only=true",
            ]
            cmd += [f"seed={args.seed}", *args.overrides, f"out={out}"]
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
            check = json.loads((Path(out) / "metrics.json").read_text())
            check_cfg = OmegaConf.load(Path(out) / "config.yaml")
        base = json.loads((Path(run) / "metrics.json").read_text())
        row = {
            "label": label,
            "task": check["task"],
            "base_success": base.get("success_rate"),
            "base_eval_episodes": int(OmegaConf.load(Path(run) / "config.yaml").eval_episodes),
            "seed": args.seed,
            "direction_episodes": int(check_cfg.steerability.episodes),
            **check["steerability"],
        }
        table.append(row)
        if args.rows:
            append_row(args.rows, row)
    cols = [
        "label",
        "task",
        "base_success",
        "over_noise",
        "over_states",
        "ratio",
        "direction_success",
        "verdict",
    ]
    print(format_table([{k: r[k] for k in cols} for r in table]))


if __name__ == "__main__":
    main()
