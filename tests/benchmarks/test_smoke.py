"""Every benchmark that draws a table a user reads runs end to end on a tiny budget and writes no rows, so none
rots unseen (a moved attribute broke inference_latency and lerobot_compare once, found only when re-run).

Each runs in its own process, as a user runs it (``python benchmarks/NAME.py ... --rows ''``); the rows files
under docs/results/ are checked unchanged afterwards. The table it would fill is the docs' (the figures there
are measured with the full budgets in each script's docstring).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {
    **os.environ,
    "PYTHONPATH": str(ROOT),
    "OMP_NUM_THREADS": "1",
    "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
}
DP_RUN = ROOT / "tests" / "fixtures" / "runs_fa6b6cd" / "dp"  # a tiny committed DP run on push-v3


def run(*args: str, cwd: Path = ROOT, timeout: float = 120) -> str:
    p = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout
    )
    assert p.returncode == 0, (
        f"{' '.join(args)} exited {p.returncode}:\n{p.stdout[-1500:]}\n{p.stderr[-3000:]}"
    )
    return p.stdout


def rows_digest() -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (ROOT / "docs" / "results").iterdir()}


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two push-v3 demos from collect_quality's own run (its smoke test), kept for the other benchmarks."""
    before = rows_digest()
    out = tmp_path_factory.mktemp("collect")
    table = run(
        "benchmarks/collect_quality.py",
        "--episodes",
        "2",
        "--tasks",
        "push-v3",
        "--out",
        str(out),
        "--rows",
        "",
    )
    assert "| push-v3 | 2 |" in table
    assert rows_digest() == before
    return next(out.rglob("demos.hdf5"))


@pytest.fixture(autouse=True)
def no_rows_written():
    before = rows_digest()
    yield
    assert rows_digest() == before, "a smoke run wrote rows under docs/results/"


def test_collect_quality(demos: Path) -> None:
    assert demos.is_file()


def test_env_speed() -> None:
    args = ["--seconds", "0.05", "--tasks", "push-v3", "--vectorizations", "sync", "--num-envs", "1"]
    out = run("benchmarks/env_speed.py", *args, "--rows", "")
    assert "push-v3" in out


def test_render_speed() -> None:
    out = run("benchmarks/render_speed.py", "--seconds", "0.05", "--sizes", "84", "--rows", "")
    assert "|" in out


def test_inference_latency(demos: Path) -> None:
    args = ["--dataset", str(demos), "--reps", "5", "--budget", "0.05", "--methods", "SDP (refill)", "flow-1"]
    out = run("benchmarks/inference_latency.py", *args, "--rows", "")
    assert "| SDP (refill) | 5 |" in out and "| flow-1 | 1 |" in out


def test_server_latency() -> None:
    out = run(
        "benchmarks/server_latency.py",
        "--checkpoint",
        str(DP_RUN),
        "--requests",
        "5",
        "--warmup",
        "1",
        "--rows",
        "",
    )
    assert "| client round trip (loopback) |" in out


def test_train_precision(demos: Path, tmp_path: Path) -> None:
    args = ["--dataset", str(demos), "--steps", "2", "--batch-size", "8", "--settings", "fp32 eager"]
    args += ["--out", str(tmp_path)]
    out = run("benchmarks/train_precision.py", *args, "--rows", "")
    assert "| fp32 eager | cpu | 2 |" in out


def test_lerobot_compare_our_side(demos: Path, tmp_path: Path) -> None:
    """Our side of the comparison (LeRobot's needs its own venv: benchmarks/README.md)."""
    args = ["--side", "ours", "--result", str(tmp_path / "ours.json"), "--batches", str(tmp_path / "b.npz")]
    args += ["--dataset", str(demos), "--down-dims", "8", "16", "--step-embed-dim", "8", "--batch-size", "4"]
    run("benchmarks/lerobot_compare.py", *args, "--warmup", "1", "--steps", "2", "--reps", "5")
    assert (tmp_path / "ours.json").is_file()
