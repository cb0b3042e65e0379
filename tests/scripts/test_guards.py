"""scripts/guards.py: a run this machine or this output cannot take is refused in one line, exit 2, before any
work, and leaves the tree byte-identical (robosteer-dataset import/export's own ``overwrite=`` is tested in
tests/policies/data/test_lerobot.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from robosteer.scripts import guards
from robosteer.scripts.cli import check_overrides
from robosteer.scripts.dataset import peel_command

# Each writing command with the least it needs to compose (every input named here exists in tmp_path).
WRITERS = {
    "collect": ["task=push-v3"],
    "train": ["dataset=d.hdf5"],
    "steer": ["base=base"],
    "value": ["dataset=d.hdf5"],
    "eval": ["checkpoint=base", "task=push-v3"],
    "deploy": ["policy_source=base"],
}


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its content's hash: what "byte-identical" compares."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.hdf5").write_bytes(b"demos")
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "config.yaml").write_text("a: 1\n")
    return tmp_path


def _refused(command: str, args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        check_overrides(f"robosteer-{command}", command, args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_an_existing_output_is_refused_and_left_byte_identical(command: str, work: Path, capsys) -> None:
    run = work / "run"
    run.mkdir()
    (run / "config.yaml").write_text("seed: 3\n")
    (run / "demos.hdf5").write_bytes(b"two episodes")
    before = _tree(work)
    err = _refused(command, [*WRITERS[command], "out=run"], capsys)
    assert "out=run already holds files" in err and "overwrite=true" in err
    assert _tree(work) == before
    check_overrides(f"robosteer-{command}", command, [*WRITERS[command], "out=run", "overwrite=true"])
    assert not run.exists()  # replaced: the old run is gone before the new one starts
    assert _tree(work) == {k: v for k, v in before.items() if not k.startswith("run/")}


@pytest.mark.parametrize("command", ["train", "steer"])
def test_resume_continues_an_existing_output(command: str, work: Path) -> None:
    (work / "run").mkdir()
    (work / "run" / "config.yaml").write_text("seed: 3\n")
    before = _tree(work)
    check_overrides(f"robosteer-{command}", command, [*WRITERS[command], "out=run", "resume=true"])
    assert _tree(work) == before


def test_overwrite_replaces_only_a_run(work: Path, capsys) -> None:
    (work / "notes").mkdir()
    (work / "notes" / "thesis.tex").write_text("years of work")
    before = _tree(work)
    err = _refused("train", ["dataset=d.hdf5", "out=notes", "overwrite=true"], capsys)
    assert "not a robosteer run" in err
    assert _tree(work) == before


def test_an_interrupted_collection_is_refused_even_with_overwrite(work: Path, capsys) -> None:
    (work / "run").mkdir()
    (work / "run" / "config.yaml").write_text("seed: 0\n")
    (work / "run" / "demos.hdf5.partial").write_bytes(b"salvaged")
    before = _tree(work)
    err = _refused("collect", ["out=run", "overwrite=true"], capsys)
    assert "interrupted collection" in err and "demos.hdf5.partial" in err
    assert _tree(work) == before


def test_an_empty_or_new_output_is_taken(work: Path) -> None:
    (work / "empty").mkdir()
    check_overrides("robosteer-train", "train", ["dataset=d.hdf5", "out=empty"])
    check_overrides("robosteer-train", "train", ["dataset=d.hdf5", "out=new/deeper"])
    assert not (work / "new").exists()  # the check creates nothing


@pytest.mark.parametrize(
    ("value", "says"),
    [("gpu", "nearest valid choice: 'cuda'"), ("cud", "nearest valid choice: 'cuda'"), ("cpux", "'cpu'")],
)
def test_an_unknown_device_names_the_valid_ones(value: str, says: str, work: Path, capsys) -> None:
    err = _refused("train", ["dataset=d.hdf5", f"device={value}"], capsys)
    assert f"device={value} is not known" in err and "cpu | cuda | cuda:N | auto" in err and says in err
    assert sorted(p.name for p in work.iterdir()) == ["base", "d.hdf5"]  # nothing written


@pytest.mark.parametrize("command", ["train", "steer", "value", "eval"])
def test_cuda_without_a_gpu_is_one_line(command: str, work: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(guards, "cuda_available", lambda: False)
    args = WRITERS[command]
    err = _refused(command, [*args, "device=cuda:1"], capsys)
    assert "device=cuda:1: no CUDA GPU is usable here" in err and "device=cpu" in err
    monkeypatch.setattr(guards, "cuda_available", lambda: True)
    check_overrides(f"robosteer-{command}", command, [*args, "device=cuda:1"])


def test_cuda_available_reads_the_torch_build_without_importing_it() -> None:
    import subprocess
    import sys

    code = "import sys; from robosteer.scripts import guards; print(guards.cuda_available(), 'torch' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    import torch

    assert p.stdout.split() == [str(torch.cuda.is_available()), "False"]


@pytest.mark.parametrize(("command", "where"), [("train", ""), ("value", ""), ("steer", "run.")])
def test_wandb_online_without_a_key_is_refused_and_the_mode_is_wandbs_own_variable(
    command: str, where: str, work: Path, capsys, monkeypatch
) -> None:
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("NETRC", str(work / "no-netrc"))
    args = [*WRITERS[command], f"{where}logger=wandb"]
    err = _refused(command, args, capsys)
    assert "no W&B key is known" in err and "wandb login" in err and "WANDB_MODE=offline" in err
    monkeypatch.setenv("WANDB_MODE", "offline")  # W&B's own convention
    check_overrides(f"robosteer-{command}", command, args)
    if command == "value":  # robosteer-value still has its own key, which wins when set
        _refused(command, [*args, "wandb_mode=online"], capsys)
        monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
        check_overrides(f"robosteer-{command}", command, [*args, "wandb_mode=online"])
    else:  # one name per setting: the command line has no copy of W&B's variables
        for key, var in (("wandb_mode", "WANDB_MODE"), ("wandb_project", "WANDB_PROJECT")):
            err = _refused(command, [*args, f"{where}{key}=x"], capsys)
            assert f"{where}{key}= is W&B's own {var}" in err and f"run {var}=x" in err


@pytest.mark.parametrize(("key", "value"), [("dataset", "missing.hdf5"), ("base", "runs/nope")])
def test_a_missing_input_is_refused_before_any_output_exists(
    key: str, value: str, work: Path, capsys
) -> None:
    command = "train" if key == "dataset" else "steer"
    err = _refused(command, [f"{key}={value}", "out=run"], capsys)
    assert value in err and not (work / "run").exists()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "give a subcommand first, one of info, validate, video, import, export"),
        (["path=x.hdf5"], "give a subcommand first"),
        (
            ["inof", "path=x"],
            "'inof' is not a subcommand: expected one of info, validate, video, import, export; "
            "nearest valid choice: 'info'",
        ),
    ],
)
def test_dataset_lists_its_subcommands(argv: list[str], says: str) -> None:
    with pytest.raises(guards.UsageError, match="subcommand") as err:
        peel_command(["robosteer-dataset", *argv])
    assert says in str(err.value)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["algo=expo", "base=scratch", "task=reach-v3"], "algo=expo needs base=<run directory"),
        (["algo=expo", "base=ws://127.0.0.1:9"], "a served base is steered by algo=dsrl"),
        (["algo=expo", "preset=reference", "base=base"], "use it with algo=dsrl, not algo=expo"),
    ],
)
def test_steer_refuses_a_base_its_algorithm_cannot_steer(
    args: list[str], says: str, work: Path, capsys
) -> None:
    """check_steer_base: before Hydra starts, and with nothing written (out= does not come to exist)."""
    before = _tree(work)
    assert says in _refused("steer", [*args, "out=new"], capsys)
    assert _tree(work) == before and not (work / "new").exists()


def test_steer_takes_each_base_its_algorithm_can_steer(work: Path) -> None:
    for args in (["base=base"], ["algo=expo", "base=base"], ["base=scratch", "variant=sac", "task=reach-v3"],
                 ["base=ws://127.0.0.1:9", "task=reach-v3"], ["preset=reference", "base=base"]):  # fmt: skip
        check_overrides("robosteer-steer", "steer", [*args, "out=new"])


def test_the_guards_copies_of_scratch_and_served_agree_with_the_loaders() -> None:
    """guards.py names ``scratch`` and the served schemes without importing torch; the loaders own them."""
    from robosteer.policies.steering.scratch import SCRATCH
    from robosteer.real.client import is_url

    assert guards.SCRATCH == SCRATCH
    for address in ("ws://h:8000", "wss://h:8000", "http://h:8000", "https://h:8000", "runs/base"):
        assert is_url(address) == address.startswith(guards.SERVED), address


@pytest.mark.parametrize(
    ("command", "args", "says"),
    [
        ("eval", ["sim=wrap"], "sim='wrap' is not known: expected one of ['metaworld', 'warp', 'isaaclab']"),
        ("eval", ["sim=warp", "task=hammer-v3"], "task=hammer-v3 is not ported to sim=warp"),
        (
            "steer",
            ["sim=warp", "task=hammer-v3"],
            "expected one of ['reach-v3', 'push-v3', 'pick-place-v3', 'door-open-v3'",
        ),
        (
            "collect",
            ["sim=isaaclab"],
            "sim=isaaclab: the scripted experts that collect demos run on Meta-World",
        ),
        ("collect", ["sim=warp"], "sim=warp needs the package 'mujoco_warp'"),
        ("eval", ["sim=warp", "obs=pixels"], "cameras=['corner'] sim=warp: this backend renders no cameras"),
        ("eval", ["sim=warp", "randomization=default"], "domain randomization is Meta-World's"),
    ],
)
def test_a_sim_this_run_cannot_use_is_one_line(
    command: str, args: list[str], says: str, work: Path, capsys
) -> None:
    base = [a for a in WRITERS[command] if not a.startswith("task=")]
    before = _tree(work)
    assert says in _refused(command, [*base, *args, "out=new"], capsys)
    assert _tree(work) == before


def test_a_replay_is_refused_in_another_sim(work: Path, capsys) -> None:
    err = _refused("eval", ["policy=replay", "dataset=d.hdf5", "sim=warp"], capsys)
    assert "recorded episodes replay only in the sim that recorded them" in err


def test_a_sim_whose_packages_are_missing_says_where_they_live(work: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(guards.importlib.util, "find_spec", lambda name: None)
    err = _refused("eval", [*WRITERS["eval"], "sim=warp"], capsys)
    assert "needs the package 'mujoco_warp'" in err and ".venv-gpu (`make gpu-env`" in err
    assert "Nearest valid choice: sim=metaworld" in err
    err = _refused("steer", ["base=base", "sim=isaaclab"], capsys)
    assert "needs the package 'isaaclab'" in err


def test_the_guards_sim_lists_are_the_backends() -> None:
    """guards names the sims and Warp's tasks without importing sim (torch): the copies match the source."""
    from robosteer.sim.backends import COMMAND_SIMS, WARP_TASKS

    assert guards.SIMS == COMMAND_SIMS and tuple(WARP_TASKS) == guards.WARP_TASKS
