"""``randomization=`` on the commands: Hydra group selection, recorded datasets, exact replay, eval metrics."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from robosteer.policies.data import open_dataset
from robosteer.scripts.collect import collect
from robosteer.scripts.common import CONFIG_DIR
from robosteer.scripts.evaluate import evaluate_policy, replay_dataset
from robosteer.sim.randomization import PARAM_KEYS


def _compose(name: str, *overrides: str):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose(config_name=name, overrides=list(overrides))


@pytest.mark.parametrize("command", ["collect", "train", "eval", "steer"])
def test_every_command_selects_the_group(command):
    assert _compose(command).randomization.name == "none"
    cfg = _compose(command, "randomization=default", "randomization.latency_s=0.05")
    assert cfg.randomization.name == "default" and cfg.randomization.latency_s == 0.05


def test_unknown_group_option_is_an_error():
    with pytest.raises(ConfigCompositionException, match="randomization"):
        _compose("eval", "randomization=strongest")


def test_randomized_collection_records_draws_and_replays_exactly(tmp_path):
    cfg = _compose("collect", "task=reach-v3", "episodes=2", "randomization=default", "progress=false")
    metrics = collect(cfg, tmp_path)
    assert metrics["episodes"] == 2
    path = tmp_path / "demos.hdf5"
    with open_dataset(path) as demos:
        recorded = demos.env_args["env_kwargs"]["randomization"]
        attrs = [demos.episode(n)["attrs"] for n in demos.demo_names]
    assert recorded["latency_s"] == 0.1 and recorded["friction"] == [0.7, 1.3]
    for a in attrs:
        assert set(PARAM_KEYS) <= set(a)
        assert 0.7 <= float(a["dr_friction"]) <= 1.3 and float(a["dr_latency_steps"]) == 8.0
    assert float(attrs[0]["dr_friction"]) != float(attrs[1]["dr_friction"])
    replay = replay_dataset(str(path), None, progress=False)  # rebuilt from env_args: same draws, same data
    assert replay["max_obs_abs_diff"] == 0.0 and replay["success_rate"] == 1.0


def test_evaluation_metrics_record_config_and_draws(tmp_path):
    cfg = _compose(
        "eval",
        "policy=expert",
        "task=reach-v3",
        "episodes=2",
        "num_envs=2",
        "max_episode_steps=20",
        "video=false",
        "progress=false",
        "randomization=strong",
    )
    metrics = evaluate_policy(cfg, tmp_path)
    assert metrics["randomization"]["config"]["action_noise_std"] == cfg.randomization.action_noise_std
    assert set(metrics["randomization"]["params"]) == set(PARAM_KEYS)
    assert len(metrics["episode_params"]) == 2
    json.dumps(metrics["randomization"])  # JSON-able as written into metrics.json


def test_training_evaluations_run_under_randomization(tmp_path):
    from robosteer import sim
    from robosteer.scripts.train import build_eval_fn

    cfg = _compose(
        "train",
        "dataset=unused.hdf5",
        "task=reach-v3",
        "eval_episodes=2",
        "eval_envs=1",
        "eval_video_episodes=0",
        "randomization=default",
    )
    eval_fn = build_eval_fn(cfg, tmp_path, {"obs": {"state": {"shape": [39], "type": "low_dim"}}})
    try:
        metrics = eval_fn(sim.ScriptedExpert("reach-v3"), 0)
    finally:
        eval_fn.close()
    assert metrics["episodes"] == 2
    assert metrics["randomization_params"]["dr_latency_steps"]["mean"] == 8.0
