"""The wheel, ``pip install``-ed into a fresh venv (torch's CPU wheel first, no Makefile): the console scripts
run end to end from the installed copy, configs included, and site-packages gains ``robosteer`` and no
``policies``, ``sim``, ``real`` or ``scripts`` (slow: it installs every dependency)."""

from __future__ import annotations

import os
import shutil
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
    # the wheel is built from a copy of the tracked files: a build/ tree left in the checkout cannot leak in
    src = tmp_path / "src"
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for rel in filter(None, tracked.decode().split("\0")):
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    dist = tmp_path / "dist"
    subprocess.run([*pip[:3], "wheel", "-q", "--no-deps", "-w", str(dist), str(src)], check=True, timeout=600)
    (wheel,) = dist.glob("robosteer-*.whl")
    subprocess.run([*pip, str(wheel)], check=True, timeout=1800)
    site = Path(subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip())  # fmt: skip
    assert (site / "robosteer" / "policies" / "__init__.py").is_file()
    assert not [name for name in ("policies", "sim", "real", "scripts") if (site / name).exists()]
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
        [str(venv / "bin" / "python"), "-c", "import robosteer.scripts.common as c; print(c.__file__, c.CONFIG_DIR)"],
        cwd=run, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert str(ROOT) not in origin and "share/robosteer/configs" in origin
    bare = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import policies"], cwd=run, env=env, capture_output=True, text=True
    )  # fmt: skip
    assert bare.returncode == 1 and "No module named 'policies'" in bare.stderr


def test_every_config_folder_ships_with_the_wheel() -> None:
    """A config group left out of pyproject's data-files breaks every installed (non-editable) copy."""
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    shipped = {pattern for patterns in data.values() for pattern in patterns}
    folders = {p for p in (ROOT / "configs").iterdir() if p.is_dir()}
    missing = sorted(f"configs/{p.name}/*.yaml" for p in folders if f"configs/{p.name}/*.yaml" not in shipped)
    assert not missing, f"add to [tool.setuptools.data-files] in pyproject.toml: {missing}"
    assert "configs/*.yaml" in shipped
