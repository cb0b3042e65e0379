"""An MT10 generalist, plain and with V-GPS, evaluated on MuJoCo Warp and on CPU Meta-World, same checkpoint.

Why: V-GPS's generalists are multi-task, and a user who evaluates (or steers) them on the fast backend needs to
know the per-task figures carry over. This builds the data, the generalist and the critic as
``benchmarks/vgps.py`` does (its functions: per task ``--demos`` clean and ``--noisy`` noisy episodes, one
``--policy`` generalist on all 20 files, one Cal-QL critic), then runs ``robosteer-eval`` of that one
checkpoint on every MT10 task twice with the same command line but ``sim=``: ``sim=warp`` in
``--warp-python`` (.venv-gpu, all episodes as one batch of worlds) and ``sim=metaworld`` in this Python
(.venv, 4 envs), once plain (K = 1) and once with V-GPS (``steer=vgps samples=K``), eval seed 200000.
One row per task and K:

    python benchmarks/warp_mt10.py --rows docs/results/warp_mt10.jsonl

The two sims draw initial states from the same distribution, not the same samples (sim/gpu/sawyer.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from results_tables import append_row, table
from vgps import EVAL_SEED, MT10, collect, train_critic, train_generalist

ROOT = Path(__file__).resolve().parents[1]


def evaluate(python: Path, gen: Path, critic: Path, task: str, sim: str, k: int, args: Any) -> dict[str, Any]:
    """``robosteer-eval`` of the generalist on ``task`` in ``sim`` (V-GPS with K samples when k > 1)."""
    run = args.out / "evals" / f"{gen.name}_{task}_{sim}_k{k}_ep{args.episodes}"
    if not (run / "metrics.json").exists():
        envs = args.episodes if sim == "warp" else 4
        steer = ["steer=vgps", f"critic={critic}", f"samples={k}", f"replan_every={args.replan_every}"]
        command = [
            str(python), "-m", "robosteer.scripts.evaluate", f"checkpoint={gen}", "which=ema", f"task={task}",
            f"sim={sim}", f"episodes={args.episodes}", f"num_envs={envs}", f"seed={EVAL_SEED}",
            *(steer if k > 1 else []), "video=false", "progress=false", "overwrite=true", f"out={run}",
        ]  # fmt: skip
        run.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{run}.log", "w") as log:
            subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=True)
    return json.loads((run / "metrics.json").read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--policy", default="diffusion", choices=["diffusion", "flow", "streaming"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--demos", type=int, default=30, help="clean expert demos per task")
    p.add_argument("--noisy", type=int, default=30, help="noisy, partly failing episodes per task")
    p.add_argument("--noise", type=float, default=0.3)
    p.add_argument("--segment-prob", type=float, default=0.02)
    p.add_argument("--train-steps", type=int, default=5000)
    p.add_argument("--critic-steps", type=int, default=5000)
    p.add_argument("--samples", type=int, default=16, help="V-GPS's K")
    p.add_argument("--replan-every", type=int, default=4)
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--warp-python", type=Path, default=ROOT / ".venv-gpu" / "bin" / "python")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "bench" / "warp_mt10")
    p.add_argument(
        "--rows", type=Path, default=None, help="append one row per task and K to this JSON-lines file"
    )
    args = p.parse_args()
    args.algo, args.score = "calql", "first"  # vgps.train_critic's settings (its defaults)
    files = [f for task in MT10 for f in collect(task, args.out, args)]
    gen = train_generalist(args.policy, args.seed, files, args.out, args)
    critic = train_critic(files, args.out, args)
    body = []
    for task in MT10:
        for k in (1, args.samples):
            warp = evaluate(args.warp_python, gen, critic, task, "warp", k, args)
            cpu = evaluate(Path(sys.executable), gen, critic, task, "metaworld", k, args)
            row = {
                "benchmark": "warp_mt10", "task": task, "policy": args.policy, "seed": args.seed,
                "samples": k, "replan_every": args.replan_every if k > 1 else None, "episodes": args.episodes,
                "train_steps": args.train_steps, "critic_steps": args.critic_steps, "demos": args.demos,
                "noisy": args.noisy, "checkpoint": str(gen.relative_to(ROOT)) if gen.is_relative_to(ROOT) else str(gen),
                "warp_success": warp["success_rate"], "warp_ci95": warp["success_ci95"],
                "metaworld_success": cpu["success_rate"], "metaworld_ci95": cpu["success_ci95"],
            }  # fmt: skip
            if args.rows:
                append_row(args.rows, row)
            body.append([task, k, row["warp_success"], row["metaworld_success"]])
            print(
                f"{task} K={k}: warp {row['warp_success']:.2f}, metaworld {row['metaworld_success']:.2f}",
                flush=True,
            )
    print(table(["task", "K", "sim=warp", "sim=metaworld"], body))


if __name__ == "__main__":
    main()
