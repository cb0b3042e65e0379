"""robosteer-deploy and robosteer-serve end to end on the sim twin (subprocesses, loopback only)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import tiny_policy

from policies.checkpoint import save_checkpoint
from policies.data import open_dataset

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    policy = tiny_policy()
    path = tmp_path_factory.mktemp("ckpt") / "policy"
    cfg = {
        "policy": {"name": "diffusion", "config": policy.get_config()},
        "shape_meta": policy.shape_meta,
        "task": "push-v3",
    }
    save_checkpoint(path, {"model": policy}, cfg)
    return path


def run(args: list[str], timeout: float = 120.0) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_deploy_a_checkpoint_on_the_twin(checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    proc = run(["scripts.deploy", "robot=sim_twin", f"policy={checkpoint}", "task=push-v3", "episodes=2",
                "max_steps=25", "mode=async", "robot.driver.latency_ms=20", f"out={out}"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = json.loads((out / "metrics.json").read_text())
    assert m["episodes"] == 2 and m["error"] is None and 0.0 <= m["success_rate"] <= 1.0
    assert m["env_steps"] > 0 and m["wall_time_s"] > 0 and m["robot"] == "sim_twin"
    with open_dataset(out / "episodes.hdf5") as demos:
        assert demos.num_episodes == 2 and demos.obs_keys == ["state"] and demos.action_dim == 4
    assert (out / "safety_events.jsonl").exists() and (out / "config.yaml").exists()


def test_deploy_reports_a_dead_policy_server(tmp_path: Path) -> None:
    proc = run(
        [
            "scripts.deploy",
            "robot=sim_twin",
            "policy=ws://127.0.0.1:9",
            "task=push-v3",
            "episodes=1",
            f"out={tmp_path}",
        ]
    )
    assert proc.returncode != 0 and "cannot connect to policy server ws://127.0.0.1:9" in proc.stderr


@pytest.mark.slow
def test_serve_then_deploy_remotely(checkpoint: Path, tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "scripts.serve", f"checkpoint={checkpoint}", "port=0", f"out={tmp_path / 'serve'}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        url = None
        deadline = time.time() + 60
        while url is None and time.time() < deadline:
            line = server.stdout.readline()
            found = re.search(r"on (ws://127\.0\.0\.1:\d+)", line)
            url = found.group(1) if found else None
        assert url, "server did not print its url"
        out = tmp_path / "deploy"
        proc = run(
            ["scripts.deploy", "robot=sim_twin", f"policy={url}", "episodes=1", "max_steps=20", f"out={out}"]
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads((out / "metrics.json").read_text())["task"] == "push-v3"  # from the handshake
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=10)
