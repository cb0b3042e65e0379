"""Success of a trained policy deployed to the sim twin at 0, 50 and 150 ms injected latency, sync vs async.

Why: the runtime's claim is that asynchronous execution (plan the next chunk while the current one runs,
drop stale actions, blend overlaps) keeps a policy's success when the link to the arm is slow, where
stop-and-think (sync) execution loses time and success. Each cell runs ``robosteer-deploy robot=sim_twin``
(the twin in its own process, real wall-clock latency, half each way) in a subprocess; the reference is
``robosteer-eval`` of the same checkpoint on the same task (vectorised sim, no latency, no wall clock).

Run: ``python benchmarks/deploy_latency.py --checkpoint runs/real_dp --episodes 50``. Resumable: finished
cells are kept in ``<out>/results.jsonl``. ``--rate-hz`` sets the twin's control rate (80 = Meta-World real
time); on a loaded CPU where one DDIM chunk takes tens of ms, a slower twin keeps inference below a period.
Each finished cell is also appended, with its provenance (command, commit, machine, load), to ``--rows``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from results_tables import append_row  # noqa: E402

from robosteer.scripts.common import format_table, read_results  # noqa: E402


def cell_args(args: argparse.Namespace, latency: float, mode: str, out: Path) -> list[str]:
    return [
        "robosteer.scripts.deploy",
        "robot=sim_twin",
        f"policy={args.checkpoint}",
        f"task={args.task}",
        f"episodes={args.episodes}",
        f"mode={mode}",
        f"robot.driver.latency_ms={latency}",
        f"robot.driver.rate_hz={args.rate_hz}",
        f"seed={args.seed}",
        f"blend={args.blend}",
        f"inpaint={args.inpaint}",
        "progress=false",
        f"out={out}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "runs" / "real_dp"))
    ap.add_argument("--task", default="push-v3")
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--latencies", default="0,50,150", help="injected round-trip latency, ms")
    ap.add_argument("--modes", default="sync,async")
    ap.add_argument("--rate-hz", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=100000)
    ap.add_argument(
        "--blend", type=float, default=1.0, help="async: weight of the newer of two overlapping chunks"
    )
    ap.add_argument(
        "--inpaint", choices=("true", "false"), default="true",
        help="async: condition each chunk on the actions already committed to the arm (real-time chunking)",
    )  # fmt: skip
    ap.add_argument("--parallel", type=int, default=2, help="cells run at once (each is a twin + a policy)")
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench" / "deploy_latency"))
    ap.add_argument(
        "--rows", default="docs/results/deploy_latency.jsonl", help="append rows here ('': don't)"
    )
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    key = ("latency_ms", "mode", "rate_hz", "episodes", "blend", "inpaint")
    done = read_results(results_path, key)

    ref_dir = out / "eval"
    if not (ref_dir / "metrics.json").exists():
        with (out / "eval.log").open("w") as log:
            subprocess.run(
                [sys.executable, "-m", "robosteer.scripts.evaluate", f"checkpoint={args.checkpoint}", f"task={args.task}",
                 f"episodes={args.episodes}", "video=false", "progress=false", f"out={ref_dir}"],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=True,
            )  # fmt: skip
    ref = json.loads((ref_dir / "metrics.json").read_text())

    todo = []
    for latency in [float(x) for x in args.latencies.split(",")]:
        for mode in args.modes.split(","):
            if (latency, mode, args.rate_hz, args.episodes, args.blend, args.inpaint) not in done:
                todo.append((latency, mode))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for i in range(0, len(todo), max(1, args.parallel)):
        batch = todo[i : i + args.parallel]
        procs = []
        for latency, mode in batch:
            cell = (
                out
                / f"lat{int(latency)}_{mode}_{int(args.rate_hz)}hz_blend{args.blend:g}_inpaint{args.inpaint}"
            )
            log = (out / f"{cell.name}.log").open("w")
            procs.append((latency, mode, cell, log, subprocess.Popen(
                [sys.executable, "-m", *cell_args(args, latency, mode, cell)], cwd=ROOT, env=env,
                stdout=log, stderr=subprocess.STDOUT,
            )))  # fmt: skip
        for latency, mode, cell, log, proc in procs:
            proc.wait(timeout=3600)
            log.close()
            m = json.loads((cell / "metrics.json").read_text())
            row = {
                "latency_ms": latency,
                "mode": mode,
                "rate_hz": args.rate_hz,
                "episodes": m["episodes"],
                "blend": args.blend,
                "inpaint": args.inpaint,
                "success_rate": m["success_rate"],
                "mean_steps": m["mean_steps"],
                "infer_ms": m["infer_ms_mean"],
                "stale_dropped": m["stale_dropped"],
                "held_ticks": m["held_ticks"],
                "error": m["error"],
                "load": os.getloadavg()[0],
            }
            with results_path.open("a") as f:
                f.write(json.dumps(row) + "\n")
            if args.rows:
                ckpt = Path(args.checkpoint).resolve()
                append_row(
                    args.rows,
                    {
                        **{k: v for k, v in row.items() if k != "load"},
                        "task": args.task,
                        "checkpoint": str(ckpt.relative_to(ROOT) if ckpt.is_relative_to(ROOT) else ckpt),
                        "seed": args.seed,
                        "reference_success": ref["success_rate"],
                        "reference_episodes": ref["episodes"],
                    },
                )
            done[(latency, mode, args.rate_hz, args.episodes, args.blend, args.inpaint)] = row
    rows = [
        r for k, r in sorted(done.items()) if k[2] == args.rate_hz and k[3] == args.episodes
    ]  # all blends and inpaint settings
    print(
        f"reference robosteer-eval on {args.task}: success {ref['success_rate']:.2f} over {ref['episodes']} episodes"
    )
    print(format_table(rows, ["latency_ms", "mode", "inpaint", "blend", "rate_hz", "episodes", "success_rate", "mean_steps", "infer_ms",
                              "stale_dropped", "held_ticks", "load"]))  # fmt: skip


if __name__ == "__main__":
    main()
