"""What the kept-checkpoint investigations share (dsrl_kept.py, dsrl_kept_average.py, dsrl_failures.py): the
benchmark row of a ``benchmarks/dsrl_steering.py`` run, its kept checkpoints, and the fields each row opens with.
A library, not a script.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # the shared benchmark libraries

from steering_runs import kept_checkpoints

from robosteer.scripts.common import read_results

RUN_NAME = re.compile(r"dsrl_(?P<variant>[a-z]+)_s(?P<seed>\d+)")


def benchmark_row(run: Path) -> dict:
    """The ``dsrl_steering.py`` results row of ``run`` (``<out>/<task>/dsrl_<variant>_s<seed>``)."""
    name = RUN_NAME.fullmatch(run.name)
    if name is None:
        raise SystemExit(
            f"{run}: not a run of dsrl_steering.py (expected <out>/<task>/dsrl_<variant>_s<seed>)"
        )
    results = run.parent.parent / "results.jsonl"
    if not results.exists():
        raise SystemExit(f"{run}: no {results}: the run's benchmark row (its overrides) is missing")
    rows = read_results(results, ("task", "variant", "seed", "where"), defaults={"where": "sim"})
    key = (run.parent.name, name["variant"], int(name["seed"]), "sim")
    if key not in rows:
        raise SystemExit(
            f"{run}: {results} has no row for task, variant, seed {key[:3]} (finished runs only)"
        )
    return rows[key]


def kept_or_exit(run: Path) -> list[Path]:
    """The run's kept checkpoints, in step order; a clear exit when it kept none."""
    kept = kept_checkpoints(run)
    if not kept:
        raise SystemExit(f"{run}: kept no checkpoints (run dsrl_steering.py with --unseen-every N)")
    return kept


def row_head(bench: dict, episodes: int) -> dict:
    """The fields each per-run row of the kept-checkpoint scripts opens with: the run and its overrides."""
    return {
        "task": bench["task"],
        "variant": bench["variant"],
        "seed": bench["seed"],
        "overrides": bench["overrides"],
        "episodes": episodes,
    }
