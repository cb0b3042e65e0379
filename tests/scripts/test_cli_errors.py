"""User errors read as one line: what, where, the nearest valid choice; exit 2 (a runtime fault exits 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import clirun
import pytest

from robosteer.scripts.cli import check_overrides

ROOT = Path(__file__).resolve().parents[2]

# (command, config, overrides, what the one line must say)
MISTAKES = [
    (
        "robosteer-train",
        "train",
        ["dataset=d.hdf5", "stpes=5"],
        "unknown key 'stpes'; nearest valid choice: 'steps'",
    ),
    ("robosteer-steer", "steer", ["dsrl.tua=0.1"], "nearest valid choice: 'dsrl.tau'"),
    ("robosteer-deploy", "deploy", ["policy_source=x", "safety.max_velocty=1"], "'safety.max_velocity'"),
    ("robosteer-collect", "collect", ["task=push-v3", "episodes=abc"], "episodes=abc: expected an integer"),
    (
        "robosteer-collect",
        "collect",
        ["task=push-v3", "episodes=-1"],
        "episodes=-1: expected an integer >= 1",
    ),
    ("robosteer-train", "train", ["dataset=d.hdf5", "steps=-5"], "steps=-5: expected an integer >= 1"),
    (
        "robosteer-value",
        "value",
        ["dataset=d.hdf5", "demo_limit=0"],
        "demo_limit=0: expected an integer >= 1",
    ),
    ("robosteer-collect", "collect", ["progress=flase"], "progress=flase: expected true or false"),
    ("robosteer-train", "train", ["dataset=d.hdf5", "policy=expert"], "expected one of ['diffusion', 'flow'"),
    ("robosteer-steer", "steer", ["algo=exop"], "nearest valid choice: 'expo'"),
    (  # a setting of another option of a group is named as such, not as a typo of an unrelated key
        "robosteer-steer",
        "steer",
        ["algo=expo", "critic_obs=state"],
        "unknown key 'critic_obs' here: it is a setting of algo=dsrl, not of algo=expo",
    ),
    ("robosteer-steer", "steer", ["expo.num_edits=2"], "it is a setting of algo=expo, not of algo=dsrl"),
    ("robosteer-train", "train", [], "missing required key: dataset="),
    ("robosteer-deploy", "deploy", ["robot=sim_twin"], "missing required key: policy="),  # the user's key
    ("robosteer-eval", "eval", ["episodes"], "'episodes' is not an override: expected key=value"),
    # eval's policy group holds schema options (no YAML file to search): a typo is still named as a typo
    ("robosteer-eval", "eval", ["policyx=1"], "unknown key 'policyx'; nearest valid choice: 'policy'"),
    ("robosteer-eval", "eval", ["actor_obs=encoder"], "unknown key 'actor_obs'"),
]


@pytest.mark.parametrize(
    ("command", "config", "args", "says"), MISTAKES, ids=[" ".join(m[2]) for m in MISTAKES]
)
def test_a_command_line_mistake_is_one_line_and_exit_2(command, config, args, says, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        check_overrides(command, config, args)
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert says in err and err.startswith(f"{command}: error: ") and err.count("\n") == 1, err


def test_valid_command_lines_pass(capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the inputs named below exist; the default outputs do not
    (tmp_path / "d.hdf5").write_bytes(b"")
    (tmp_path / "x").mkdir()
    check_overrides(
        "robosteer-train", "train", ["dataset=d.hdf5", "policy=flow", "steps=10", "optim.lr=1e-3"]
    )
    check_overrides("robosteer-steer", "steer", ["algo=expo", "expo.num_samples=2", "run.utd=1.5", "base=x"])
    check_overrides("robosteer-deploy", "deploy", ["policy_source=x", "safety.max_velocity=0.2"])
    assert capsys.readouterr().err == ""


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return clirun.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_a_directory_as_dataset_points_at_the_file_inside(tmp_path: Path) -> None:
    (tmp_path / "demos").mkdir()
    (tmp_path / "demos" / "demos.hdf5").write_bytes(b"")
    p = _run("robosteer.scripts.train", f"dataset={tmp_path / 'demos'}", f"out={tmp_path / 'run'}", cwd=ROOT)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert f"use dataset={tmp_path / 'demos' / 'demos.hdf5'}" in p.stderr


def test_a_salvaged_partial_collection_is_never_overwritten(tmp_path: Path) -> None:
    from robosteer.policies.data import DatasetWriter

    out = tmp_path / "demos"
    writer = DatasetWriter(out / "demos.hdf5", env_args={"env_name": "push-v3"})
    writer._file.close()  # as a kill -9 leaves it: the .partial file, never renamed
    partial = out / "demos.hdf5.partial"
    size = partial.stat().st_size
    p = _run(
        "robosteer.scripts.collect", "task=push-v3", "episodes=1", f"out={out}", "progress=false", cwd=ROOT
    )
    assert p.returncode == 2 and "interrupted collection" in p.stderr and "Traceback" not in p.stderr
    assert partial.stat().st_size == size  # untouched
