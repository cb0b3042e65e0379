"""robomimic 0.3.0's own BC trainer (``robomimic.scripts.train``) on files robosteer-collect wrote: a state
dataset, and a pixel dataset with two cameras, each camera its own flat key (``obs/<camera>_image``).

robomimic needs torchvision, which does not import beside our torch, so these slow tests run it from a throwaway
venv ($ROBOSTEER_ROBOMIMIC_PYTHON, else /tmp/robomimic311); build it with (~5.8 GB, the wheels lie on this
machine's disk; robomimic's other pins, egl_probe among them, are not needed with rollouts off)::

    python3.11 -m venv /tmp/robomimic311
    /tmp/robomimic311/bin/pip install torch==2.14.1 torchvision==0.29.1 numpy h5py psutil tqdm termcolor \
        tensorboard tensorboardX imageio imageio-ffmpeg matplotlib six
    /tmp/robomimic311/bin/pip install --no-deps robomimic==0.3.0
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from robosteer.policies.data import open_dataset

REPO = Path(__file__).resolve().parents[3]

# Runs robomimic's trainer with its own BC config, changed only to run a few steps on CPU without rollouts.
# argv: dataset, output dir, low_dim keys, rgb keys (comma-separated; may be empty), hdf5 cache mode.
BC_SCRIPT = r"""
import json, subprocess, sys
from robomimic.config import config_factory

dataset, out, low_dim, rgb, cache = sys.argv[1:6]
config = config_factory("bc")
with config.values_unlocked():
    config.experiment.name = "robosteer_interop"
    config.experiment.validate = False
    config.experiment.rollout.enabled = False  # no env: robosteer's Meta-World is not robomimic's
    config.experiment.save.enabled = False
    config.experiment.logging.log_tb = False
    config.experiment.epoch_every_n_steps = 3
    config.train.data = dataset
    config.train.output_dir = out
    config.train.num_epochs = 2
    config.train.batch_size = 8
    config.train.num_data_workers = 0
    config.train.hdf5_cache_mode = None if cache == "none" else cache
    config.train.cuda = False
    config.train.seed = 0
    config.algo.actor_layer_dims = (32, 32)
    config.observation.modalities.obs.low_dim = [k for k in low_dim.split(",") if k]
    config.observation.modalities.obs.rgb = [k for k in rgb.split(",") if k]
with open(out + ".json", "w") as f:
    json.dump(json.loads(config.dump()), f)
sys.exit(subprocess.call([sys.executable, "-m", "robomimic.scripts.train", "--config", out + ".json"]))
"""


def robomimic_python() -> Path | None:
    """The throwaway venv's python, if robomimic and torchvision import there."""
    py = Path(os.environ.get("ROBOSTEER_ROBOMIMIC_PYTHON", "/tmp/robomimic311/bin/python"))
    if not py.exists():
        return None
    probe = subprocess.run([str(py), "-c", "import robomimic, torchvision"], capture_output=True, timeout=300)
    return py if probe.returncode == 0 else None


@pytest.fixture(scope="module")
def robomimic_py() -> Path:
    py = robomimic_python()
    if py is None:
        pytest.skip(
            "no robomimic venv: build /tmp/robomimic311 (see this file's docstring) or set ROBOSTEER_ROBOMIMIC_PYTHON"
        )
    return py


def _collect(tmp_path: Path, out: str, *overrides: str) -> Path:
    env = {**os.environ, "PYTHONPATH": str(REPO), "MUJOCO_GL": "egl", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "robosteer.scripts.collect", "task=reach-v3", "episodes=3", "progress=false"]
    proc = subprocess.run(
        [*cmd, *overrides, f"out={out}"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp_path / out / "demos.hdf5"


def _train(py: Path, tmp_path: Path, dataset: Path, low_dim: str, rgb: str, cache: str) -> str:
    """robomimic's trainer, 2 epochs of 3 steps; returns its output after checking it trained on every key."""
    (tmp_path / "bc.py").write_text(BC_SCRIPT)
    out = tmp_path / f"bc_{cache}_{rgb.count('_image')}cams"
    proc = subprocess.run(
        [str(py), str(tmp_path / "bc.py"), str(dataset), str(out), low_dim, rgb, cache],
        env={**os.environ, "OMP_NUM_THREADS": "2"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "finished run successfully!" in log, log[-4000:]
    for key in [*low_dim.split(","), *filter(None, rgb.split(","))]:
        assert f"obs key {key} with shape" in log, log[-4000:]  # robomimic's shape metadata, one line per key
    losses = [float(x) for x in re.findall(r'^    "Loss": ([-0-9.e]+),$', log, re.M)]
    assert len(losses) == 2 and all(abs(x) < 1e6 for x in losses), log[-4000:]
    for line in log.splitlines():
        if line.startswith("obs key ") or line.startswith("Train Epoch") or '"Loss"' in line:
            print(f"robomimic[{cache}]: {line.strip()}")
    return log


@pytest.mark.slow
def test_robomimic_bc_trains_on_a_state_dataset(robomimic_py, tmp_path):
    path = _collect(tmp_path, "state", "obs=state")
    with open_dataset(path) as d:
        assert d.obs_keys == ["state"] and d.image_layout == "none"
    _train(robomimic_py, tmp_path, path, "state", "", "all")


@pytest.mark.slow
@pytest.mark.parametrize("cache", ["low_dim", "all"])  # low_dim reads the frames from the file every batch
def test_robomimic_bc_trains_on_a_two_camera_pixel_dataset(robomimic_py, tmp_path, cache):
    path = _collect(tmp_path, "pixels", "obs=pixels", "cameras=[corner,gripperPOV]", "image_size=48")
    with open_dataset(path) as d:
        assert d.image_layout == "flat"
        assert d.obs_paths == {
            "image/corner": "corner_image",
            "image/gripperPOV": "gripperPOV_image",
            "proprio": "proprio",
            "state": "state",
        }
    log = _train(robomimic_py, tmp_path, path, "proprio", "corner_image,gripperPOV_image", cache)
    for camera in ("corner_image", "gripperPOV_image"):  # one encoder per camera: neither hides the other
        assert f"obs key {camera} with shape (48, 48, 3)" in log
        assert re.search(rf"name={camera}\n\s+shape=\[3, 48, 48\]", log), log[-4000:]
