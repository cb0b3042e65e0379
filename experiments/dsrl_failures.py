"""How a DSRL run's kept actors fail on the unseen episodes: never grasping the object, or losing it after.

A late decline (pick-place-v3: kept actors at 0.9 and more, then falling) is a count of failed episodes; this
says which failures grow. Every checkpoint a run of ``dsrl_steering.py --unseen-every N`` kept acts with its
mean latent on the same unseen episodes as the final figure (eval seed 200000), and each failed episode is
split by Meta-World's per-step ``grasp_success`` flag: never set in the episode (the gripper never closed on the
object) or set at least once (grasped, then dropped it or never brought it to the goal); of the first, those
whose hand did reach the object (Meta-World's ``near_object``: the fingertips within reach of it) missed the
grasp itself rather than the approach. Beside them, what the critics learn from: each actor's mean shaped return
per episode (the run's ``run.reward=shaped`` cost, summed over the episode's chunks) and its successes' mean
length, so a decline that the reward itself prefers (faster successes bought with more failures, failures that
earn reward) shows. And where the failures are: each actor's success on the quarter of the episodes whose object
starts nearest the robot (lowest y of Meta-World's object position, state[4:7], right below the hand's start)
and on the rest. One row per run (``--rows``), with the run's benchmark overrides.

    python experiments/dsrl_failures.py runs/bench/pp_cos/pick-place-v3/dsrl_na_s2 --rows docs/results/dsrl_failures.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # the shared benchmark libraries

from kept_runs import benchmark_row, kept_or_exit, row_head
from results_tables import append_row
from steering_runs import evaluate_in_process, kept_steps

from robosteer.policies.rl.offline import shaped_chunk_reward
from robosteer.scripts.common import format_table

GRASP = "grasp_success"  # Meta-World v3's per-step flag: the object is held between the fingers
NEAR = "near_object"  # Meta-World v3's per-step flag: the hand is at the object
OBJECT = slice(4, 7)  # Meta-World v3's state: the object's position (x, y, z)


def failures(successes: list[bool], grasped: list[float], reached: list[float]) -> dict[str, int]:
    """Failed episodes, split by whether the object was ever grasped in them; of those never grasped, how
    many reached the object."""
    failed = [(g, n) for s, g, n in zip(successes, grasped, reached, strict=True) if not s]
    never = [n for g, n in failed if g < 0.5]
    return {
        "failures": len(failed),
        "never_grasped": len(never),
        "never_grasped_reached": sum(n >= 0.5 for n in never),
        "grasped": len(failed) - len(never),
    }


def reward_view(m: dict, chunk: int, scale: float) -> dict[str, float | None]:
    """The shaped return per episode the critics learn from (Σ over chunks of Σ_t (r_t/scale − 1)/Ta, i.e.
    shaped_chunk_reward of the episode's return and length), averaged over episodes, and the successes' mean
    length in env steps (None without a success)."""
    returns, lengths = np.asarray(m["returns"], float), np.asarray(m["lengths"], float)
    won = np.asarray(m["successes"], bool)
    return {
        "shaped_return": round(float(shaped_chunk_reward(returns, lengths, chunk, scale).mean()), 3),
        "success_length": round(float(lengths[won].mean()), 1) if won.any() else None,
    }


def chunk_and_scale(run: Path) -> tuple[int, float]:
    """(Ta, reward_scale) of a run: its executed rows per chunk (the checkpoint's exec_slice) and its reward's
    scale (its config.yaml), as the run shaped its reward."""
    import yaml

    start, stop = json.loads((run / "checkpoints" / "latest" / "config.json").read_text())["exec_slice"]
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    return stop - start, float(cfg["run"]["reward_scale"])


def object_starts(task: str, seeds: list[int]) -> np.ndarray:
    """(N, 3): where the object starts in the episodes of these seeds (each env reset with its episode's seed,
    as ``sim.evaluate`` starts every episode)."""
    from robosteer import sim

    starts = []
    with sim.make_env(task, num_envs=1) as env:
        for seed in seeds:
            state = env.reset(seed=[int(seed)])["state"]  # (1, 39) or (1, To, 39)
            starts.append(state.reshape(-1, state.shape[-1])[-1, OBJECT])
    return np.stack(starts)


def by_place(successes: list[bool], near: np.ndarray) -> dict[str, float]:
    """Success on the ``near`` episodes (the object nearest the robot) and on the others."""
    won = np.asarray(successes, bool)
    return {"near_success": float(won[near].mean()), "rest_success": float(won[~near].mean())}


def kept_failures(run: Path, episodes: int) -> dict:
    """One row: every kept actor's success and its failures split by grasp, on the same unseen episodes."""
    from robosteer.policies.steering.dsrl import load_steered_policy

    bench = benchmark_row(run)
    task = bench["task"]
    points = []
    chunk, scale = chunk_and_scale(run)
    near = None
    for ck in kept_or_exit(run):
        out = Path(f"{run}_eval_failures/{ck.name}")
        metrics = out / "metrics.json"
        m = json.loads(metrics.read_text()) if metrics.exists() else {"episode_max": {}}
        if NEAR not in m["episode_max"]:  # not scored yet, or scored before the approach was recorded
            metrics.unlink(missing_ok=True)
            policy = load_steered_policy(str(ck))
            evaluate_in_process(policy, task, episodes, out, "latest", episode_max=(GRASP, NEAR))
            m = json.loads(metrics.read_text())
        split = failures(m["successes"], m["episode_max"][GRASP], m["episode_max"][NEAR])
        view = reward_view(m, chunk, scale)
        if near is None:  # every kept actor plays the same episodes: where their objects start, once
            y = object_starts(task, m["episode_seeds"])[:, 1]
            near = y <= np.quantile(y, 0.25)
        place = by_place(m["successes"], near)
        points.append(
            {"env_steps": kept_steps(ck), "success_rate": m["success_rate"], **split, **view, **place}
        )
    return {
        **row_head(bench, episodes),
        "near_episodes": int(near.sum()) if near is not None else 0,
        "kept": points,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="DSRL run directories of dsrl_steering.py")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--rows", help="append each run's row (with its provenance) to this JSON-lines file")
    args = parser.parse_args()
    table = []
    for run in args.runs:
        row = kept_failures(run.resolve(), args.episodes)
        if args.rows:
            append_row(args.rows, row)
        table += [{"run": run.parent.parent.name + "/" + run.name, **k} for k in row["kept"]]
    print(format_table(table))


if __name__ == "__main__":
    main()
