"""The commands on the GPU simulator (``sim=warp``, on warp's CPU device here): robosteer-eval runs the scripted
expert and a trained policy, robosteer-steer steers a frozen base (left byte-identical), and the steered run
written here is evaluated in .venv's CPU Meta-World (mujoco 3.3.0): the round trip between the environments.

Runs under ``make gpu-test`` (``.venv-gpu``); skipped in the main environment (no mujoco_warp).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mujoco_warp")

ROOT = Path(__file__).resolve().parents[3]
DP_RUN = ROOT / "tests" / "fixtures" / "runs_fa6b6cd" / "dp"  # a tiny committed DP run on push-v3
MAIN_PYTHON = ROOT / ".venv" / "bin" / "python"  # .venv: Meta-World on mujoco 3.3.0


def _run(python: Path | str, module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MUJOCO_GL": "egl"}
    quiet = "run.progress=false" if module == "steer" else "progress=false"
    cmd = [str(python), "-m", f"robosteer.scripts.{module}", *args, quiet]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def _metrics(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())


def _digest(run: Path) -> str:
    files = sorted(p for p in (run / "checkpoints").rglob("*") if p.is_file())
    return hashlib.sha256(b"".join(p.read_bytes() for p in files)).hexdigest()


def test_eval_runs_the_expert_and_a_trained_policy_on_warp(tmp_path: Path) -> None:
    p = _run(sys.executable, "evaluate", "policy=expert", "task=reach-v3", "sim=warp", "episodes=4",
             "num_envs=4", "out=expert", cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    m = _metrics(tmp_path / "expert")
    assert (m["task"], m["episodes"], m["success_rate"]) == ("reach-v3", 4, 1.0)
    assert "video" not in m  # Warp renders no frames: no video, said in the log
    p = _run(sys.executable, "evaluate", f"checkpoint={DP_RUN}", "task=push-v3", "sim=warp", "episodes=2",
             "num_envs=2", "out=dp", cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert _metrics(tmp_path / "dp")["episodes"] == 2


def test_steer_on_warp_then_evaluate_in_cpu_metaworld(tmp_path: Path) -> None:
    base = tmp_path / "base"
    shutil.copytree(DP_RUN, base)
    before = _digest(base)
    args = [f"base={base}", "task=push-v3", "sim=warp", "num_envs=8", "env_steps=160", "offline=none"]
    args += ["eval_base=false", "steerability.directions=0", "steerability.states=8", "run.warmup_chunks=4"]
    args += [
        "dsrl.hidden=[32,32]",
        "dsrl.batch_size=16",
        "dsrl.noise_critic_steps=1",
        "run.eval_every=100000",
    ]
    args += ["run.eval_episodes=2", "eval_envs=2", "out=steered"]
    p = _run(sys.executable, "steer", *args, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    m = _metrics(tmp_path / "steered")
    assert m["env_steps"] >= 160 and _digest(base) == before  # the frozen base is left as it was
    if not MAIN_PYTHON.exists():
        pytest.skip(f"{MAIN_PYTHON} is missing (make install): the CPU Meta-World half of the round trip")
    p = _run(MAIN_PYTHON, "evaluate", f"checkpoint={tmp_path / 'steered'}", "which=latest", "episodes=2",
             "video=false", "out=steered_cpu", cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    cpu = _metrics(tmp_path / "steered_cpu")
    assert (cpu["task"], cpu["episodes"], cpu["steered"]) == ("push-v3", 2, True)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["task=door-open-v3"], "task=door-open-v3 is not ported to sim=warp"),
        (["task=push-v3", "device=cuda"], "device=cuda"),  # this machine has no GPU (CI's neither)
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], words: str) -> None:
    """The other refusals need no Warp and are tested in .venv (tests/scripts/test_guards.py)."""
    p = _run(sys.executable, "evaluate", "policy=expert", "sim=warp", *args, "out=bad", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr[-2000:]
    assert words in p.stderr
    assert not (tmp_path / "bad").exists()
