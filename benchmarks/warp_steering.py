"""DSRL-NA steered on MuJoCo Warp (``sim=warp``) at several ``num_envs``, each run scored in CPU Meta-World.

Why: fine-tuning on the fast backend is worth something only if the actor it yields works on the reference
one. For each ``--num-envs`` this runs ``robosteer-steer sim=warp`` (in ``--warp-python``, .venv-gpu) on the
README's weak base (push-v3: 100 demos with N(0, 0.3) action noise, a Diffusion Policy trained 3k steps,
built here by ``steering_runs.weak_base`` if absent), keeping a checkpoint every ``--keep-every`` env steps;
then this process (.venv, CPU Meta-World on mujoco 3.3.0) scores the final actor and every kept one on the
unseen episodes (eval seed 200000), checks the base's files are byte-identical, and appends a row. The
``sim=metaworld`` run it compares with is the README's (docs/results/dsrl_actor_avg_100k.jsonl, the same base
and defaults at ``num_envs=4``). An interrupted run resumes from its checkpoint (``resume=true``):

    python benchmarks/warp_steering.py --num-envs 256 64 --rows docs/results/warp_steering.jsonl

``--device cuda`` steers on a GPU (the worlds, the base and the learner).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

from results_tables import append_row, steps_k, table
from steering_runs import evaluate, unseen_history, weak_base

from robosteer.scripts.steer import lift

ROOT = Path(__file__).resolve().parents[1]
NOISE, DEMOS, BASE_STEPS = 0.3, 100, 3000  # the README's weak push-v3 base


def file_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (the base must leave a steering run byte-identical)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def steer_warp(args: Any, base: Path, demos: Path | None, num_envs: int, run: Path) -> None:
    """``robosteer-steer sim=warp`` to ``--env-steps`` (resumed where a checkpoint exists)."""
    resume = ["resume=true"] if (run / "checkpoints" / "latest").is_dir() else []
    offline = [f"offline={demos}"] if demos else []  # --base: the run's own offline data (offline=auto)
    command = [
        str(args.warp_python), "-m", "robosteer.scripts.steer", f"base={base}", "which=ema", "variant=na",
        *offline, "sim=warp", f"device={args.device}", f"num_envs={num_envs}", "eval_envs=50",
        f"env_steps={args.env_steps}", f"seed={args.seed}", "eval_base=false", "run.progress=false",
        f"run.keep_every={args.keep_every}", "run.checkpoint_every=5000", f"out={run}", *resume, *args.overrides,
    ]  # fmt: skip
    with open(f"{run}.log", "a") as log:
        subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=True)


def measure(args: Any, num_envs: int, base: Path, demos: Path | None, base_success: float) -> dict[str, Any]:
    """One ``num_envs``: steer on Warp (unless finished), then score it in CPU Meta-World; its row."""
    run = args.out / args.task / f"warp{num_envs}_s{args.seed}"
    hashes = Path(f"{run}_base_sha256.json")  # the base as it was before the run's first step
    if not hashes.exists():
        hashes.parent.mkdir(parents=True, exist_ok=True)
        hashes.write_text(json.dumps(file_hashes(base), indent=1))
    if not (run / "metrics.json").exists():
        steer_warp(args, base, demos, num_envs, run)
    metrics = json.loads((run / "metrics.json").read_text())
    final = evaluate(run, args.task, args.episodes, Path(f"{run}_eval_latest"), which="latest")
    return {
        "task": args.task, "sim": "warp", "device": args.device, "num_envs": num_envs, "seed": args.seed,
        "base": str(args.base) if args.base else {"noise": NOISE, "demos": DEMOS, "steps": BASE_STEPS},
        "base_success": base_success,
        "success_rate": final, **lift(base_success, final), "episodes": args.episodes,
        "unseen_history": unseen_history(run, args.task, args.episodes), "history": metrics["history"],
        "env_steps": metrics["env_steps"], "wall_s": metrics["wall_time_s"],
        "base_unchanged": file_hashes(base) == json.loads(hashes.read_text()), "overrides": args.overrides,
    }  # fmt: skip


def print_table(rows: list[dict[str, Any]]) -> None:
    body = [
        [r["num_envs"], f"{r['base_success']:.2f}", *(f"{h['success_rate']:.2f}" for h in r["unseen_history"]),
         f"{r['success_rate']:.2f}", f"{r['lift']:+.2f}", r["base_unchanged"]]
        for r in rows
    ]  # fmt: skip
    kept = [steps_k(h["env_steps"]) for h in rows[0]["unseen_history"]] if rows else []
    print(table(["num_envs", "base", *kept, "final", "lift", "base unchanged"], body))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="push-v3", choices=["reach-v3", "push-v3", "pick-place-v3"])
    p.add_argument("--num-envs", type=int, nargs="+", default=[256, 64])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--env-steps", type=int, default=100_000)
    p.add_argument("--keep-every", type=int, default=25_000)
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--device", default="cpu")
    p.add_argument("--base", type=Path, help="a robosteer-train run to steer instead (its own offline data)")
    p.add_argument("--warp-python", type=Path, default=ROOT / ".venv-gpu" / "bin" / "python")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "bench" / "warp")
    p.add_argument("--rows", default="", help="append each run's row to this JSON-lines file ('' : none)")
    p.add_argument("overrides", nargs="*", help="extra robosteer-steer overrides (after --)")
    args = p.parse_args()
    if args.base:
        base, demos = args.base, None
        base_success = evaluate(base, args.task, args.episodes, args.out / args.task / "base_eval")
    else:
        base, demos, base_success = weak_base(args.task, args.out, NOISE, BASE_STEPS, args.episodes, DEMOS)
    rows = []
    for n in args.num_envs:
        rows.append(measure(args, n, base, demos, base_success))
        if args.rows:
            append_row(args.rows, rows[-1])
    print_table(rows)


if __name__ == "__main__":
    main()
