"""Where a DSRL run's late decline lives: its kept checkpoints' actors, acting with their mean latent and sampling.

Evaluation, ``best``, the checkpoint and deployment act with the actor's *mean* latent (``deterministic``); the actor
loss optimises the *sampled* policy, E_{w~π(s)}[Q^W(s, w)] + α·H(π(s)), and never the mean itself. This scores
every checkpoint a run of ``dsrl_steering.py --unseen-every N`` kept both ways on the same unseen episodes (eval
seed 200000; the mean-latent scores are the run's own ``unseen_history``, reused), so a decline shows as one
of the two: the sampled policy falling (what the loss sees) or only its mean drifting (what the loss cannot see).
Beside them, the critic's view: the last kept checkpoint's Q^A (min over its heads) of every kept actor's
mean-latent chunk, averaged over ``--states`` states of its replay, so one critic rates them all on the same
states: flat values under falling success mean the critic cannot tell the actors apart. One row per run
(``--rows``), with the run's benchmark overrides from ``<out>/results.jsonl``.

    python experiments/dsrl_kept.py runs/bench/pp_cos/pick-place-v3/dsrl_na_s2 --rows docs/results/dsrl_kept.jsonl
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # the shared benchmark libraries

from kept_runs import benchmark_row, kept_or_exit, row_head
from results_tables import append_row
from steering_runs import kept_checkpoints, unseen_history

from robosteer.scripts.common import format_table


def critic_view(run: Path, states: int, seed: int = 0) -> list[float]:
    """The last kept checkpoint's Q^A of each kept actor's mean-latent chunk, mean over ``states`` replay states."""
    import torch

    from robosteer.policies.checkpoint import load_checkpoint
    from robosteer.policies.steering.dsrl import load_steered_policy

    kept = kept_checkpoints(run)
    judge = load_steered_policy(str(kept[-1])).agent
    replay = load_checkpoint(kept[-1], ["buffer"]).modules["buffer"]
    rows = torch.randperm(int(replay["size"]), generator=torch.Generator().manual_seed(seed))[:states]
    obs = {k: replay[f"data/obs/{k}"][rows] for k in judge.obs_keys}  # {key: (S, To, ...)}
    values = []
    with torch.no_grad():
        for ck in kept:
            actor = judge if ck == kept[-1] else load_steered_policy(str(ck)).agent  # the judge's own too
            latent, _ = actor.acting_actor(actor.features(obs), deterministic=True)  # (S, latent_dim)
            chunk = judge.decode(obs, latent).flatten(1)  # (S, Ta·Da)
            q = judge.critic.reduce(judge.critic(judge.critic_features(obs), chunk), "min")  # (S,)
            values.append(round(q.mean().item(), 3))
    return values


def kept_both_ways(run: Path, episodes: int, states: int = 256) -> dict:
    """One row: each kept checkpoint's success with its mean latent and with sampled latents, and the last
    kept critic's value of its mean latent."""
    bench = benchmark_row(run)
    task = bench["task"]
    kept_or_exit(run)
    mean = unseen_history(run, task, episodes)
    sampled = unseen_history(run, task, episodes, deterministic=False)
    values = critic_view(run, states) if states > 0 else [None] * len(mean)
    return {
        **row_head(bench, episodes),
        "states": states,
        "kept": [
            {"env_steps": m["env_steps"], "mean_latent": m["success_rate"], "sampled": s["success_rate"]}
            | ({"last_critic_q": q} if q is not None else {})
            for m, s, q in zip(mean, sampled, values, strict=True)
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="DSRL run directories of dsrl_steering.py")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument(
        "--states", type=int, default=256, help="replay states the last critic rates the actors on (0: skip)"
    )
    parser.add_argument("--rows", help="append each run's row (with its provenance) to this JSON-lines file")
    args = parser.parse_args()
    table = []
    for run in args.runs:
        row = kept_both_ways(run.resolve(), args.episodes, args.states)
        if args.rows:
            append_row(args.rows, row)
        for k in row["kept"]:
            table.append({"run": run.name, "task": row["task"], **k})
    print(format_table(table))


if __name__ == "__main__":
    main()
