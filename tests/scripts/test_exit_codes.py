"""The project's exit statuses through the real console paths: a dataset with one NaN action is a user error
(exit 2, one line naming file, demo, key and index); a loss that turns non-finite is a runtime fault (exit 1,
the last good checkpoint kept); a corrupted weights file is a user error naming that file (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import clirun
import h5py
import numpy as np
import pytest
import torch
from _ctrl_c import ctrl_c_when

from robosteer.policies.checkpoint import CheckpointError, load_checkpoint
from robosteer.policies.data import DatasetError, DatasetWriter
from robosteer.policies.engine import NonFiniteError
from robosteer.scripts.common import exit_codes

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "MUJOCO_GL": "egl"}
TINY = [
    "policy=diffusion",
    "policy.mlp_hidden_dim=32",
    "policy.mlp_n_blocks=1",
    "policy.time_embed_dim=16",
    "batch_size=16",
    "log_every=1",
    "progress=false",
]


def _cli(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", module, *args]
    return clirun.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def demos(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demos") / "demos.hdf5"
    rng = np.random.default_rng(0)
    with DatasetWriter(path, {"env_name": "reach-v3"}, valid_fraction=0.0) as w:
        for _ in range(4):
            w.add_episode(
                {"state": rng.standard_normal((12, 39)).astype(np.float32)},
                rng.uniform(-1, 1, (12, 4)).astype(np.float32),
                np.zeros(12, np.float32),
                np.zeros(12, np.uint8),
            )
    return path


def _one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr[-3000:]
    return lines[-1]


def test_exit_codes_map_the_projects_errors():
    for err, code in (
        (DatasetError("f.hdf5: bad"), 2),
        (CheckpointError("ck: bad"), 2),
        (NonFiniteError("x"), 1),
    ):
        with pytest.raises(SystemExit) as info, exit_codes("robosteer-x"):
            raise err
        assert info.value.code == code
    with pytest.raises(KeyError), exit_codes("robosteer-x"):  # anything else is not ours to hide
        raise KeyError("k")


def test_train_on_a_dataset_with_one_nan_action_exits_2_naming_file_demo_key_index(tmp_path, demos):
    bad = tmp_path / "nan.hdf5"
    bad.write_bytes(demos.read_bytes())
    with h5py.File(bad, "a") as f:
        f["data/demo_2/actions"][5, 1] = np.nan
    p = _cli("robosteer.scripts.train", f"dataset={bad}", "steps=3", "out=run", *TINY, cwd=tmp_path)
    assert p.returncode == 2, p.stderr[-3000:]
    line = _one_line_error(p.stderr)
    assert line.startswith("robosteer-train: error: ") and str(bad) in line, line
    assert "data/demo_2/actions holds a non-finite value at step 5, index [5, 1] (nan)" in line, line
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_train_whose_loss_turns_non_finite_exits_1_and_keeps_the_last_good_checkpoint(tmp_path, demos):
    """An absurd learning rate: step 1 moves every weight by ~1e30, and step 2's loss overflows float32."""
    over = ["optim.lr=1e30", "grad_clip_norm=null", "lr_warmup_steps=0", "lr_scheduler=constant"]
    p = _cli(
        "robosteer.scripts.train",
        f"dataset={demos}",
        "steps=5",
        "checkpoint_every=1",
        "out=run",
        *TINY,
        *over,
        cwd=tmp_path,
    )
    assert p.returncode == 1, p.stderr[-3000:]
    line = _one_line_error(p.stderr)
    latest = tmp_path / "run" / "checkpoints" / "latest"
    assert line.startswith("robosteer-train: runtime fault: training: non-finite loss"), line
    assert "at step 2;" in line and f"{latest} holds the last good state (step 1)" in line, line
    ck = load_checkpoint(latest)
    assert ck.extra["step"] == 1
    assert all(torch.isfinite(t).all() for t in ck.modules["model"].values() if t.is_floating_point())
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_eval_of_a_checkpoint_with_corrupted_weights_exits_2_naming_the_file(tmp_path, demos):
    from hydra import compose, initialize_config_dir

    from robosteer.scripts.train import run

    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base=None):
        cfg = compose("train", overrides=[f"dataset={demos}", "steps=2", f"out={tmp_path / 'run'}", *TINY])
    run(cfg)
    weights = tmp_path / "run" / "checkpoints" / "latest" / "ema.safetensors"  # what eval loads (no 'best')
    raw = bytearray(weights.read_bytes())
    mid = len(raw) // 2
    raw[mid : mid + 65536] = b"\xff" * len(raw[mid : mid + 65536])  # up to 64 KB of 0xff: NaN weights
    weights.write_bytes(bytes(raw))
    args = [f"checkpoint={tmp_path / 'run'}", "episodes=1", "video=false", "progress=false", "out=ev"]
    p = _cli("robosteer.scripts.evaluate", *args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr[-3000:]
    line = _one_line_error(p.stderr)
    assert line.startswith("robosteer-eval: error: ") and f"{weights}: checksum mismatch" in line, line


def test_sigterm_stops_a_background_run_as_ctrl_c_does(tmp_path, demos):
    """A run started in the background from a script ignores SIGINT, so ``kill`` (SIGTERM; also docker stop,
    systemd, a scheduler's preemption) is how it is stopped: it finishes the step in flight, saves
    checkpoints/latest there and exits 130 with one line, instead of dying at its last periodic save."""
    import signal

    common = [f"dataset={demos}", "checkpoint_every=100000", "eval_every=0", "out=run", *TINY]
    code, err = ctrl_c_when(
        [sys.executable, "-m", "robosteer.scripts.train", *common, "steps=100000"],
        lambda: bool(list((tmp_path / "run" / "tb").glob("events*"))),
        cwd=tmp_path,
        env=ENV,
        settle_s=2.0,
        signum=signal.SIGTERM,
        sigint=signal.SIG_IGN,
    )
    assert code == 130, err[-3000:]
    assert _one_line_error(err) == "robosteer-train: interrupted (Ctrl-C or SIGTERM)"
    assert 0 < load_checkpoint(tmp_path / "run" / "checkpoints" / "latest").extra["step"] < 100000


def test_ctrl_c_during_training_exits_130_with_one_line_and_resume_continues(tmp_path, demos):
    """Ctrl-C through the real console path: one line, exit 130, checkpoints/latest saved where it landed
    (not only at the last periodic save), and ``resume=true`` carries the run to its end."""
    common = [f"dataset={demos}", "checkpoint_every=100000", "eval_every=0", "out=run", *TINY]
    code, err = ctrl_c_when(
        [sys.executable, "-m", "robosteer.scripts.train", *common, "steps=100000"],
        lambda: bool(list((tmp_path / "run" / "tb").glob("events*"))),  # training: the engine holds Ctrl-C
        cwd=tmp_path,
        env=ENV,
        settle_s=2.0,  # some steps
    )
    assert code == 130, err[-3000:]
    assert _one_line_error(err) == "robosteer-train: interrupted (Ctrl-C or SIGTERM)"
    step = load_checkpoint(tmp_path / "run" / "checkpoints" / "latest").extra["step"]
    assert 0 < step < 100000
    p = _cli("robosteer.scripts.train", *common, f"steps={step + 2}", "resume=true", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert load_checkpoint(tmp_path / "run" / "checkpoints" / "latest").extra["step"] == step + 2
