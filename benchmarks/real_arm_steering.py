"""DSRL-NA on the twin behaving as a real arm: judged on the arm, then scored in the simulator.

Why: a real arm has no simulator, so a run on it must be judged on its own episodes; this measures that path
where the truth is known. For each ``--runs NAME[:override,...]`` it runs ``robosteer-steer`` on the README's
weak push-v3 state base (100 demos with N(0, 0.3) action noise, a Diffusion Policy trained 3k steps) on the sim
twin in real mode (``robot.driver.real_mode=true``: no success, reward or reset of its own) at Meta-World's
80 Hz with a 50 ms round trip, the learner in a Ray worker, paid by a success classifier on the twin's corner2
camera (``--reward classifier``) or by the scripted person's verdict, the twin's hidden success (``--reward
operator``), its person scripted (``operator=scripted``: resets; add ``teleop=scripted`` for interventions). The run judges the base, its periodic actors and its final actor on blocks of the arm's
episodes; afterwards this process scores the final actor and the base on 100 unseen simulator episodes (eval seed
200000), checks the base's files are unchanged, and appends a row. A finished run is scored, not re-run; an
interrupted one resumes (``resume=true``):

    python benchmarks/real_arm_steering.py --runs plain teleop:teleop=scripted --rows docs/results/real_arm_steering.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
from results_tables import append_row, table
from steering_runs import evaluate

from robosteer.scripts.steer import lift

ROOT = Path(__file__).resolve().parents[1]
COMMON = [  # the twin as a real arm, its person scripted, the learner on Ray
    "robot=sim_twin", "robot.driver.real_mode=true", "robot.driver.latency_ms=50", "resets=operator",
    "operator=scripted", "learner=ray", "run.eval_every=10000", "run.progress=false",
]  # fmt: skip


def file_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (the base must leave a steering run byte-identical)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def steer(args: Any, run: Path, extra: list[str]) -> list[str]:
    """``robosteer-steer`` on the twin in real mode to ``--env-steps`` (resumed where a checkpoint exists)."""
    resume = ["resume=true"] if (run / "checkpoints" / "latest").is_dir() else []
    command = [
        str(ROOT / ".venv" / "bin" / "python"), "-m", "robosteer.scripts.steer", f"base={args.base}", *COMMON,
        f"robot_reward={args.reward}", *([f"classifier.data={args.classifier_data}"] if args.reward == "classifier" else []),
        f"env_steps={args.env_steps}", f"seed={args.seed}",
        f"out={run}", *extra, *resume,
    ]  # fmt: skip
    if not (run / "metrics.json").exists():
        with open(f"{run}.log", "a") as log:
            subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=True)
    return command


def training_episodes(run: Path) -> list[tuple[int, int]]:
    """(steps, intervention steps) of every training episode, in order, from the run's recordings."""
    import h5py

    found: dict[int, tuple[int, int]] = {}
    for path in sorted((run / "episodes").glob("session_*.hdf5*")):
        with h5py.File(path, "r") as f:
            for demo in f["data"].values():
                if "episode_index" in demo.attrs:
                    person = int(demo["interventions"][()].sum()) if "interventions" in demo else 0
                    found[int(demo.attrs["episode_index"])] = (len(demo["actions"]), person)
    return [found[i] for i in sorted(found)]


def intervention_curve(episodes: list[tuple[int, int]], every: int) -> list[dict[str, float]]:
    """The share of training steps a person commanded, per ``every`` training env steps."""
    steps = np.cumsum([s for s, _ in episodes])  # each episode's end, in training env steps
    out = []
    for end in range(every, int(steps[-1]) + every, every) if len(steps) else []:
        inside = [(s, p) for (s, p), at in zip(episodes, steps) if end - every < at <= end]
        total = sum(s for s, _ in inside)
        out.append({"env_steps": end, "rate": sum(p for _, p in inside) / total if total else 0.0})
    return out


def measure(args: Any, name: str, extra: list[str], base_sim: float, hashes: Path) -> dict[str, Any]:
    """One run: steered and judged on the twin in real mode (unless finished), then scored in the simulator."""
    run = args.out / name
    if not hashes.exists():
        hashes.write_text(json.dumps(file_hashes(args.base), indent=1))
    command = steer(args, run, extra)
    m = json.loads((run / "metrics.json").read_text())
    final_sim = evaluate(run, "push-v3", args.episodes, Path(f"{run}_eval_latest"), which="latest")
    base_arm = json.loads((run / "base_eval.json").read_text())
    block = m["final_block"]
    return {
        "task": "push-v3", "run": name, "overrides": extra, "seed": args.seed, "command": command,
        "arm": {  # judged on the twin in real mode by the classifier
            "base": base_arm["success_rate"], "base_episodes": base_arm["episodes"],
            "history": m["history"], "final": block["success_rate"], "final_episodes": block["episodes"],
            "final_ci95": m["success_ci95"], "best": m["best_success_rate"], "best_env_steps": m["best_env_steps"],
            **lift(base_arm["success_rate"], block["success_rate"]),
        },
        "sim": {"base": base_sim, "final": final_sim, "episodes": args.episodes, **lift(base_sim, final_sim)},
        "env_steps": m["env_steps"], "eval_env_steps": m["eval_env_steps"],
        "intervention_steps": m["intervention_steps"],
        "intervention_curve": intervention_curve(training_episodes(run), 10_000),
        "tick_late_ms_p99": m.get("robot_tick_late_ms_p99"), "held_steps": m["robot_held_steps"],
        "reward": args.reward,
        "classifier": {k: m["classifier"].get(k) for k in ("threshold", "episodes", "frames") if k in m.get("classifier", {})},
        "simulators_imported": {"steering": m["simulators_imported"],
                                "learner": (m.get("learner") or {}).get("simulators_imported")},
        "updates": m["updates"], "wall_s": m["wall_time_s"],
        "base_unchanged": file_hashes(args.base) == json.loads(hashes.read_text()),
    }  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", nargs="+", default=["plain", "teleop:teleop=scripted"])
    p.add_argument("--base", type=Path, default=ROOT / "runs" / "m65" / "weak_dp")
    p.add_argument(
        "--classifier-data", type=Path, default=ROOT / "runs" / "m65" / "classifier_data" / "demos.hdf5"
    )
    p.add_argument("--env-steps", type=int, default=60_000)
    p.add_argument(
        "--reward",
        default="classifier",
        choices=["classifier", "operator"],
        help="who judges: a success classifier on the camera, or the scripted person (the twin's truth)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "m65")
    p.add_argument("--rows", default="", help="append each run's row to this JSON-lines file ('' : none)")
    args = p.parse_args()
    base_sim = evaluate(args.base, "push-v3", args.episodes, args.out / "base_eval", which="ema")
    rows = []
    for spec in args.runs:
        name, _, extra = spec.partition(":")
        rows.append(
            measure(args, name, [e for e in extra.split(",") if e], base_sim, args.out / "base_sha256.json")
        )
        if args.rows:
            append_row(args.rows, rows[-1], rows[-1].pop("command"))
    body = [[r["run"], r["arm"]["base"], r["arm"]["final"], r["sim"]["base"], r["sim"]["final"], r["env_steps"],
             r["intervention_steps"], r["base_unchanged"]] for r in rows]  # fmt: skip
    print(
        table(
            [
                "run",
                "arm base",
                "arm final",
                "sim base",
                "sim final",
                "env steps",
                "person steps",
                "base same",
            ],
            body,
        )
    )


if __name__ == "__main__":
    main()
