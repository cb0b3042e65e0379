"""robosteer-eval: replay proves exact regeneration; the expert runs through the vectorised harness."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import clirun
import pytest

from robosteer.policies import make_policy
from robosteer.scripts.collect import collect
from robosteer.scripts.evaluate import obs_mode, replay_dataset, set_sample_levels

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    return clirun.run(
        [sys.executable, "-m", "robosteer.scripts.evaluate", "progress=false", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_replay_regenerates_the_dataset_exactly(tmp_path):
    from robosteer.scripts.cli import _compose

    cfg = _compose("collect", [])  # the CLI's composition (the obs= group sets obs_keys)
    cfg.task, cfg.episodes, cfg.progress, cfg.action_noise_std = "push-v3", 3, False, 0.2
    m = collect(cfg, tmp_path)
    r = replay_dataset(m["dataset"], None, progress=False)
    assert r["episodes"] == 3 and r["success_rate"] == 1.0
    assert r["max_obs_abs_diff"] == 0.0  # bit for bit, noise included


@pytest.mark.parametrize("suite", ["real", "lerobot"])
def test_replay_of_episodes_recorded_elsewhere_is_refused_naming_where(tmp_path, suite):
    """A robot's recording or a converted LeRobot dataset records its simulator (``env_kwargs.suite``): its
    seeds mean nothing to Meta-World, so replaying it is refused before any env is built."""
    import numpy as np

    from robosteer.policies.data import DatasetWriter
    from robosteer.scripts.common import UsageError

    path = tmp_path / "demos.hdf5"
    with DatasetWriter(path, {"env_name": "push-v3", "env_kwargs": {"suite": suite}}) as w:
        n = 5
        w.add_episode({"state": np.zeros((n, 39), np.float32)}, np.zeros((n, 4), np.float32),
                      np.zeros(n, np.float32), np.r_[np.zeros(n - 1), 1].astype(bool))  # fmt: skip
    with pytest.raises(UsageError, match=f"recorded in '{suite}' .*re-runs only Meta-World's"):
        replay_dataset(str(path), None, progress=False)


def test_expert_cli_writes_metrics_and_video(tmp_path):
    res = _run(
        "policy=expert", "task=reach-v3", "episodes=4", "num_envs=2", "video_episodes=1", f"out={tmp_path}"
    )
    assert res.returncode == 0, res.stderr[-2000:]
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["episodes"] == 4 and m["success_rate"] >= 0.75
    lo, hi = m["success_ci95"]
    assert 0.0 <= lo <= m["success_rate"] <= hi <= 1.0
    assert (tmp_path / "videos").is_dir() and any((tmp_path / "videos").glob("*.mp4"))


def test_bad_policy_and_missing_arguments_are_clear(tmp_path):
    res = _run("policy=replay", f"out={tmp_path / 'a'}")
    assert res.returncode != 0 and "dataset=" in res.stderr
    res = _run(f"out={tmp_path / 'b'}")  # policy=checkpoint without checkpoint=
    assert res.returncode != 0 and "checkpoint=" in res.stderr
    res = _run("checkpoint=tests/fixtures/runs_fa6b6cd/dp", "device=tpu", f"out={tmp_path / 'c'}")
    assert res.returncode == 2 and "device=tpu is not known" in res.stderr and not (tmp_path / "c").exists()
    assert "Traceback (most recent call last)" not in res.stderr


def test_obs_mode_from_shape_meta():
    state = {"obs": {"state": {"shape": [39]}}, "action": {"shape": [4]}}
    both = {
        "obs": {"state": {"shape": [39]}, "image/corner2": {"shape": [96, 96, 3]}},
        "action": {"shape": [4]},
    }
    assert obs_mode(state) == ("state", ("corner2",), 84)
    assert obs_mode(both) == ("state+image", ("corner2",), 96)


def test_sample_levels_override_is_for_streaming_checkpoints_only():
    meta = {"obs": {"state": {"shape": [39]}}, "action": {"shape": [4]}}
    with pytest.raises(ValueError, match=r"applies to streaming .*runs/dp is 'diffusion'"):
        set_sample_levels(make_policy("diffusion", meta), "constant", "runs/dp")
    sdp = make_policy("streaming", meta)
    with pytest.raises(
        ValueError, match=r"sample_levels must be one of .*'const'; nearest valid choice: 'constant'"
    ):
        set_sample_levels(sdp, "const", "runs/sdp")
    set_sample_levels(sdp, "constant", "runs/sdp")
    assert sdp.config.sample_levels == "constant"


FIXTURE = ROOT / "tests" / "fixtures" / "runs_fa6b6cd"  # a DP base and a DSRL run on it (test_run_fixtures)
SHORT = ("task=push-v3", "episodes=2", "num_envs=2", "video=false", "max_episode_steps=40", "which=latest")


@pytest.mark.parametrize("protocol", ["robosteer", "openpi"])
def test_a_served_policy_is_evaluated_as_the_local_run_is(tmp_path, protocol):
    from robosteer.real.server import PolicyServer, load_backend

    run = FIXTURE / "dsrl"
    server = PolicyServer(load_backend(run, which="latest"), port=0, protocol=protocol).start()
    try:
        served = _run(f"checkpoint={server.url}", f"protocol={protocol}", *SHORT, f"out={tmp_path / 's'}")
    finally:
        server.stop()
    local = _run(f"checkpoint={run}", *SHORT, f"out={tmp_path / 'l'}")
    assert served.returncode == 0, served.stderr[-2000:]
    assert local.returncode == 0, local.stderr[-2000:]
    m_served = json.loads((tmp_path / "s" / "metrics.json").read_text())
    m_local = json.loads((tmp_path / "l" / "metrics.json").read_text())
    assert m_served["steered"] is True and m_served["episodes"] == 2  # the server's metadata says so
    assert m_local["which"] == "latest" and "which" not in m_served  # which checkpoint a local run acted with
    assert "| checkpoint (latest) |" in local.stdout
    assert m_served["mean_return"] == pytest.approx(m_local["mean_return"], abs=1e-3)


def test_an_unreachable_or_silent_server_is_one_clear_line(tmp_path):
    import threading

    from websockets.sync.server import serve

    from robosteer.real.openpi import packb

    res = _run("checkpoint=ws://127.0.0.1:9", *SHORT, f"out={tmp_path / 'a'}")
    assert res.returncode == 2 and "cannot connect to policy server ws://127.0.0.1:9" in res.stderr
    assert "Traceback" not in res.stderr

    def bare_openpi(ws):  # openpi's own server: metadata without robosteer's announcements
        ws.send(packb({}))
        for _ in ws:
            pass

    with serve(bare_openpi, "127.0.0.1", 0) as srv:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        url = f"ws://127.0.0.1:{srv.socket.getsockname()[1]}"
        res = _run(f"checkpoint={url}", "protocol=openpi", *SHORT, f"out={tmp_path / 'b'}")
        srv.shutdown()
    assert res.returncode == 2 and "announces no shape_meta" in res.stderr, res.stderr[-2000:]
