"""robosteer-steer and robosteer-eval with ``sim=isaaclab``, end to end against the Isaac Lab stand-in
(tests/fixtures/isaaclab_fake on PYTHONPATH): the commands' whole path (guards, env builder, the app started
once per process before the task registry is imported, the scratch actor sized from the Isaac env, a
checkpoint evaluated again on Isaac). Without Isaac the same commands are refused in one line
(tests/scripts/test_guards.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import clirun

REPO = Path(__file__).resolve().parents[2]
FAKE = REPO / "tests" / "fixtures" / "isaaclab_fake"
ENV = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{FAKE}", "OMP_NUM_THREADS": "1"}
TASK = "Isaac-Reach-Point-Fake-v0"  # a point mass reaching the origin in 10 steps (isaaclab_tasks/point.py)


def _command(module: str, *args: str) -> dict:
    out = next(a.split("=", 1)[1] for a in args if a.startswith("out="))
    proc = clirun.run(
        [sys.executable, "-m", f"robosteer.scripts.{module}", *args], env=ENV, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((Path(out) / "metrics.json").read_text())


def test_steer_and_eval_run_on_isaac_lab(tmp_path: Path) -> None:
    run = tmp_path / "steer"
    steered = _command(
        "steer",
        *("base=scratch", "variant=sac", "sim=isaaclab", f"task={TASK}", "num_envs=4", "env_steps=400"),
        *("eval_envs=2", "run.eval_episodes=4", "run.eval_every=200", "run.progress=false", f"out={run}"),
    )
    assert steered["task"] == TASK and steered["env_steps"] >= 400
    assert [h["env_steps"] for h in steered["history"]][:1] == [0] and len(steered["history"]) >= 3
    assert (run / "checkpoints" / "latest").is_dir()
    scored = _command(
        "evaluate",
        *(f"checkpoint={run}", "which=latest", "sim=isaaclab", f"task={TASK}", "episodes=6", "num_envs=2"),
        *("progress=false", f"out={tmp_path / 'eval'}"),
    )
    assert scored["episodes"] == 6 and scored["steered"] is True
    # the stand-in's episodes (no success: 10 steps each), not Meta-World's
    assert scored["lengths"] == [10] * 6
    assert all(r < 0 for r in scored["returns"])  # minus the distance to the origin, summed
