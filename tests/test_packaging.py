"""``pip install <repo>`` into a fresh venv (torch's CPU wheel first, no Makefile): the console scripts run end
to end from the installed copy, configs included (slow: it installs every dependency)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_pip_install_gives_working_console_scripts(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "torch==2.13.0"], check=True, timeout=1800)  # the CPU wheel, as the README says
    subprocess.run([*pip, str(ROOT)], check=True, timeout=1800)
    env = {**os.environ, "MUJOCO_GL": "egl", "PYTHONPATH": ""}  # nothing from the checkout
    run = tmp_path / "work"  # away from the repository: only the installed copy is importable
    run.mkdir()
    commands = [
        ["robosteer-collect", "task=reach-v3", "episodes=4", "progress=false", "out=runs/demos"],
        ["robosteer-train", "dataset=runs/demos/demos.hdf5", "steps=20", "batch_size=16", "progress=false",
         "eval_episodes=2", "eval_envs=1", "eval_video_episodes=0", "out=runs/dp"],
        ["robosteer-eval", "checkpoint=runs/dp", "episodes=2", "num_envs=1", "video=false", "progress=false",
         "out=runs/eval"],
    ]  # fmt: skip
    for cmd in commands:
        p = subprocess.run([str(venv / "bin" / cmd[0]), *cmd[1:]], cwd=run, env=env, capture_output=True,
                           text=True, timeout=600)  # fmt: skip
        assert p.returncode == 0, f"{cmd[0]}: {p.stderr[-3000:]}"
    assert (run / "runs" / "eval" / "metrics.json").exists()
    origin = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import scripts.common as c; print(c.__file__, c.CONFIG_DIR)"],
        cwd=run, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert str(ROOT) not in origin and "share/robosteer/configs" in origin
