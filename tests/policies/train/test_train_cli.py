"""robosteer-train end to end on the real policies and dataset reader: the Hydra CLI contract, the run
directory, every policy config group building its policy, exact resume through the CLI, evaluation wiring."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import clirun
import numpy as np
import pytest
import torch
import yaml
from hydra import compose, initialize_config_dir

from robosteer.policies.checkpoint import load_checkpoint, load_policy, state_dict_hash

torch.set_num_threads(1)
REPO = Path(__file__).resolve().parents[3]
CONFIG_DIR = str(REPO / "configs")
SMALL = [
    "policy.mlp_hidden_dim=32",
    "policy.mlp_n_blocks=1",
    "policy.time_embed_dim=16",
    "batch_size=16",
    "log_every=2",
    "checkpoint_every=3",
    "progress=false",
    "lr_warmup_steps=2",
]


@pytest.fixture(scope="module")
def demos(tiny_state_demos: Path) -> Path:
    return tiny_state_demos  # tests/conftest.py


def _cfg(*overrides: str):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose("train", overrides=list(overrides))


def test_cli_writes_run_dir_without_chdir(tmp_path, demos):
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "robosteer.scripts.train",
        "policy=diffusion",
        f"dataset={demos}",
        "steps=5",
        "out=runs/dp",
        "seed=1",
        *SMALL,
    ]
    proc = clirun.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "runs" / "dp"  # relative `out` resolved against the caller's cwd: Hydra did not chdir
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert cfg["policy"]["name"] == "diffusion" and cfg["steps"] == 5 and cfg["out"] == "runs/dp"
    assert cfg["policy"]["mlp_hidden_dim"] == 32 and "${" not in (run / "config.yaml").read_text()
    m = json.loads((run / "metrics.json").read_text())
    for key in (
        "final_loss",
        "steps",
        "wall_time_s",
        "samples_per_s",
        "episodes",
        "env_steps",
        "success_rate",
    ):
        assert key in m, key
    assert m["steps"] == 5 and m["episodes"] == 0 and m["success_rate"] is None and m["policy"] == "diffusion"
    assert list((run / "tb").glob("events.out.tfevents.*"))
    policy = load_policy(run)
    assert policy.task == "push-v3" and not policy.training
    obs = {"state": torch.zeros(2, 2, 39)}
    noise = torch.randn(2, *policy.noise_shape)
    assert torch.equal(policy.sample(obs, noise=noise), policy.sample(obs, noise=noise))
    ckpt = load_checkpoint(run / "checkpoints" / "latest")
    assert ckpt.config["policy"]["config"]["mlp_hidden_dim"] == 32 and ckpt.config["task"] == "push-v3"


@pytest.mark.parametrize("name", ["diffusion", "flow", "streaming"])
def test_every_policy_group_builds_and_trains(tmp_path, demos, name):
    from robosteer.scripts.train import run

    cfg = _cfg(f"policy={name}", f"dataset={demos}", "steps=3", f"out={tmp_path / name}", *SMALL)
    metrics = run(cfg)
    assert metrics["steps"] == 3 and np.isfinite(metrics["final_loss"])
    assert load_policy(tmp_path / name, which="latest").get_config()["mlp_hidden_dim"] == 32


def test_resume_through_cli_is_exact(tmp_path, demos):
    from robosteer.scripts.train import run

    base = ["policy=flow", f"dataset={demos}", "steps=8", *SMALL]
    run(_cfg(*base, f"out={tmp_path / 'full'}"))
    run(_cfg(*base, f"out={tmp_path / 'split'}", "stop_at_step=4"))
    with pytest.raises(FileExistsError, match="resume=true"):
        run(_cfg(*base, f"out={tmp_path / 'split'}"))
    m = run(_cfg(*base, f"out={tmp_path / 'split'}", "resume=true"))
    assert m["steps"] == 8 and m["resumed_from_step"] == 4
    a = load_checkpoint(tmp_path / "full" / "checkpoints" / "latest")
    b = load_checkpoint(tmp_path / "split" / "checkpoints" / "latest")
    for k in ("model", "ema"):
        assert state_dict_hash(a.modules[k]) == state_dict_hash(b.modules[k]), k


def test_evaluation_in_sim_writes_best(tmp_path, demos):
    pytest.importorskip("metaworld")
    from robosteer.scripts.train import run

    cfg = _cfg(
        "policy=flow",
        f"dataset={demos}",
        "steps=2",
        f"out={tmp_path / 'ev'}",
        "task=push-v3",
        "eval_episodes=1",
        "eval_envs=1",
        "eval_video_episodes=0",
        *SMALL,
    )
    metrics = run(cfg)
    assert metrics["episodes"] == 1 and metrics["env_steps"] > 0 and metrics["success_rate"] in (0.0, 1.0)
    best = load_checkpoint(tmp_path / "ev" / "checkpoints" / "best")
    assert best.config["eval"]["episodes"] == 1 and best.config["step"] == 2


def test_logger_wandb_offline_records_scalars_the_eval_video_and_the_config(tmp_path, demos, monkeypatch):
    """``WANDB_MODE=offline robosteer-train logger=wandb``: a W&B run in the run directory with the training
    and evaluation curves, the evaluation's video and the resolved config (no network, no account)."""
    pytest.importorskip("metaworld")
    pytest.importorskip("wandb")
    from robosteer.scripts.train import run

    out = tmp_path / "wb"
    cfg = _cfg(
        "policy=flow",
        f"dataset={demos}",
        "steps=2",
        f"out={out}",
        "task=push-v3",
        "eval_episodes=1",
        "eval_envs=1",
        "eval_video_episodes=1",
        "logger=wandb",
        *SMALL,
    )
    monkeypatch.setenv("WANDB_MODE", "offline")
    metrics = run(cfg)
    assert metrics["episodes"] == 1
    run_id = (out / "wandb_id").read_text().strip()
    (record,) = out.glob(f"wandb/offline-run-*-{run_id}/run-{run_id}.wandb")
    data = record.read_bytes()
    for text in (b"train/loss", b"eval/success_rate", b"eval/video", b"push-v3", b"flow"):
        assert text in data, text
    assert list(out.glob(f"wandb/offline-run-*-{run_id}/files/media/videos/eval/video_*.mp4"))
