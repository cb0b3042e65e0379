"""Where an EXPO run's success comes from: its on-the-fly operator re-evaluated with other N and M.

An EXPO agent improves two ways: the base keeps imitating (its EMA copy acts) and the critic picks among N base
samples + M edits. This evaluates one checkpoint's agent with the candidate set changed at evaluation only:
``1,0`` is the EMA base alone, ``N,0`` best-of-N under the run's critic, ``N,M`` the OTF operator. If the critic
ranks candidates well, success grows with N; if it is exploited, it falls. ``N,M,K`` also scores the candidates
with the min over K target heads instead of the run's ``num_min_qs`` (K = 10: all of them, the most
pessimistic). Same unseen initial states as ``expo_steering.py`` (eval seed 200000), torch seeded per setting,
so every cell is reproducible.

    python experiments/expo_selection.py runs/bench/dsrl/push-v3/expo_s0 --settings 1,0 4,0 4,4 16,0
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # the shared benchmark libraries

from steering_runs import EVAL_SEED

from robosteer.scripts.common import format_table, read_results


def parse_setting(text: str) -> tuple[int, int, int | None]:
    """``"N,M"`` or ``"N,M,K"`` → (N, M, K or None), with a clear error for anything else."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) not in (2, 3):
        raise argparse.ArgumentTypeError(
            f"--settings entry {text!r} is not N,M or N,M,K (e.g. 4,4 or 16,0 or 4,4,10)"
        )
    n, m, k = values[0], values[1], (values[2] if len(values) == 3 else None)
    if n < 1 or not 0 <= m <= n:
        raise argparse.ArgumentTypeError(f"--settings entry {text!r}: need N >= 1 and 0 <= M <= N")
    if k is not None and k < 1:
        raise argparse.ArgumentTypeError(f"--settings entry {text!r}: need K >= 1 heads")
    return n, m, k


def load_otf(run: Path, which: str) -> Any:
    """``run``'s OTF policy (EMA base, critic, edit policy), loaded once and re-evaluated per setting."""
    from robosteer.policies.steering.expo import load_expo_policy

    policy = load_expo_policy(str(run), which)
    if policy.agent.config.policy != "otf":
        raise ValueError(
            f"{run} is an RLPD run (expo.policy={policy.agent.config.policy}): it has no OTF operator"
        )
    return policy


def evaluate_setting(policy: Any, run: Path, n: int, m: int, k: int | None, episodes: int, seed: int) -> dict:
    """Success of the run's agent with N base samples and M edits (its critic, base and edit policy), scored
    by the min over a random K of its target heads (None: the run's ``num_min_qs``). The agent's trained
    config is restored afterwards, so settings do not leak into each other."""
    from robosteer import sim

    agent = policy.agent
    if m > 0 and agent.actor is None:
        raise ValueError(f"{run} has no edit policy (β = 0 or M = 0 in training): use settings with M = 0")
    trained = agent.config
    heads = trained.num_min_qs if k is None else k
    agent.config = dataclasses.replace(trained, num_samples=n, num_edits=m, num_min_qs=heads)  # re-validated
    try:
        torch.manual_seed(seed)
        with sim.make_env(policy.task, num_envs=4, seed=seed, obs="state") as env, torch.no_grad():
            metrics = sim.evaluate(env, policy.eval(), episodes=episodes, seed=seed, progress=False)
    finally:
        agent.config = trained
    return {"success_rate": metrics["success_rate"], "ci95": metrics["success_ci95"]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="EXPO run directories (robosteer-steer algo=expo)")
    parser.add_argument(
        "--settings",
        nargs="+",
        type=parse_setting,
        default=[(1, 0, None), (4, 0, None), (4, 4, None), (16, 0, None)],
    )
    parser.add_argument("--which", default="latest", choices=["latest", "best"])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--results", type=Path, default=Path("runs/bench/expo_selection.jsonl"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    for run in args.runs:
        if not (run / "metrics.json").exists():
            sys.exit(f"{run}: no metrics.json, not a finished robosteer-steer run directory")
    key = ("run", "which", "n", "m", "k", "episodes")
    done = read_results(args.results, key, defaults={"k": None})
    args.results.parent.mkdir(parents=True, exist_ok=True)
    table = []
    for run in args.runs:
        env_steps = json.loads((run / "metrics.json").read_text())["env_steps"]
        row: dict = {"run": str(run), "env steps": env_steps}
        policy = None  # loaded at the first missing cell
        for n, m, heads in args.settings:
            cell = (str(run), args.which, n, m, heads, args.episodes)
            if cell not in done:
                policy = policy or load_otf(run, args.which)
                r = evaluate_setting(policy, run, n, m, heads, args.episodes, EVAL_SEED)
                done[cell] = {**dict(zip(key, cell, strict=True)), "env_steps": env_steps, **r}
                with args.results.open("a") as f:
                    f.write(json.dumps(done[cell]) + "\n")
            row[f"N={n} M={m}" + ("" if heads is None else f" K={heads}")] = done[cell]["success_rate"]
        table.append(row)
    print(
        f"\nSuccess on {args.episodes} unseen episodes (eval seed {EVAL_SEED}), {args.which} checkpoint; "
        "N=1 M=0 is the EMA base alone"
    )
    print(format_table(table))


if __name__ == "__main__":
    main()
