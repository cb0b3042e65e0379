"""robosteer-value end to end: run directory (metrics.json, TensorBoard, checkpoint), the saved critic
reloads with its own normaliser, resume is bit-exact, and bad input is a clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import clirun
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "MUJOCO_GL": "egl"}
sys.path.insert(0, str(REPO / "tests" / "policies" / "value"))


def _run_cli(module: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", module, *args]
    return clirun.run(cmd, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)


def _value(*args: str) -> subprocess.CompletedProcess:
    return _run_cli("robosteer.scripts.value", *args)


TINY = [
    "calql.hidden=[16,16]",
    "batch_size=32",
    "log_every=10",
    "checkpoint_every=20",
    "calql.actor_warmup_steps=1",
]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[Path, Path]:
    from _valuekit import write_bandit

    root = tmp_path_factory.mktemp("value")
    a, b = root / "a.hdf5", root / "b.hdf5"
    write_bandit(a, 60, seed=0, env_name="task-a")
    write_bandit(b, 60, seed=1, env_name="task-b")
    return a, b


def test_value_run_directory_reload_and_exact_resume(data, tmp_path) -> None:
    from robosteer.policies.checkpoint import state_dict_hash
    from robosteer.policies.value import load_critic

    a, b = data
    full = _value("algo=calql", f"dataset=[{a},{b}]", "steps=40", *TINY, f"out={tmp_path / 'full'}")
    assert full.returncode == 0, full.stderr[-3000:]
    m = json.loads((tmp_path / "full" / "metrics.json").read_text())
    assert m["steps"] == 40 and m["tasks"] == ["task-a", "task-b"] and m["episodes"] == 0
    assert m["num_transitions"] == 120 and 0.0 <= m["final_calql_bound_rate"] <= 1.0
    assert any((tmp_path / "full" / "tb").iterdir()) and (tmp_path / "full" / "config.yaml").is_file()
    critic = load_critic(tmp_path / "full")
    assert critic.task_names == ["task-a", "task-b"] and critic.num_tasks == 2 and critic.action_steps == 1
    assert bool(critic.normalizer.fitted) and not any(p.requires_grad for p in critic.parameters())
    q = critic.score({"state": torch.zeros(3, 1, 2)}, torch.zeros(3, 1, 1), task_id=1)
    assert q.shape == (3,) and torch.isfinite(q).all()

    half = _value("algo=calql", f"dataset=[{a},{b}]", "steps=20", *TINY, f"out={tmp_path / 'half'}")
    assert half.returncode == 0, half.stderr[-3000:]
    again = _value("algo=calql", f"dataset=[{a},{b}]", "steps=20", *TINY, f"out={tmp_path / 'half'}")
    assert again.returncode != 0 and "resume=true" in again.stderr
    rest = _value(
        "algo=calql", f"dataset=[{a},{b}]", "steps=40", "resume=true", *TINY, f"out={tmp_path / 'half'}"
    )
    assert rest.returncode == 0, rest.stderr[-3000:]
    assert state_dict_hash(load_critic(tmp_path / "half")) == state_dict_hash(critic)


def test_iql_chunk_critic_and_clear_errors(data, tmp_path) -> None:
    a, _ = data
    ok = _value(
        "algo=iql",
        f"dataset={a}",
        "steps=10",
        "score=chunk",
        "n_action_steps=2",
        "iql.hidden=[8]",
        "batch_size=16",
        f"out={tmp_path / 'iql'}",
    )
    assert ok.returncode == 0, ok.stderr[-3000:]
    m = json.loads((tmp_path / "iql" / "metrics.json").read_text())
    assert m["algo"] == "iql" and m["score"] == "chunk" and "final_value_loss" in m
    bad = _value("algo=iql", f"dataset={a}", "score=middle", f"out={tmp_path / 'bad'}")
    assert bad.returncode != 0 and "score='middle' is not known" in bad.stderr
    missing = _value("algo=iql", f"dataset={tmp_path / 'nope.hdf5'}", f"out={tmp_path / 'bad2'}")
    assert missing.returncode != 0 and "no such file" in missing.stderr
    typo = _value("algo=iql", f"dataset={a}", "+iql.expectle=0.8", f"out={tmp_path / 'bad3'}")
    assert typo.returncode != 0 and "expectle" in typo.stderr and "expectile" in typo.stderr
    device = _value("algo=iql", f"dataset={a}", "device=tpu", f"out={tmp_path / 'bad4'}")
    assert device.returncode == 2 and "device=tpu is not known" in device.stderr
    assert "Traceback (most recent call last)" not in device.stderr


@pytest.mark.slow
def test_multitask_generalist_steered_through_robosteer_eval(tmp_path) -> None:
    """Two tasks -> one multi-task flow generalist + one critic; eval with steer=vgps K=4, and K=1 equals
    the unsteered policy episode for episode."""
    files = []
    for task in ("reach-v3", "button-press-topdown-v3"):
        p = _run_cli(
            "robosteer.scripts.collect",
            f"task={task}",
            "episodes=2",
            "progress=false",
            f"out={tmp_path / task}",
        )
        assert p.returncode == 0, p.stderr[-3000:]
        files.append(tmp_path / task / "demos.hdf5")
    ds = f"dataset=[{files[0]},{files[1]}]"
    tiny = [
        "policy.mlp_hidden_dim=32",
        "policy.mlp_n_blocks=1",
        "policy.time_embed_dim=16",
        "policy.horizon=8",
        "policy.n_action_steps=4",
        "policy.num_inference_steps=2",
        "batch_size=16",
        "lr_warmup_steps=1",
    ]
    p = _run_cli(
        "robosteer.scripts.train",
        "policy=flow",
        ds,
        "steps=3",
        "progress=false",
        *tiny,
        f"out={tmp_path / 'gen'}",
    )
    assert p.returncode == 0, p.stderr[-3000:]
    p = _value("algo=iql", ds, "steps=5", "iql.hidden=[16]", "batch_size=16", f"out={tmp_path / 'critic'}")
    assert p.returncode == 0, p.stderr[-3000:]
    common = [
        f"checkpoint={tmp_path / 'gen'}",
        "which=latest",
        "task=button-press-topdown-v3",
        "episodes=2",
        "num_envs=2",
        "max_episode_steps=12",
        "video=false",
        "progress=false",
    ]
    steer = ["steer=vgps", f"critic={tmp_path / 'critic'}"]
    runs = {}
    for name, extra in (
        ("plain", []),
        ("k1", [*steer, "samples=1"]),
        ("k4", [*steer, "samples=4"]),
        ("k4r1", [*steer, "samples=4", "replan_every=1"]),
    ):
        p = _run_cli("robosteer.scripts.evaluate", *common, *extra, f"out={tmp_path / name}")
        assert p.returncode == 0, p.stderr[-3000:]
        runs[name] = json.loads((tmp_path / name / "metrics.json").read_text())
    assert runs["k4"]["samples"] == 4 and runs["k4"]["score"] == "first" and runs["k4"]["plan_score_ms"] > 0
    assert runs["k1"]["returns"] == runs["plain"]["returns"]  # K = 1 is exactly the generalist
    assert runs["k4"]["returns"] != runs["plain"]["returns"]
    assert runs["k4"]["replan_every"] == 4 and runs["k4r1"]["replan_every"] == 1
    assert runs["k4r1"]["plans"] > runs["k4"]["plans"]  # a steered plan every env step, not every Ta = 4
    p = _run_cli(
        "robosteer.scripts.evaluate", *common, *steer, "replan_every=5", f"out={tmp_path / 'bad_every'}"
    )
    assert p.returncode != 0 and "replan_every=5" in p.stderr and "1..4" in p.stderr
    p = _run_cli("robosteer.scripts.evaluate", *common, "steer=vgps", f"out={tmp_path / 'bad'}")
    assert p.returncode != 0 and "needs critic=" in p.stderr


def test_vgps_from_pixels_critic_reads_the_base_embedding_and_steers_its_policy(pixel_base_run) -> None:
    """robosteer-value embed=<pixel run>: the critic trains on that base's embedding of its proprio + camera
    windows (no state), scores raw windows through it, and steers the pixel policy in robosteer-eval."""
    from robosteer.policies.checkpoint import CheckpointError, load_policy
    from robosteer.policies.steering.embedding import EMBED_KEY, BaseEmbedding, EmbeddedCritic
    from robosteer.policies.value import load_critic

    work, base = pixel_base_run
    demos = work / "demos" / "demos.hdf5"
    critic_run = work / "critic"
    p = _value("algo=calql", f"dataset={demos}", f"embed={base}", "steps=20", *TINY, f"out={critic_run}")
    assert p.returncode == 0, p.stderr[-3000:]
    critic = load_critic(critic_run)
    assert isinstance(critic, EmbeddedCritic) and critic.critic.obs_keys == [EMBED_KEY]
    policy = load_policy(base, which="ema")
    g, to = torch.Generator().manual_seed(0), policy.config.n_obs_steps
    obs = {
        "proprio": torch.randn(3, to, 4, generator=g),
        "image/corner": torch.randint(0, 256, (3, to, 32, 32, 3), generator=g, dtype=torch.uint8),
    }
    action = torch.rand(3, 1, 4, generator=g) * 2 - 1
    want = critic.critic.score(BaseEmbedding(policy).embed(obs), action)  # the base's embedding, by hand
    torch.testing.assert_close(critic.score(obs, action), want)

    common = [f"checkpoint={base}", "episodes=2", "num_envs=2", "max_episode_steps=12", "video=false"]
    steer = ["steer=vgps", f"critic={critic_run}", "samples=4", "progress=false", f"out={work / 'vgps'}"]
    p = _run_cli("robosteer.scripts.evaluate", *common, *steer)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads((work / "vgps" / "metrics.json").read_text())["episodes"] == 2

    cfg_path = critic_run / "checkpoints" / "latest" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    assert cfg["embed"]["base"] == str(base.resolve()) and cfg["embed"]["which"] == "ema"
    cfg["embed"]["hash"] = "0" * len(cfg["embed"]["hash"])  # another base's weights
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="weight hash differs"):
        load_critic(critic_run)
    bad = _value(
        "algo=calql", f"dataset={demos}", f"embed={work / 'nowhere'}", "steps=2", f"out={work / 'bad'}"
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
