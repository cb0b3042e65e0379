"""DSRL-NA's steering loop, env steps/s and updates/s, at several batch sizes on CPU Meta-World and on MuJoCo Warp.

Why: ``sim=warp`` exists to feed the steering loop many envs at once. Whether that pays depends on what the
loop spends its time on: acting and stepping (what a GPU sim batches) or gradient updates (``utd`` per
transition, whatever the sim). Each cell runs the real loop (``run_dsrl``, the device-resident path on Warp)
on a frozen base twice in one process: a warm-up pass (kernel loading and compilation, discarded), then
``--warmup`` vector steps of acting only (warm-up chunks: base decode + env step + replay) followed by
``--steps`` vector steps with updates at ``--utd``, each phase clocked where it happens (the acting phase ends
at the first gradient step). No evaluation, one small save. Each sim runs in its own environment (Meta-World: ``--metaworld-python``,
mujoco 3.3.0; Warp: ``--warp-python``, .venv-gpu), so one command compares them side by side:

    python benchmarks/steering_throughput.py --num-envs 4 64 256 --rows docs/results/steering_throughput.jsonl

``--device cuda`` puts Warp's worlds and the learner on a GPU (Meta-World stays on the CPU, its learner too).
A stage for a GPU machine: ``--sims warp --device cuda --num-envs 64 256 1024`` (about 3 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from results_tables import append_row, table  # noqa: E402

BASE = ROOT / "tests" / "fixtures" / "runs_fa6b6cd" / "dp"  # a tiny committed DP run on push-v3
PYTHONS = {"metaworld": ROOT / ".venv" / "bin" / "python", "warp": ROOT / ".venv-gpu" / "bin" / "python"}


def loop_seconds(
    base: Any, env: Any, vector_steps: int, warmup: int, utd: float, device: str
) -> dict[str, Any]:
    """One ``run_dsrl`` of ``warmup`` acting-only vector steps then ``vector_steps`` learning ones, clocked in
    place: the acting phase ends at the first gradient step; the learning phase runs from there to the end."""
    import torch

    from robosteer.policies.steering.dsrl import DSRL, DSRLConfig, run_dsrl
    from robosteer.policies.steering.loop import OnlineRunConfig

    to, ta, b = base.config.n_obs_steps, base.config.n_action_steps, env.num_envs
    torch.manual_seed(0)
    learner = DSRL(
        base, obs_dim=to * 39, exec_slice=slice(to - 1, to - 1 + ta), config=DSRLConfig(), device=device
    )
    cfg = OnlineRunConfig(
        env_steps=(warmup + vector_steps) * b * ta, warmup_chunks=warmup * b, utd=utd, eval_every=0,
        checkpoint_every=10**9, log_every=10**9, progress=False, buffer_size=(warmup + vector_steps + 1) * b,
        device=device,
    )  # fmt: skip
    clock = {"learn_at": None, "steps": 0, "steps_at_learn": 0}
    learn, step = learner.learn, env.step

    def timed_learn(*args: Any, **kwargs: Any) -> Any:
        if clock["learn_at"] is None:
            clock["learn_at"], clock["steps_at_learn"] = time.perf_counter(), clock["steps"]
        return learn(*args, **kwargs)

    def counted_step(action: Any) -> Any:
        out = step(action)
        clock["steps"] += int(out[4]["steps_executed"].sum())
        return out

    learner.learn, env.step = timed_learn, counted_step
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        m = run_dsrl(learner, env, cfg, out)
    end, learn_at = time.perf_counter(), clock["learn_at"]
    if learn_at is None:
        raise SystemExit(f"no gradient step in {vector_steps} learning vector steps: raise --steps or --utd")
    acting = clock["steps_at_learn"] / (learn_at - start)  # reset, warm-up chunks, replay
    learning = (clock["steps"] - clock["steps_at_learn"]) / (end - learn_at)  # + updates and one small save
    return {"acting": acting, "learning": learning, "updates_per_s": m["updates"] / (end - learn_at)}


def cell(sim_name: str, num_envs: int, args: argparse.Namespace) -> dict[str, Any]:
    """This environment's cell: acting-only and learning rates of the loop at ``num_envs`` envs."""
    import torch

    from robosteer import sim
    from robosteer.policies import load_policy
    from robosteer.scripts.common import env_backend

    torch.set_num_threads(args.threads)
    device = args.device if sim_name == "warp" else "cpu"
    base = load_policy(args.base, which="ema", device=device)
    backend = env_backend({"sim": sim_name}, device, output="torch")  # the commands' sim= and device=
    chunk, history = base.config.n_action_steps, base.config.n_obs_steps

    def run(warmup: int, steps: int) -> dict[str, Any]:
        with sim.make_env(args.task, num_envs=num_envs, seed=0, action_chunk=chunk, obs_history=history,
                          **backend) as env:  # fmt: skip
            return loop_seconds(base, env, steps, warmup, args.utd, device)

    run(1, 1)  # kernel loading and compilation, caches: discarded
    clocked = run(args.warmup, args.steps)
    return {
        "sim": sim_name,
        "num_envs": num_envs,
        "device": device,
        "utd": args.utd,
        "acting_env_steps_per_s": clocked["acting"],
        "learning_env_steps_per_s": clocked["learning"],
        "updates_per_s": clocked["updates_per_s"],
        "vector_steps": [args.warmup, args.steps],
        "task": args.task,
        "base": str(Path(args.base).relative_to(ROOT)) if Path(args.base).is_relative_to(ROOT) else args.base,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", nargs="+", default=["metaworld", "warp"], choices=list(PYTHONS))
    ap.add_argument("--num-envs", nargs="+", type=int, default=[4, 64, 256])
    ap.add_argument("--task", default="push-v3")
    ap.add_argument(
        "--base", default=str(BASE), help="a robosteer-train run (default: the tiny test fixture)"
    )
    ap.add_argument("--warmup", type=int, default=4, help="acting-only vector steps")
    ap.add_argument("--steps", type=int, default=4, help="learning vector steps after them")
    ap.add_argument(
        "--utd", type=float, default=2.0, help="updates per transition (robosteer-steer's default)"
    )
    ap.add_argument(
        "--device", default="cpu", help="Warp's worlds and its learner: cpu (warp's CPU device) | cuda"
    )
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--metaworld-python", default=str(PYTHONS["metaworld"]))
    ap.add_argument("--warp-python", default=str(PYTHONS["warp"]))
    ap.add_argument("--rows", help="append each cell's row (with its provenance) to this JSON-lines file")
    ap.add_argument(
        "--cell", nargs=2, metavar=("SIM", "NUM_ENVS"), help=argparse.SUPPRESS
    )  # a child's own cell
    args = ap.parse_args()
    if args.cell:
        print(json.dumps(cell(args.cell[0], int(args.cell[1]), args)))
        return
    rows = []
    for sim_name in args.sims:
        python = args.metaworld_python if sim_name == "metaworld" else args.warp_python
        for n in args.num_envs:
            own = [
                f"--{k}={getattr(args, k)}"
                for k in ("task", "base", "warmup", "steps", "utd", "device", "threads")
            ]
            cmd = [python, __file__, *own, "--cell", sim_name, str(n)]
            env = {**os.environ, "PYTHONPATH": str(ROOT), "MUJOCO_GL": "egl"}
            start = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
            if p.returncode != 0:
                raise SystemExit(f"{sim_name} at {n} envs failed ({python}):\n{p.stderr[-2000:]}")
            row = json.loads(p.stdout.strip().splitlines()[-1]) | {"cell_wall_s": time.perf_counter() - start}
            rows.append(append_row(args.rows, row) if args.rows else row)
            print(f"{sim_name} x {n}: {row['learning_env_steps_per_s']:.1f} env steps/s learning", flush=True)
    body = [
        [r["sim"], r["num_envs"], r["device"], f"{r['acting_env_steps_per_s']:,.0f}",
         f"{r['learning_env_steps_per_s']:,.1f}", f"{r['updates_per_s']:,.1f}"]
        for r in rows
    ]  # fmt: skip
    columns = ["sim", "envs", "device", "env steps/s, acting only", "env steps/s, learning", "updates/s"]
    print(table(columns, body))


if __name__ == "__main__":
    main()
