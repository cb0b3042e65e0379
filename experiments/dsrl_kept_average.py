"""Would a longer average of the actor hold what a DSRL run reached? Uniform averages of its kept actors.

A run acts with a Polyak average of its trained actor (``dsrl.actor_tau``, about its last 500 steps). When its
kept checkpoints swing and fall late (pick-place-v3), a far longer average could hold the peak if the
actors swing *around* a good policy, and cannot if the policy itself drifts. This averages, weight by weight, the
acting actors of every checkpoint a run of ``dsrl_steering.py --unseen-every N`` kept from ``--starts`` env steps
on to its last (stochastic weight averaging over the kept checkpoints: one every N env steps, so each average
spans tens of thousands of env steps) and scores each average on the same unseen episodes (eval seed 200000,
the mean latent) as the run's final actor, beside the kept actors' own scores (the run's ``unseen_history``,
reused). One row per run (``--rows``), with the run's benchmark overrides.

    python experiments/dsrl_kept_average.py runs/bench/pp_cos/pick-place-v3/dsrl_na_s0 --starts 20000 50000 70000 \
        --rows docs/results/dsrl_kept_average.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # the shared benchmark libraries

from kept_runs import benchmark_row, kept_or_exit, row_head
from results_tables import append_row
from steering_runs import evaluate_in_process, kept_checkpoints, kept_steps, unseen_history

from robosteer.scripts.common import format_table


def kept_from(run: Path, start: int) -> list[Path]:
    """The checkpoints the run kept from ``start`` env steps on, in step order; a clear exit when none."""
    kept = [ck for ck in kept_checkpoints(run) if kept_steps(ck) >= start]
    if not kept:
        raise SystemExit(f"{run}: kept no checkpoint at or after {start} env steps (--starts)")
    return kept


def averaged_policy(kept: list[Path]) -> Any:
    """The last of ``kept``'s policies acting with the uniform average of all their acting actors."""
    import torch

    from robosteer.policies.steering.dsrl import load_steered_policy

    policy = load_steered_policy(str(kept[-1]))
    states = [load_steered_policy(str(ck)).agent.acting_actor.state_dict() for ck in kept]
    average = {k: torch.stack([s[k].double() for s in states]).mean(0) for k in states[0]}
    acting = policy.agent.acting_actor
    acting.load_state_dict({k: v.to(states[0][k].dtype) for k, v in average.items()})
    return policy


def kept_averages(run: Path, starts: list[int], episodes: int) -> dict:
    """One row: the kept actors' scores and each average's, on the same unseen episodes."""
    bench = benchmark_row(run)
    task = bench["task"]
    kept_or_exit(run)
    kept = unseen_history(run, task, episodes)
    averages = []
    for start in starts:
        members = kept_from(run, start)
        out = Path(f"{run}_eval_avg/{start:09d}")
        cached = out / "metrics.json"
        if cached.exists():  # scored before: no weights to load
            success = float(json.loads(cached.read_text())["success_rate"])
        else:
            which = f"average of {len(members)} kept actors"
            success = evaluate_in_process(averaged_policy(members), task, episodes, out, which)
        averages.append({"from": start, "checkpoints": len(members), "success_rate": success})
    return {
        **row_head(bench, episodes),
        "kept": kept,
        "averages": averages,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="DSRL run directories of dsrl_steering.py")
    parser.add_argument(
        "--starts", nargs="+", type=int, default=[20000, 50000, 70000], help="first env step of each average"
    )
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--rows", help="append each run's row (with its provenance) to this JSON-lines file")
    args = parser.parse_args()
    table = []
    for run in args.runs:
        row = kept_averages(run.resolve(), args.starts, args.episodes)
        if args.rows:
            append_row(args.rows, row)
        last = row["kept"][-1]["success_rate"]
        for a in row["averages"]:
            table.append({"run": run.parent.parent.name + "/" + run.name, "final actor": last, **a})
    print(format_table(table))


if __name__ == "__main__":
    main()
