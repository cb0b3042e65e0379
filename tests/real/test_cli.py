"""robosteer-deploy and robosteer-serve end to end on the sim twin (subprocesses, loopback only)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import clirun
import h5py
import numpy as np
import pytest
from conftest import STATE_DIM, tiny_policy

from robosteer.policies.checkpoint import save_checkpoint
from robosteer.policies.data import open_dataset

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
    return clirun.run(
        [sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_deploy_a_checkpoint_on_the_twin(checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    proc = run(["robosteer.scripts.deploy", "robot=sim_twin", f"policy={checkpoint}", "task=push-v3", "episodes=2",
                "max_steps=25", "mode=async", "robot.driver.latency_ms=20", f"out={out}"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = json.loads((out / "metrics.json").read_text())
    assert m["episodes"] == 2 and m["error"] is None and 0.0 <= m["success_rate"] <= 1.0
    assert m["env_steps"] > 0 and m["wall_time_s"] > 0 and m["robot"] == "sim_twin"
    with open_dataset(out / "episodes.hdf5") as demos:
        assert demos.num_episodes == 2 and demos.obs_keys == ["state"] and demos.action_dim == 4
    with h5py.File(out / "episodes.hdf5", "r") as f:  # the rate a LeRobot export reads: the twin's 80 Hz
        assert f["data"].attrs["fps"] == pytest.approx(80.0)
    assert (out / "safety_events.jsonl").exists() and (out / "config.yaml").exists()


def test_deploy_reports_a_dead_policy_server(tmp_path: Path) -> None:
    proc = run(
        [
            "robosteer.scripts.deploy",
            "robot=sim_twin",
            "policy=ws://127.0.0.1:9",
            "task=push-v3",
            "episodes=1",
            f"out={tmp_path}",
        ]
    )
    assert proc.returncode == 1 and "cannot connect to policy server ws://127.0.0.1:9" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    m = json.loads((tmp_path / "metrics.json").read_text())  # the contract holds before any episode too
    assert "cannot connect to policy server" in m["error"] and m["episodes"] == 0


@contextlib.contextmanager
def server_lost_between_episodes(die_at_reset: int) -> Iterator[str]:
    """A policy server speaking the wire protocol (constant chunks) that drops the connection when it is
    asked for the ``die_at_reset``-th reset: the server lost between two episodes, during policy.reset()."""
    from websockets.sync.server import serve

    from robosteer.real.protocol import PROTOCOL_VERSION, decode, encode

    meta = {
        "name": "flaky", "task": "push-v3", "steered": False, "supports_prefix": False,
        "shape_meta": {"obs": {"state": {"shape": [STATE_DIM], "type": "low_dim"}}, "action": {"shape": [4]}},
        "noise_shape": [8, 4], "n_obs_steps": 2, "horizon": 8, "n_action_steps": 4, "action_dim": 4,
    }  # fmt: skip
    resets = {"n": 0}

    def handler(ws: Any) -> None:
        for raw in ws:
            msg = decode(raw)
            kind = msg["type"]
            if kind == "hello":
                ws.send(encode({"type": "hello_ok", "version": PROTOCOL_VERSION, "policy": meta}))
            elif kind == "reset":
                resets["n"] += 1
                if resets["n"] >= die_at_reset:
                    ws.close()
                    return
                ws.send(encode({"type": "reset_ok", "id": msg.get("id")}))
            elif kind == "sample":
                b = next(iter(msg["obs"].values())).shape[0]
                actions = np.zeros((b, 8, 4), np.float32)
                ws.send(encode({"type": "sample_result", "id": msg.get("id"), "actions": actions}))

    with serve(handler, "127.0.0.1", 0) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}"
        finally:
            server.shutdown()
            thread.join(5)


def test_deploy_server_lost_between_episodes_keeps_the_contract(tmp_path: Path) -> None:
    """The policy server goes away during policy.reset() before episode 2: no traceback; the arm stopped,
    episode 1 kept in episodes.hdf5, metrics.json with error, exit 1."""
    out = tmp_path / "deploy"
    with server_lost_between_episodes(die_at_reset=2) as url:
        proc = run(["robosteer.scripts.deploy", "robot=sim_twin", f"policy={url}", "task=push-v3", "episodes=3",
                    "max_steps=15", "mode=sync", f"out={out}"])  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    m = json.loads((out / "metrics.json").read_text())
    assert "policy reset failed" in m["error"] and "PolicyConnectionError" in m["error"], m["error"]
    assert m["episodes"] == 1 and m["per_episode"][0]["status"] != "error"
    with open_dataset(out / "episodes.hdf5") as demos:
        assert demos.num_episodes == 1
    assert (out / "safety_events.jsonl").exists()


@pytest.mark.slow
def test_serve_then_deploy_remotely(checkpoint: Path, tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "robosteer.scripts.serve", f"checkpoint={checkpoint}", "port=0", f"out={tmp_path / 'serve'}"],
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
            [
                "robosteer.scripts.deploy",
                "robot=sim_twin",
                f"policy={url}",
                "episodes=1",
                "max_steps=20",
                f"out={out}",
            ]
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads((out / "metrics.json").read_text())["task"] == "push-v3"  # from the handshake
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=10)


def test_safety_keys_are_plain_overrides_and_switching_safety_off_needs_an_acknowledgement(
    checkpoint: Path, tmp_path: Path
) -> None:
    common = ["robosteer.scripts.deploy", "robot=sim_twin", f"policy={checkpoint}", "task=push-v3", "episodes=1",
              "max_steps=5", "mode=sync"]  # fmt: skip
    refused = run([*common, "safety.enabled=false", f"out={tmp_path / 'refused'}"])
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "unsafe_ack=true" in refused.stderr and "Traceback" not in refused.stderr
    acked = run([*common, "safety.enabled=false", "unsafe_ack=true", f"out={tmp_path / 'acked'}"])
    assert acked.returncode == 0, acked.stderr[-2000:]
    assert "enforces no limits" in acked.stdout + acked.stderr  # on the console and in the run's log
    assert "enforces no limits" in (tmp_path / "acked" / "deploy.log").read_text()
    slow = run([*common, "safety.max_velocity=0.2", f"out={tmp_path / 'slow'}"])  # no '+' needed
    assert slow.returncode == 0, slow.stderr[-2000:]
    assert "max_velocity: 0.2" in (tmp_path / "slow" / "config.yaml").read_text()
