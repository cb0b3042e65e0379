"""robosteer-train action_noise_std=auto through the command (tiny budgets, a planted ratio), its CLI refusal and
help, robosteer-steer's concrete retrain advice, and the failure fraction beside the raw lift."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from robosteer.policies.checkpoint import load_policy, read_checkpoint_config, state_dict_hash
from robosteer.policies.steering import steerability as st
from robosteer.policies.train import auto_noise
from robosteer.scripts import steer, train
from robosteer.scripts.cli import CliError, check_overrides, problems
from robosteer.scripts.help import render

torch.set_num_threads(1)
REPO = Path(__file__).resolve().parents[2]
SMALL = [
    "policy.mlp_hidden_dim=32",
    "policy.mlp_n_blocks=1",
    "policy.time_embed_dim=16",
    "policy.num_inference_steps=2",
    "batch_size=16",
    "log_every=2",
    "checkpoint_every=100",
    "progress=false",
    "lr_warmup_steps=2",
    "steps=6",
]


@pytest.fixture(scope="module")
def demos(tiny_state_demos: Path) -> Path:
    return tiny_state_demos  # tests/conftest.py


def _cfg(*overrides: str):
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base=None):
        return compose("train", overrides=list(overrides))


@pytest.fixture
def planted(monkeypatch):
    """3-step probes over σ in (0, 0.2, 0.4); the check runs for real (dataset windows through the trained
    base) and then reports the next planted ratio: one per probe, in order, then the finished base's."""

    def plant(ratios: list[float]) -> list[float]:
        config = auto_noise.AutoNoiseConfig
        monkeypatch.setattr(
            auto_noise, "AutoNoiseConfig", lambda: config(candidates=(0.0, 0.2, 0.4), probe_steps=3, states=8)
        )
        real, queue, seen = auto_noise.check_base, list(ratios), []

        def check(policy, dataset, config, seed):
            measured = real(policy, dataset, config, seed)
            seen.append(measured.ratio)
            r = queue.pop(0)
            return st.Steerability(measured.over_noise, measured.over_states, r, st.verdict(r), 8, 16)

        monkeypatch.setattr(auto_noise, "check_base", check)
        return seen

    return plant


def test_auto_finishes_the_first_steerable_probe_as_the_run_that_sigma_gives(tmp_path, demos, planted):
    seen = planted([0.1, 0.6, 0.7])  # 0 not steerable, 0.2 steerable (0.4 never trained), final 0.7
    m = train.run(_cfg(f"dataset={demos}", *SMALL, "action_noise_std=auto", f"out={tmp_path / 'auto'}"))
    assert len(seen) == 3 and all(r > 0 for r in seen)  # two probes and the finished base, really decoded
    auto = m["auto_noise"]
    assert m["action_noise_std"] == auto["chosen"] == 0.2 and m["steps"] == 6
    assert [(p["sigma"], p["ratio"], p["verdict"]) for p in auto["probes"]] == [
        (0.0, 0.1, "not steerable"),
        (0.2, 0.6, "steerable"),
    ]
    assert auto["extra_steps"] == 3 and auto["final"] == {"ratio": 0.7, "verdict": "steerable"}
    assert json.loads((tmp_path / "auto" / "metrics.json").read_text())["auto_noise"] == auto
    assert not (tmp_path / "auto" / "auto" / "sigma_0.4").exists()
    assert (
        read_checkpoint_config(tmp_path / "auto" / "checkpoints" / "latest")["train"]["action_noise_std"]
        == 0.2
    )
    table = train.auto_table(auto)
    assert "| 0.2 (chosen) | 0.6 | steerable | - |" in table and "finished base: ratio 0.70" in table
    # the run auto finished is, weight for weight, the run action_noise_std=0.2 gives
    train.run(_cfg(f"dataset={demos}", *SMALL, "action_noise_std=0.2", f"out={tmp_path / 'fixed'}"))
    hashes = [state_dict_hash(load_policy(tmp_path / r)) for r in ("auto", "fixed")]
    assert hashes[0] == hashes[1]


def test_a_probe_that_is_the_whole_run_reports_its_own_training_figures(tmp_path, demos, planted):
    planted([0.6, 0.6])  # σ = 0 steerable at once; steps = probe_steps: nothing is left to train
    over = [f"dataset={demos}", *SMALL, "steps=3", "action_noise_std=auto", f"out={tmp_path / 'one'}"]
    m = train.run(_cfg(*over))
    assert m["auto_noise"]["chosen"] == 0.0 and m["auto_noise"]["extra_steps"] == 0 and m["steps"] == 3
    assert np.isfinite(m["final_loss"]) and m["samples_per_s"] > 0


def test_no_steerable_candidate_is_one_line_and_no_base(tmp_path, demos, planted, capsys):
    planted([0.05, 0.3, 0.45])
    cfg = _cfg(f"dataset={demos}", *SMALL, "action_noise_std=auto", f"out={tmp_path / 'none'}")
    with pytest.raises(SystemExit) as err:
        train._main(cfg)
    assert err.value.code == 1
    out, errors = capsys.readouterr()
    assert errors.count("\n") == 1 and errors.startswith(
        "robosteer-train: no steerable base: no action_noise_std"
    )
    assert "best ratio 0.45 at 0.4, weakly steerable" in errors and "| 0.4 | 0.45 | weakly steerable |" in out
    m = json.loads((tmp_path / "none" / "metrics.json").read_text())
    assert m["action_noise_std"] is None and m["auto_noise"]["reason"] in errors
    assert not (tmp_path / "none" / "checkpoints").exists()


@pytest.mark.parametrize("value", ["-1", "abc", "null", "nan", "[0.1,0.2]"])
def test_a_value_neither_a_number_nor_auto_is_refused_in_one_line(value: str):
    with pytest.raises(CliError) as err:
        problems("train", ["dataset=d.hdf5", f"action_noise_std={value}"])
    assert str(err.value) == f"action_noise_std={value}: expected a number >= 0 or auto (default 0.0)"


def test_auto_and_numbers_are_taken_and_collect_stays_numeric(tmp_path, capsys):
    for value, want in (("auto", "auto"), ("0.3", 0.3), ("0", 0)):
        assert problems("train", ["dataset=d.hdf5", f"action_noise_std={value}"]).action_noise_std == want
    with pytest.raises(CliError, match="expected a number"):
        problems("collect", ["task=push-v3", "action_noise_std=auto"])
    demos = tmp_path / "d.hdf5"
    demos.write_bytes(b"")
    with pytest.raises(SystemExit) as err:  # the command's front door, before Hydra starts the run
        check_overrides("robosteer-train", "train", [f"dataset={demos}", "action_noise_std=-0.1", "out=o"])
    assert err.value.code == 2
    assert capsys.readouterr().err == (
        "robosteer-train: error: action_noise_std=-0.1: expected a number >= 0 or auto (default 0.0)\n"
    )


def test_help_states_what_auto_tries_and_its_budget():
    line = next(ln for ln in render("robosteer-train", "train", []).splitlines() if "action_noise_std=" in ln)
    config = auto_noise.AutoNoiseConfig()
    assert ", ".join(f"{s:g}" for s in config.candidates) in line  # the comment names the field's values
    assert f"{config.probe_steps}-step probe" in line
    assert f"at most {config.probe_steps * (len(config.candidates) - 1)} extra steps" in line


def test_the_advice_is_the_bases_own_training_command_with_auto(caplog):
    fixture = REPO / "tests" / "fixtures" / "runs_fa6b6cd" / "dp"
    record = read_checkpoint_config(fixture / "checkpoints" / "latest")
    assert steer.retrain_command(record, "runs/dp/") == (
        "robosteer-train policy=diffusion dataset=/tmp/tmp7j5vq0cw/demos/demos.hdf5 steps=4 "
        "action_noise_std=auto task=push-v3 out=runs/dp_auto"
    )
    pixels = {
        **record,
        "obs_keys": ["proprio", "image/corner"],
        "run": {"policy": {"backbone": "unet"}, "seed": 3},
    }
    assert steer.retrain_command(pixels, "b") == (
        "robosteer-train policy=diffusion backbone=unet obs=pixels 'cameras=[corner]' "
        "dataset=/tmp/tmp7j5vq0cw/demos/demos.hdf5 steps=4 action_noise_std=auto task=push-v3 seed=3 out=b_auto"
    )
    assert steer.retrain_command({**record, "dataset": ["a.hdf5", "b.hdf5"]}, "b") is None
    # robosteer-steer's check on a base the latent cannot move: its warning ends with that command
    base = _Shift(0.001)
    agent = steer_agent(base)
    cfg = OmegaConf.create(
        {
            "seed": 0,
            "base": "runs/dp",
            "steerability": {"states": 16, "latents": 4, "directions": 0, "episodes": 1},
        }
    )
    s = SimpleNamespace(cfg=cfg)
    offline = {
        "reward": torch.zeros(32),
        "obs/state": torch.linspace(-1, 1, 32).view(32, 1, 1).repeat(1, 2, 1),
    }
    with caplog.at_level(logging.WARNING, logger="robosteer.steer"):
        check = steer.steerability(s, agent, offline, lambda *a: {}, fixture / "checkpoints" / "latest")
    assert check.verdict == "not steerable"
    assert caplog.records[-1].getMessage().endswith(steer.retrain_command(record, "runs/dp"))


class _Shift(torch.nn.Module):
    noise_shape = (4, 1)

    class config:
        n_obs_steps, n_action_steps = 2, 2

    def __init__(self, c: float) -> None:
        super().__init__()
        self.c = c

    def sample(self, obs, noise=None):
        return obs["state"][:, -1, :1].unsqueeze(1) + self.c * noise


def steer_agent(base):
    from robosteer.policies.steering.dsrl import DSRL

    return DSRL(base, obs_dim=2, exec_slice=st.executed_rows(base))


@pytest.mark.parametrize(
    ("base", "final", "lift", "removed"),
    [(0.58, 0.74, 0.16, 0.16 / 0.42), (0.0, 0.5, 0.5, 0.5), (0.5, 0.25, -0.25, -0.5), (1.0, 1.0, 0.0, None)],
)
def test_failures_removed_is_the_share_of_the_bases_failures(base, final, lift, removed):
    got = steer.lift(base, final)
    assert got["lift"] == pytest.approx(lift)
    assert got["failures_removed"] == (None if removed is None else pytest.approx(removed))


def test_no_base_figure_gives_no_lift():
    assert steer.lift(None, 0.5) == {"lift": None, "failures_removed": None}
