"""configs/obs/: one way to choose a policy's inputs, for collect, train and eval alike."""

from __future__ import annotations

import json

import pytest

from robosteer.scripts.cli import _compose, check_overrides
from robosteer.scripts.collect import collect_obs_mode
from robosteer.scripts.common import UsageError, check_policy_inputs


def test_obs_pixels_sets_the_keys_cameras_and_the_loop_for_training() -> None:
    state = _compose("train", ["dataset=d.hdf5"])
    assert list(state.obs_keys) == ["state"] and state.batch_size == 256 and state.threads == 1
    pixels = _compose("train", ["dataset=d.hdf5", "obs=pixels"])
    assert list(pixels.obs_keys) == ["proprio", "image/corner"]
    assert pixels.batch_size == 64 and pixels.threads == 2 and pixels.policy.rgb_crop == 0.9
    assert pixels.policy.n_obs_steps == 1 and pixels.steps == 40000  # the budget's frames: one per window
    stacked = _compose("train", ["dataset=d.hdf5", "obs=pixels", "policy.n_obs_steps=2"])
    assert stacked.policy.n_obs_steps == 2 and state.policy.n_obs_steps == 2  # To=2 one override away
    two = _compose("train", ["dataset=d.hdf5", "obs=pixels", "cameras=[corner,gripperPOV]", "batch_size=32"])
    assert list(two.obs_keys) == ["proprio", "image/corner", "image/gripperPOV"] and two.batch_size == 32


def test_collect_records_state_beside_what_obs_asks_for() -> None:
    """The scripted expert acts on state, so a pixels dataset keeps it (for replay and diagnostics)."""
    assert collect_obs_mode(_compose("collect", [])) == ("state", ())
    assert collect_obs_mode(_compose("collect", ["obs=pixels"])) == ("state+pixels", ("corner",))
    assert collect_obs_mode(_compose("collect", ["obs=image", "cameras=[corner2]"])) == (
        "state+image",
        ("corner2",),
    )


def test_obs_pixels_refuses_a_policy_that_reads_state() -> None:
    cfg = _compose("eval", ["checkpoint=x", "obs=pixels"])
    with pytest.raises(UsageError, match=r"reads obs key\(s\) \['state'\], which this obs= preset withholds"):
        check_policy_inputs(cfg, {"obs": {"state": {}, "image/corner": {}}}, "checkpoint=x")
    check_policy_inputs(
        cfg, {"obs": {"proprio": {}, "image/corner2": {}}}, "checkpoint=x"
    )  # cameras follow it
    check_policy_inputs(_compose("eval", ["checkpoint=x"]), {"obs": {"state": {}}}, "checkpoint=x")  # no obs=
    deploy = _compose("deploy", ["policy_source=x", "obs=pixels"])
    with pytest.raises(UsageError, match="withholds"):
        check_policy_inputs(deploy, {"obs": {"state": {}}}, "policy=x")


def test_unknown_preset_is_one_line(capsys) -> None:
    with pytest.raises(SystemExit):
        check_overrides("robosteer-train", "train", ["dataset=d.hdf5", "obs=pixel"])
    assert "nearest valid choice: 'pixels'" in capsys.readouterr().err


def test_a_pixels_policy_trains_and_its_checkpoint_holds_no_state(pixel_base_run) -> None:
    """collect obs=pixels → train obs=pixels (the shared tiny run, tests/conftest.py) → its input spec."""
    tmp_path = pixel_base_run[0]
    meta = json.loads((tmp_path / "base" / "checkpoints" / "latest" / "config.json").read_text())[
        "shape_meta"
    ]
    assert set(meta["obs"]) == {"proprio", "image/corner"}
    assert meta["obs"]["image/corner"] == {"shape": [32, 32, 3], "type": "rgb"}
