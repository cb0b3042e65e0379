"""Meta-World's scripted experts on every MuJoCo Warp port against CPU Meta-World: success per task, side by side.

Why: a port whose reset distribution, physics or success test is off shows first as an expert that stops
succeeding. For each task this runs ``robosteer-eval policy=expert`` twice with the same command line but
``sim=``: ``sim=warp`` in ``--warp-python`` (.venv-gpu, warp's CPU device unless ``--device cuda``; all episodes
in one batch of worlds) and ``sim=metaworld`` in this Python (.venv, CPU Meta-World on mujoco 3.3.0), and
appends one row per task with both success rates, their Wilson intervals and the gap:

    python benchmarks/warp_experts.py --episodes 100 --rows docs/results/warp_experts.jsonl

The two sims draw their initial states from the same distribution but not the same samples (sim/gpu/sawyer.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from results_tables import append_row, table

ROOT = Path(__file__).resolve().parents[1]


def expert_success(python: Path, task: str, sim: str, args: Any, out: Path) -> dict[str, Any]:
    """``robosteer-eval policy=expert`` of ``task`` on ``sim``: its metrics.json."""
    envs = args.episodes if sim == "warp" else args.cpu_envs
    command = [
        str(python), "-m", "robosteer.scripts.evaluate", "policy=expert", f"task={task}", f"sim={sim}",
        f"episodes={args.episodes}", f"num_envs={envs}", f"seed={args.seed}", "video=false", "progress=false",
        f"out={out}",
    ]  # fmt: skip
    if sim == "warp":
        command.append(f"device={args.device}")
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return json.loads((out / "metrics.json").read_text())


def main() -> None:
    from robosteer.sim.backends import WARP_TASKS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="*", default=list(WARP_TASKS), choices=list(WARP_TASKS))
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--cpu-envs", type=int, default=4, help="CPU Meta-World's parallel envs")
    p.add_argument("--seed", type=int, default=100000, help="evaluation seed (robosteer-eval's default)")
    p.add_argument("--device", default="cpu", help="warp's device: cpu or cuda")
    p.add_argument("--warp-python", type=Path, default=ROOT / ".venv-gpu" / "bin" / "python")
    p.add_argument("--rows", type=Path, default=None, help="append one row per task to this JSON-lines file")
    args = p.parse_args()
    body = []
    with tempfile.TemporaryDirectory() as tmp:
        for task in args.tasks:
            warp = expert_success(args.warp_python, task, "warp", args, Path(tmp) / f"{task}-warp")
            cpu = expert_success(Path(sys.executable), task, "metaworld", args, Path(tmp) / f"{task}-cpu")
            row = {
                "benchmark": "warp_experts",
                "task": task,
                "episodes": args.episodes,
                "seed": args.seed,
                "warp_device": args.device,
                "warp_success": warp["success_rate"],
                "warp_ci95": warp["success_ci95"],
                "metaworld_success": cpu["success_rate"],
                "metaworld_ci95": cpu["success_ci95"],
                "gap_points": round(100 * (warp["success_rate"] - cpu["success_rate"]), 1),
                "warp_mean_episode_length": warp["mean_episode_length"],
                "metaworld_mean_episode_length": cpu["mean_episode_length"],
            }
            if args.rows:
                append_row(args.rows, row)
            body.append([task, row["warp_success"], row["metaworld_success"], row["gap_points"]])
            print(
                f"{task}: warp {row['warp_success']:.2f}, metaworld {row['metaworld_success']:.2f}",
                flush=True,
            )
    print(table(["task", "sim=warp", "sim=metaworld", "gap (points)"], body))


if __name__ == "__main__":
    main()
