"""robosteer-dataset info|validate|video: composed-config calls, plus the real console path in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import imageio.v2 as imageio
import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from robosteer.scripts.dataset import peel_command, run

REPO = Path(__file__).resolve().parents[3]


def _cfg(*overrides: str):
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base=None):
        return compose(config_name="dataset", overrides=list(overrides), return_hydra_config=False)


def test_config_writes_no_outputs_folder():
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base=None):
        cfg = compose(config_name="dataset", return_hydra_config=True)
    assert cfg.hydra.output_subdir is None
    assert cfg.hydra.run.dir == "."
    assert cfg.cmd == "info"


def test_peel_command():
    assert peel_command(["robosteer-dataset", "info", "path=x.hdf5"]) == [
        "robosteer-dataset",
        "cmd=info",
        "path=x.hdf5",
    ]
    assert peel_command(["robosteer-dataset", "path=x.hdf5", "cmd=video"]) == [
        "robosteer-dataset",
        "path=x.hdf5",
        "cmd=video",
    ]


def test_info_table(make_dataset, capsys):
    path = make_dataset(lengths=(5, 3, 4, 6), images=True, valid_fraction=0.25)
    assert run(_cfg("cmd=info", f"path={path}")) == 0
    out = capsys.readouterr().out
    for line in (
        "episodes           4",
        "steps              18",
        "episode length     mean 4.5, min 3, max 6",
        "success rate       50.0%",
        "action dim         4",
        "splits             train: 3, valid: 1",
        "control rate       not recorded (export needs fps=)",
        "image layout       flat: images at obs/<camera>_image (robomimic's layout)",
        "obs/corner2_image  (T, 8, 10, 3) uint8 (read as image/corner2)",
        "obs/state          (T, 3) float32\n",
    ):
        assert line in out, f"{line!r} not in\n{out}"
    assert '"env_name": "push-v3"' in out


def test_validate_ok_and_invalid(make_dataset, tmp_path, capsys):
    path = make_dataset()
    assert run(_cfg("cmd=validate", f"path={path}")) == 0
    assert capsys.readouterr().out == f"valid: {path} (2 episodes, 8 steps; no image keys)\n"
    with h5py.File(path, "a") as f:
        del f["data/demo_1/actions"]
    assert run(_cfg("cmd=validate", f"path={path}")) == 2
    err = capsys.readouterr().err
    assert "INVALID" in err and str(path) in err and "data/demo_1/actions is missing" in err


def test_validate_deep_finds_non_finite_values(make_dataset, capsys):
    path = make_dataset()
    with h5py.File(path, "a") as f:
        f["data/demo_0/actions"][2, 1] = np.nan
    assert run(_cfg("cmd=validate", f"path={path}", "deep=false")) == 0
    assert run(_cfg("cmd=validate", f"path={path}")) == 2
    assert "data/demo_0/actions holds a non-finite value at step 2" in capsys.readouterr().err


def test_validate_finds_random_bytes_written_into_states(tmp_path, capsys):
    """4 KB of random bytes in the middle of a file, inside demo_1's states (NaN and 1e307 among them), used to
    report "valid": every array is now checked, and the report names file, demo, key and index."""
    from robosteer.policies.data import DatasetWriter

    path = tmp_path / "demos.hdf5"
    rng = np.random.default_rng(0)
    with DatasetWriter(path, {"env_name": "push-v3"}) as w:
        for _ in range(3):
            w.add_episode(
                {"state": rng.standard_normal((64, 4)).astype(np.float32)},
                rng.uniform(-1, 1, (64, 4)).astype(np.float32),
                np.zeros(64, np.float32),
                np.zeros(64, np.uint8),
                states=rng.standard_normal((64, 16)),  # (T, S) float64: 8 KB per demo
            )
    assert run(_cfg("cmd=validate", f"path={path}")) == 0
    with h5py.File(path, "r") as f:
        offset = f["data/demo_1/states"].id.get_offset()  # contiguous data in the middle of the file
    size = path.stat().st_size
    assert 0.2 * size < offset < 0.8 * size
    raw = bytearray(path.read_bytes())
    noise = rng.integers(0, 256, 4096, dtype=np.uint8)
    raw[offset + 512 : offset + 512 + 4096] = noise.tobytes()
    path.write_bytes(bytes(raw))
    capsys.readouterr()
    assert run(_cfg("cmd=validate", f"path={path}")) == 2
    err = capsys.readouterr().err
    assert "INVALID" in err and str(path) in err and "data/demo_1/states holds" in err, err
    assert re.search(r"at step 4, index \[4, \d+\]", err), err  # byte 512 = row 4 of 16 float64s


def test_video_renders_image_episode(make_dataset, tmp_path, capsys):
    path = make_dataset(lengths=(5, 7), images=True)
    out = tmp_path / "vids"
    assert run(_cfg("cmd=video", f"path={path}", f"out={out}", "episode=1", "fps=10")) == 0
    mp4 = out / "demo_1_image_corner2.mp4"
    assert mp4.exists() and str(mp4) in capsys.readouterr().out
    frames = imageio.mimread(mp4)
    assert len(frames) == 7 and frames[0].shape[-1] == 3


def test_video_without_images_says_so(make_dataset, capsys):
    path = make_dataset(images=False)
    assert run(_cfg("cmd=video", f"path={path}")) == 2
    err = capsys.readouterr().err
    assert "no image obs keys" in err and "'state'" in err
    assert not (path.parent / "videos").exists()


def test_unknown_command_and_missing_path(capsys):
    assert run(_cfg("cmd=infos", "path=x.hdf5")) == 2
    assert "unknown command 'infos'" in capsys.readouterr().err
    assert run(_cfg("cmd=info")) == 2
    assert "path=" in capsys.readouterr().err


@pytest.mark.parametrize("broken", [False, True])
def test_console_entry_point(make_dataset, tmp_path, broken):
    """The real argv path: `robosteer-dataset <cmd> path=...`, exit status, and no Hydra junk in the cwd."""
    path = make_dataset()
    if broken:
        path.write_bytes(path.read_bytes()[:1000])
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = "validate" if broken else "info"
    proc = subprocess.run(
        [sys.executable, "-c", "from scripts.dataset import main; main()", cmd, f"path={path}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert list(cwd.iterdir()) == []  # no outputs/, .hydra/ or log file
    assert "Traceback" not in proc.stderr
    if broken:
        assert proc.returncode == 2 and "truncated or corrupt" in proc.stderr and str(path) in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert re.search(r"^episodes\s+2$", proc.stdout, re.M), proc.stdout


@pytest.mark.parametrize(
    ("layout", "said"),
    [
        ("flat", "images at obs/<camera>_image (robomimic's layout)"),
        (
            "nested",
            "images at obs/image/<camera> (robosteer's layout before flat keys; robomimic cannot read it)",
        ),
    ],
)
def test_validate_and_info_say_the_image_layout(make_dataset, capsys, layout, said):
    path = make_dataset(lengths=(5, 3), images=True)
    if layout == "nested":  # the file the writer wrote before flat image keys
        path = Path(__file__).resolve().parents[2] / "fixtures" / "nested_images" / "nested.hdf5"
    assert run(_cfg("cmd=validate", f"path={path}")) == 0
    assert capsys.readouterr().out.endswith(f"steps; {said})\n")
    assert run(_cfg("cmd=info", f"path={path}")) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^image layout +{layout}: {re.escape(said)}$", out, re.M), out
    if layout == "nested":  # stored where the keys read: no "read as"; the fixture records 80 Hz
        assert re.search(r"^control rate +80.0 Hz$", out, re.M), out
        assert re.search(r"^obs/image/a +\(T, 6, 8, 3\) uint8$", out, re.M), out
