"""Env steps/s of sim's batched Meta-World env against raw ``mujoco.mj_step`` on the same model.

Meta-World's Python task code (reward, observation, site bookkeeping) is most of an env step's cost;
this table shows how much, per task, and what sync and async vectorisation add on this machine.
Run: ``python benchmarks/env_speed.py [--seconds 1.0]``. Prints a markdown table and appends one row per cell
(with its provenance: command, commit, machine, load) to ``--rows`` (the README's table is drawn from them).
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
from env_rates import env_steps_per_s
from results_tables import append_row

from robosteer import sim

TASKS = ("reach-v3", "push-v3", "pick-place-v3", "button-press-topdown-v3", "drawer-open-v3")


def raw_mj_steps_per_s(env: sim.BatchedEnv, seconds: float) -> tuple[float, int]:
    """mj_step calls/s on a copy of env 0's model and data, plus the env's frame_skip."""
    base = env.unwrapped_envs[0]
    model, data = base.model, copy.copy(base.data)  # MjData's copy duplicates the state arrays
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(200):
            mujoco.mj_step(model, data)
        n += 200
    return n / (time.perf_counter() - start), base.frame_skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="measuring time per cell")
    parser.add_argument("--tasks", nargs="*", default=list(TASKS))
    parser.add_argument("--vectorizations", nargs="+", default=["sync", "async"], choices=["sync", "async"])
    parser.add_argument("--num-envs", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--rows", default="docs/results/env_speed.jsonl", help="append rows here ('': don't)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs visible; mujoco {mujoco.__version__}")
    header = ["task", "mj_step/s", "= env steps/s (raw)"]
    configs = [(v, b) for v in args.vectorizations for b in args.num_envs]
    header += [f"{v} B={b}" for v, b in configs]
    rows = []
    for task in args.tasks:
        with sim.make_env(task, num_envs=1) as env:
            mj, frame_skip = raw_mj_steps_per_s(env, args.seconds)
        cell = {"task": task, "seconds": args.seconds}
        if args.rows:
            append_row(args.rows, {**cell, "cell": "mj_step", "per_s": mj, "frame_skip": frame_skip})
        row = [task, f"{mj:,.0f}", f"{mj / frame_skip:,.0f}"]
        for vectorization, num_envs in configs:
            with sim.make_env(task, num_envs=num_envs, vectorization=vectorization) as env:
                rate = env_steps_per_s(env, args.seconds)
            if args.rows:
                append_row(args.rows, {**cell, "cell": f"{vectorization} B={num_envs}", "per_s": rate})
            row.append(f"{rate:,.0f}")
        rows.append(row)
        print(f"  done {task}", flush=True)
    print("\nEnv steps/s (all envs together; random actions, auto-reset included; frame_skip=5):\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
