"""robosteer-steer end to end through its CLI: a tiny trained base, DSRL-NA with offline demonstrations,
the run directory, the frozen base, robosteer-eval on the steering run, and clear errors on bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import clirun
import numpy as np
import pytest
import torch

from robosteer.policies.checkpoint import CheckpointError, load_policy, state_dict_hash

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "MUJOCO_GL": "egl"}
TINY_BASE = [
    "policy.mlp_hidden_dim=32",
    "policy.mlp_n_blocks=1",
    "policy.time_embed_dim=16",
    "policy.horizon=8",
    "policy.n_action_steps=4",
    "policy.num_inference_steps=2",
    "batch_size=16",
    "progress=false",
    "lr_warmup_steps=1",
]
TINY_STEER = [
    "env_steps=96",
    "num_envs=2",
    "eval_envs=2",
    "max_episode_steps=16",
    "dsrl.hidden=[32,32]",
    "dsrl.batch_size=16",
    "dsrl.noise_critic_steps=1",
    "run.warmup_chunks=8",
    "run.eval_every=48",
    "run.eval_episodes=2",
    "run.checkpoint_every=48",
    "run.log_every=32",
    "run.progress=false",
]


def _run(module: str, *args: str, cwd: Path, input: str | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", module, *args]
    return clirun.run(cmd, cwd=cwd, env=ENV, input=input, capture_output=True, text=True, timeout=300)


def _eval(run: str, out: str, cwd: Path, *extra: str) -> subprocess.CompletedProcess:
    """robosteer-eval of a steering run for 2 short episodes."""
    args = ["episodes=2", "num_envs=2", "max_episode_steps=16", "video=false", "progress=false", *extra]
    return _run("robosteer.scripts.evaluate", f"checkpoint={run}", *args, f"out={out}", cwd=cwd)


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(work dir, a reach-v3 dataset of 2 expert demos, a tiny diffusion base trained on it)."""
    work = tmp_path_factory.mktemp("steer")
    p = _run(
        "robosteer.scripts.collect", "task=reach-v3", "episodes=2", "progress=false", "out=demos", cwd=work
    )
    assert p.returncode == 0, p.stderr[-3000:]
    demos = work / "demos" / "demos.hdf5"
    p = _run(
        "robosteer.scripts.train",
        "policy=diffusion",
        f"dataset={demos}",
        "steps=3",
        "out=base",
        *TINY_BASE,
        cwd=work,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return work, demos, work / "base"


def test_steer_cli_na_with_offline_demos_then_eval_the_steered_policy(setup):
    work, demos, base = setup
    before = state_dict_hash(load_policy(base, which="best"))
    p = _run(
        "robosteer.scripts.steer",
        f"base={base}",
        "variant=na",
        f"offline={demos}",
        "out=dsrl",
        *TINY_STEER,
        cwd=work,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    run = work / "dsrl"
    m = json.loads((run / "metrics.json").read_text())
    assert m["task"] == "reach-v3" and m["variant"] == "na" and m["env_steps"] >= 96 and m["updates"] > 0
    assert m["offline_transitions"] > 0 and m["base_hash"] == before
    assert 0.0 <= m["base_success_rate"] <= 1.0 and 0.0 <= m["success_rate"] <= 1.0
    assert m["history"][0]["env_steps"] == 0.0 and len(m["history"]) >= 2
    assert (run / "plots" / "learning_curve.png").stat().st_size > 1000
    assert any((run / "tb").iterdir())
    assert "steered success" in p.stdout and "failures removed" in p.stdout
    assert m["lift"] == pytest.approx(m["success_rate"] - m["base_success_rate"])
    # the share of the base's failures removed (None: a base that never fails)
    if m["base_success_rate"] < 1.0:
        assert m["failures_removed"] == pytest.approx(m["lift"] / (1 - m["base_success_rate"]))
    else:
        assert m["failures_removed"] is None
    assert m["steerability"]["states"] == min(128, m["offline_transitions"])  # checked before training
    assert m["steerability"]["ratio"] > 0
    best = json.loads((run / "checkpoints" / "best" / "config.json").read_text())
    scores = [h["success_rate"] for h in m["history"]]
    assert best["score"]["success_rate"] == max(scores) == m["best_success_rate"]  # the best periodic eval
    assert state_dict_hash(load_policy(base, which="best")) == before  # the base's files are untouched

    p = _eval("dsrl", "eval", work)
    assert p.returncode == 0, p.stderr[-3000:]
    ev = json.loads((work / "eval" / "metrics.json").read_text())
    assert ev["task"] == "reach-v3" and ev["episodes"] == 2


def test_check_only_measures_the_base_and_trains_nothing(setup):
    """The check alone, on the base's own dataset (offline=auto, the default), with its figures and verdict."""
    work, demos, base = setup
    fast = ["steerability.directions=2", "steerability.episodes=2", "max_episode_steps=16", "eval_envs=2"]
    p = _run("robosteer.scripts.steer", f"base={base}", "check_only=true", *fast, "out=check", cwd=work)
    assert p.returncode == 0, p.stderr[-3000:]
    m = json.loads((work / "check" / "metrics.json").read_text())
    assert m["offline"] == str(demos)  # the dataset the base was trained on, from its checkpoint
    check = m["steerability"]
    assert m["check_only"] and check["verdict"] in ("steerable", "weakly steerable", "not steerable")
    assert len(check["direction_success"]) == 2 and all(0.0 <= x <= 1.0 for x in check["direction_success"])
    assert f"ratio {check['ratio']:.2f}" in p.stdout + p.stderr  # the verdict line on the console
    assert not (work / "check" / "checkpoints").exists()  # no training, no base evaluation


def test_steered_policy_refuses_a_changed_base(setup, tmp_path):
    import shutil

    from robosteer.policies.loading import load, run_kind

    work, _, base = setup
    p = _run(
        "robosteer.scripts.steer",
        f"base={base}",
        "variant=sac",
        "out=dsrl_sac",
        "eval_base=false",
        *TINY_STEER,
        cwd=work,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    run = work / "dsrl_sac"
    assert run_kind(run) == "dsrl" and run_kind(base) == "policy"
    policy = load(run, which="latest")
    obs = {"state": np.zeros((1, 39), np.float32)}
    assert policy.act(obs).shape == (1, 4)
    cfg_path = run / "checkpoints" / "latest" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    recorded = dict(cfg)
    cfg["base"] = str(
        tmp_path / "elsewhere" / Path(recorded["base"]).name
    )  # runs/ moved: base beside the run
    cfg_path.write_text(json.dumps(cfg))
    assert load(run, which="latest").act(obs).shape == (1, 4)  # found beside the run, its hash checked
    cfg = dict(recorded)
    cfg["base_hash"] = "0" * 64  # as if the base had been retrained in place
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="not the one this actor was trained on"):
        load(run, which="latest")
    moved = tmp_path / "gone"
    cfg["base"] = str(moved)
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="no longer exists"):
        load(run, which="latest")
    shutil.rmtree(run)


def test_plain_sac_from_scratch_runs_and_evaluates(setup):
    work, _, _ = setup
    p = _run(
        "robosteer.scripts.steer",
        "base=scratch",
        "task=reach-v3",
        "variant=sac",
        "out=scratch",
        *TINY_STEER,
        cwd=work,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    m = json.loads((work / "scratch" / "metrics.json").read_text())
    assert m["task"] == "reach-v3" and m["variant"] == "sac" and m["updates"] > 0
    p = _eval("scratch", "eval_scratch", work, "deterministic=false", "which=latest")
    assert p.returncode == 0, p.stderr[-3000:]


def test_bad_input_is_a_clear_error(setup):
    work, demos, base = setup
    p = _run(
        "robosteer.scripts.steer",
        f"base={base}",
        "variant=sac",
        f"offline={demos}",
        "out=bad",
        *TINY_STEER,
        cwd=work,
    )
    assert p.returncode != 0 and "needs variant=na" in p.stderr
    p = _run("robosteer.scripts.steer", "base=nowhere", "out=bad2", *TINY_STEER, cwd=work)
    assert p.returncode != 0 and "nowhere" in p.stderr
    p = _run("robosteer.scripts.steer", f"base={base}", "variant=nah", "out=bad3", *TINY_STEER, cwd=work)
    assert p.returncode != 0 and "'na'" in p.stderr
    p = _run(
        "robosteer.scripts.steer",
        "base=scratch",
        "task=reach-v3",
        "variant=na",
        "out=bad4",
        *TINY_STEER,
        cwd=work,
    )
    assert p.returncode != 0 and "needs variant=sac" in p.stderr


def test_a_bad_device_is_a_clear_error(setup):
    """A typo in device= fails before anything is loaded."""
    work, _, base = setup
    p = _run("robosteer.scripts.steer", f"base={base}", "device=tpu", "out=bad_device", *TINY_STEER, cwd=work)
    assert (
        p.returncode != 0
        and "device=tpu is not known" in p.stderr
        and "cpu | cuda | cuda:N | auto" in p.stderr
    )


# Slow: on a CPU machine device=auto is the default run of test_steer_cli_na_... again; on a GPU it is cuda.
@pytest.mark.slow
def test_steer_device_auto_runs_and_its_run_evaluates_on_the_cpu(setup):
    """device=auto is cuda where there is one, cpu here; the run then loads on the CPU for evaluation."""
    work, _, base = setup
    p = _run(
        "robosteer.scripts.steer", f"base={base}", "device=auto", "out=auto_device", *TINY_STEER, cwd=work
    )
    assert p.returncode == 0, p.stderr[-3000:]
    m = json.loads((work / "auto_device" / "metrics.json").read_text())
    assert m["updates"] > 0 and m["success_rate"] is not None
    p = _eval("auto_device", "eval_auto_device", work, "which=latest")  # loads on CPU, whatever it ran on
    assert p.returncode == 0, p.stderr[-3000:]


TINY_EXPO = [
    "algo=expo",
    "env_steps=96",
    "num_envs=2",
    "eval_envs=2",
    "max_episode_steps=16",
    "expo.hidden=[32,32]",
    "expo.batch_size=16",
    "expo.num_samples=3",
    "expo.num_edits=2",
    "run.warmup_chunks=8",
    "run.eval_every=48",
    "run.eval_episodes=2",
    "run.checkpoint_every=48",
    "run.log_every=32",
    "run.progress=false",
]


def test_steer_cli_expo_with_offline_demos_then_eval_and_resume(setup):
    work, demos, base = setup
    before = state_dict_hash(load_policy(base, which="best"))
    p = _run("robosteer.scripts.steer", f"base={base}", f"offline={demos}", "out=expo", *TINY_EXPO, cwd=work)
    assert p.returncode == 0, p.stderr[-3000:]
    run = work / "expo"
    m = json.loads((run / "metrics.json").read_text())
    assert m["algo"] == "expo" and m["variant"] == "expo-chunk" and m["env_steps"] >= 96 and m["updates"] > 0
    assert m["offline_transitions"] > 0 and m["base_hash"] == before
    assert m["history"][0]["env_steps"] == 0.0 and len(m["history"]) >= 2
    assert (run / "plots" / "learning_curve.png").stat().st_size > 1000 and any((run / "tb").iterdir())
    cfg = json.loads((run / "checkpoints" / "latest" / "config.json").read_text())
    assert cfg["kind"] == "expo" and cfg["expo"]["edit_scale"] == 0.05  # β from edit_scales.default
    assert state_dict_hash(load_policy(base, which="best")) == before  # EXPO trains its own copy

    p = _run(
        "robosteer.scripts.steer", f"base={base}", f"offline={demos}", "out=expo", *TINY_EXPO, "env_steps=128",
        "resume=true", cwd=work,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    m2 = json.loads((run / "metrics.json").read_text())
    assert m2["env_steps"] >= 128 and m2["updates"] > m["updates"]
    assert m2["history"][: len(m["history"])] == m["history"]

    p = _eval("expo", "eval_expo", work)
    assert p.returncode == 0, p.stderr[-3000:]
    ev = json.loads((work / "eval_expo" / "metrics.json").read_text())
    assert ev["task"] == "reach-v3" and ev["episodes"] == 2 and ev["steered"] is True
    from robosteer.policies.loading import load
    from robosteer.policies.steering.expo import OTFPolicy

    policy = load(
        run, which="latest"
    )  # base + edit + OTF, the base being the run's imitation-trained EMA copy
    assert isinstance(policy, OTFPolicy) and policy.agent.actor is not None
    assert state_dict_hash(policy.agent.base_ema) != before
    assert policy.act({"state": np.zeros((1, 39), np.float32)}).shape == (1, 4)


@pytest.mark.slow  # ~40 s: the default suite covers RLPD and single-step EXPO in-process (test_expo.py)
def test_steer_cli_expo_single_step_rlpd_and_bad_input(setup):
    work, demos, base = setup
    p = _run(
        "robosteer.scripts.steer", f"base={base}", f"offline={demos}", "out=rlpd", *TINY_EXPO, "expo.policy=sac",
        "expo.backup_entropy=true", "expo.action=single", "eval_base=false", cwd=work,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    m = json.loads((work / "rlpd" / "metrics.json").read_text())
    assert m["variant"] == "rlpd" and m["updates"] > 0
    p = _run(
        "robosteer.scripts.steer", f"base={base}", "out=bad_expo", *TINY_EXPO, "expo.policy=otf_x", cwd=work
    )
    assert p.returncode != 0 and "'otf'" in p.stderr
    p = _run(
        "robosteer.scripts.steer", "base=scratch", "task=reach-v3", "out=bad_expo2", *TINY_EXPO, cwd=work
    )
    assert p.returncode != 0 and "algo=expo needs base=" in p.stderr


# openpi's wire is the same loop over another codec (tests/real pins the codec): slow, to keep the suite short
@pytest.mark.parametrize("protocol", ["robosteer", pytest.param("openpi", marks=pytest.mark.slow)])
def test_dsrl_steers_a_served_base(setup, protocol):
    """robosteer-steer base=ws://...: the served base decodes DSRL's latents as the local base does (to float
    rounding: the server computes in this process), the run trains and records the URL, and robosteer-eval of
    it dials the server again; with the server gone, that is one line."""
    from robosteer.policies.checkpoint import load_checkpoint
    from robosteer.policies.steering.served import served_base
    from robosteer.real.server import PolicyServer, load_backend

    work, demos, base = setup
    server = PolicyServer(load_backend(base, which="ema"), port=0, protocol=protocol).start()
    try:
        local, served = load_policy(base, which="ema"), served_base(server.url, protocol)
        gen = torch.Generator().manual_seed(0)
        obs = {"state": torch.randn(300, local.config.n_obs_steps, 39, generator=gen)}  # > one request's rows
        noise = torch.randn(300, *local.noise_shape, generator=gen)
        with torch.no_grad():
            gap = (served.sample(obs, noise) - local.sample(obs, noise)).abs().max()
        served.close()
        assert float(gap) < 1e-5
        p = _run("robosteer.scripts.steer", f"base={server.url}", f"protocol={protocol}", "variant=na",
                 f"offline={demos}", "task=reach-v3", *TINY_STEER, f"out=served_{protocol}", cwd=work)  # fmt: skip
        assert p.returncode == 0, p.stderr[-3000:]
        e = _eval(f"served_{protocol}", f"served_{protocol}_eval", work)
        assert e.returncode == 0, e.stderr[-3000:]
    finally:
        server.stop()
    m = json.loads((work / f"served_{protocol}" / "metrics.json").read_text())
    assert m["base_hash"] is None and m["updates"] > 0 and m["env_steps"] >= 96 and len(m["history"]) >= 2
    assert 0.0 <= m["base_success_rate"] <= 1.0  # the served policy acting as served: the "before" figure
    agent = load_checkpoint(work / f"served_{protocol}" / "checkpoints" / "latest", names=["agent"])
    assert agent.config["base"] == server.url and agent.config["base_protocol"] == protocol
    gone = _eval(f"served_{protocol}", f"served_{protocol}_gone", work)
    assert gone.returncode == 2 and f"steers the policy served at {server.url}" in gone.stderr


def test_a_served_base_that_cannot_be_steered_is_one_line(setup):
    work = setup[0]
    p = _run("robosteer.scripts.steer", "base=ws://127.0.0.1:9", "task=reach-v3", "out=nowhere", *TINY_STEER,
             cwd=work)  # fmt: skip
    assert p.returncode == 2 and "cannot connect to policy server ws://127.0.0.1:9" in p.stderr
    p = _run("robosteer.scripts.steer", "algo=expo", "base=ws://127.0.0.1:9", "out=nowhere2", cwd=work)
    assert p.returncode == 2 and "a served base is steered by algo=dsrl" in p.stderr


def test_dsrl_steers_a_pixel_base_through_its_embedding_then_eval_acts_from_pixels(pixel_base_run):
    """No state anywhere: the learner reads the base's embedding of proprio + camera windows, online and in
    the offline demos (auto: the base's dataset), and the steered run evaluates from pixels."""
    from robosteer.policies.steering.embedding import EMBED_KEY

    work, base = pixel_base_run
    before = state_dict_hash(load_policy(base, which="best"))
    fast = ["steerability.directions=0", "steerability.states=16", "run.eval_every=96"]
    p = _run("robosteer.scripts.steer", f"base={base}", "out=dsrl", *TINY_STEER, *fast, cwd=work)
    assert p.returncode == 0, p.stderr[-3000:]
    m = json.loads((work / "dsrl" / "metrics.json").read_text())
    assert m["task"] == "push-v3" and m["env_steps"] >= 96 and m["updates"] > 0 and m["base_hash"] == before
    assert m["offline_transitions"] > 0 and m["steerability"]["ratio"] > 0
    config = json.loads((work / "dsrl" / "checkpoints" / "latest" / "config.json").read_text())
    meta = load_policy(base, which="best").shape_meta
    assert config["obs_keys"] == [EMBED_KEY] and "state" not in meta["obs"]
    to = load_policy(base, which="best").config.n_obs_steps
    assert config["obs_dim"] == to * (64 + 4)  # To · (CNN features + proprio): the base's own condition
    p = _eval("dsrl", "eval", work)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads((work / "eval" / "metrics.json").read_text())["episodes"] == 2


def test_dsrl_from_pixels_with_an_asymmetric_critic_reads_the_state_in_its_critics_only(pixel_base_run):
    """critic_obs=state: the critics read the simulator's state window (online and in the offline demos), the
    actor the base's embedding; evaluation acts from pixels alone (its env renders no state)."""
    from robosteer.policies.checkpoint import load_checkpoint
    from robosteer.policies.steering.embedding import EMBED_KEY

    work, base = pixel_base_run
    fast = ["steerability.directions=0", "steerability.states=16", "run.eval_every=96", "eval_base=false"]
    p = _run("robosteer.scripts.steer", f"base={base}", "critic_obs=state", "out=asym", *TINY_STEER, *fast,
             cwd=work)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert "critic_obs=state: the critics read the simulator's privileged state" in p.stdout + p.stderr
    m = json.loads((work / "asym" / "metrics.json").read_text())
    assert m["env_steps"] >= 96 and m["updates"] > 0 and m["offline_transitions"] > 0
    ck = load_checkpoint(work / "asym" / "checkpoints" / "latest", names=["agent", "buffer"])
    to = load_policy(base, which="best").config.n_obs_steps
    assert ck.config["obs_keys"] == [EMBED_KEY] and ck.config["critic_keys"] == ["state"]
    assert ck.config["critic_obs_dim"] == to * 39 and ck.config["obs_dim"] == to * (64 + 4)
    weights = ck.modules["agent"]
    assert weights["actor.trunk.0.weight"].shape[1] == to * (64 + 4)  # (out, in): the embedding
    exec_dim, latent_dim = 4 * 4, 8 * 4  # Ta·Da, Tp·Da of the tiny base
    assert weights["critic.net.0.weight"].shape[1] == to * 39 + exec_dim  # (E, in, out): state + chunk
    assert weights["noise_critic.net.0.weight"].shape[1] == to * 39 + latent_dim  # state + latent
    assert {"data/obs/state", f"data/obs/{EMBED_KEY}"} <= set(ck.modules["buffer"])  # the replay keeps both
    p = _eval("asym", "asym_eval", work)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads((work / "asym_eval" / "metrics.json").read_text())["episodes"] == 2


def test_dsrl_from_pixels_with_its_own_encoder_keeps_uint8_images_and_trains_a_copy(pixel_base_run):
    """actor_obs=encoder: the actor reads the raw windows through a copy of the base's encoder that its loss
    trains; the replay keeps the images as uint8 beside the embedding the critics read and the base decodes
    from; the base's weights stay as they were; evaluation rebuilds the encoder and acts from pixels."""
    from robosteer.policies.checkpoint import load_checkpoint
    from robosteer.policies.steering.embedding import EMBED_KEY

    work, base = pixel_base_run
    policy = load_policy(base, which="best")
    before = state_dict_hash(policy)
    fast = ["steerability.directions=0", "steerability.states=16", "run.eval_every=96", "eval_base=false"]
    p = _run("robosteer.scripts.steer", f"base={base}", "actor_obs=encoder", "run.buffer_size=2000", "out=own",
             *TINY_STEER, *fast, cwd=work)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    m = json.loads((work / "own" / "metrics.json").read_text())
    assert m["updates"] > 0 and m["offline_transitions"] > 0 and m["base_hash"] == before
    ck = load_checkpoint(work / "own" / "checkpoints" / "latest", names=["agent", "buffer"])
    raw = list(policy.shape_meta["obs"])
    cam = next(k for k in raw if k.startswith("image/"))
    assert ck.config["actor_obs"] == "encoder" and ck.config["obs_keys"] == raw
    assert ck.config["critic_keys"] == [EMBED_KEY] and ck.config["obs_dim"] == policy.obs_encoder.out_dim
    buffer, weights = ck.modules["buffer"], ck.modules["agent"]
    assert buffer[f"data/obs/{cam}"].dtype == torch.uint8 and f"data/obs/{EMBED_KEY}" in buffer
    name = next(k for k in weights if k.startswith("actor.encoder.encoder.") and k.endswith("weight"))
    trained, stock = weights[name], policy.state_dict()["obs_" + name.removeprefix("actor.encoder.")]
    assert trained.shape == stock.shape and not torch.equal(trained, stock)  # the copy trained
    from robosteer.policies.steering.dsrl import load_steered_policy

    steered = load_steered_policy(str(work / "own"))  # what robosteer-eval and deployment act with
    acting = steered.agent.acting_actor.encoder.encoder.state_dict()
    assert torch.equal(
        acting[name.removeprefix("actor.encoder.encoder.")], weights[name.replace("actor.", "actor_avg.", 1)]
    )
    window = {k: buffer[f"data/obs/{k}"][:2] for k in raw}  # raw windows (uint8 images) as the env gives them
    chunk = steered.sample(window)
    assert chunk.shape == (2, *policy.noise_shape) and torch.isfinite(chunk).all()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["critic_obs=cheat"], "critic_obs='cheat' is not known: expected one of ['policy', 'state']"),
        (["critic_obs=state"], "critic_obs=state: this base reads the state already"),
        (["critic_obs=state", "robot=sim_twin"], "critic_obs=state reads the simulator's privileged state"),
        (["actor_obs=cnn"], "actor_obs='cnn' is not known: expected one of ['embedding', 'encoder']"),
        (["actor_obs=encoder"], "actor_obs=encoder trains a copy of a pixel base's image encoder"),
    ],
)
def test_critic_and_actor_obs_are_refused_in_one_line_where_they_mean_nothing(setup, extra, message):
    work, _, base = setup
    out = "out=refused/" + "_".join(extra).replace("=", "-")  # a refusal after Hydra starts leaves its log
    p = _run("robosteer.scripts.steer", f"base={base}", *extra, "steerability.directions=0", out, cwd=work)
    assert p.returncode == 2 and message in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr


def test_expo_steers_a_pixel_base_through_its_frozen_embedding_then_eval_acts_from_pixels(pixel_base_run):
    """EXPO from pixels: critics, edit actor, replay and the base's imitation windows (demos and online) hold
    the base's embedding; the base's denoiser keeps imitating while its encoder stays the frozen base's."""
    from robosteer.policies.loading import load
    from robosteer.policies.steering.embedding import EMBED_KEY

    work, base = pixel_base_run
    frozen = load_policy(base, which="best")
    before = state_dict_hash(frozen)
    fast = [a for a in TINY_EXPO if not a.startswith(("run.eval_every", "max_episode_steps"))]
    p = _run(
        "robosteer.scripts.steer", f"base={base}", "out=expo", *fast, "run.eval_every=96", "max_episode_steps=24",
        "eval_base=false", cwd=work,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    m = json.loads((work / "expo" / "metrics.json").read_text())
    assert m["variant"] == "expo-chunk" and m["env_steps"] >= 96 and m["updates"] > 0
    assert m["offline_transitions"] > 0 and m["base_hash"] == before  # the base's own demos, embedded
    config = json.loads((work / "expo" / "checkpoints" / "latest" / "config.json").read_text())
    assert config["obs_keys"] == [EMBED_KEY] and config["obs_dim"] == frozen.obs_encoder.out_dim
    policy = load(work / "expo", which="latest")
    trained = policy.agent.base.base  # the online copy: its denoiser moved, its encoder did not
    assert state_dict_hash(trained.model) != state_dict_hash(frozen.model)
    assert state_dict_hash(trained.obs_encoder) == state_dict_hash(frozen.obs_encoder)
    p = _eval("expo", "expo_eval", work)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads((work / "expo_eval" / "metrics.json").read_text())["episodes"] == 2


TWIN = [
    "robot=sim_twin",
    "robot.driver.rate_hz=160",  # twice Meta-World's real time: a short test
    "robot.driver.max_episode_steps=40",
    "runtime.obs_timeout_s=5.0",  # CI's two busy cores once starved the twin's process for over 1 s
    "offline=none",
    "eval_base=false",
    "steerability.directions=0",
    "steerability.states=8",
    "dsrl.hidden=[32,32]",
    "dsrl.batch_size=16",
    "dsrl.noise_critic_steps=1",
    "run.warmup_chunks=8",
    "run.eval_every=100000",
    "run.eval_episodes=2",
    "eval_envs=2",
    "max_episode_steps=16",
    "run.progress=false",
]


def _twin_pids(parent: int) -> list[int]:
    """The sim twin's process: a multiprocessing child of ``parent`` (not its resource tracker)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(fields[1]) == parent and "multiprocessing" in cmd and "resource_tracker" not in cmd:
            pids.append(int(stat.parent.name))
    return pids


def test_dsrl_steers_on_the_sim_twin_survives_its_kill_and_resumes(setup):
    """robot=sim_twin: deploy's control loop acts, each episode is recorded as it ends and the learner is
    saved after it; kill -9 of the twin stops the run (exit 1, one line) with nothing recorded lost, and
    resume=true continues into a new session file until the budget; the base never changes."""
    import signal
    import time

    import h5py

    work, _, base = setup
    before = state_dict_hash(load_policy(base, which="ema"))
    cmd = [sys.executable, "-m", "robosteer.scripts.steer", f"base={base}", *TWIN, "out=twin"]
    proc = subprocess.Popen([*cmd, "env_steps=100000"], cwd=work, env=ENV, stderr=subprocess.PIPE, text=True)
    run = work / "twin"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (run / "checkpoints" / "latest").exists():
        time.sleep(0.2)  # the first episode ended and was saved
    twins = _twin_pids(proc.pid)
    assert twins, "the sim twin process was not found"
    os.kill(twins[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err[-2000:]
    fault = err.strip().splitlines()[-1]
    assert fault.startswith("robosteer-steer: robot fault:") and "resume=true" in fault, err[-2000:]
    with h5py.File(run / "episodes" / "session_000.hdf5") as f:
        first = len(f["data"])
        assert f["data"].attrs["fps"] == pytest.approx(
            80.0
        )  # the twin's simulator rate: an export needs no fps=
    assert first >= 1
    saved = json.loads((run / "checkpoints" / "latest" / "config.json").read_text())
    assert saved["robot"] == "sim_twin"

    p = clirun.run(
        [*cmd, "env_steps=200", "resume=true"], cwd=work, env=ENV, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    m = json.loads((run / "metrics.json").read_text())
    assert m["robot"] == "sim_twin" and m["env_steps"] >= 200 and m["updates"] > 0
    assert (m["reward"], m["run_reward"]) == ("success", "sparse")  # the robot's success flag, demos alike
    assert m["base_hash"] == before == state_dict_hash(load_policy(base, which="ema"))
    steps = 0
    for session in ("session_000.hdf5", "session_001.hdf5"):  # the resumed run wrote a file of its own
        with h5py.File(run / "episodes" / session) as f:
            steps += sum(len(f["data"][d]["actions"]) for d in f["data"])
    assert steps >= m["env_steps"]  # every counted step is in a recording (the aborted episode's too)


def test_reward_operator_pays_the_answers_and_the_twin_runs_to_its_time_limit(setup):
    """robot_reward=operator: after each episode the terminal is asked; the answers, not the twin's success, make
    the sparse reward and are recorded; the twin no longer ends an episode at its success; a closed terminal
    stops the run in one line (exit 1) with every episode recorded."""
    import h5py

    work, _, base = setup
    cmd = [f"base={base}", *TWIN, "robot_reward=operator"]
    verdicts = [True, False, True, True, False, False, True, False]
    answers = "y\nmaybe\n" + "".join("y\n" if v else "n\n" for v in verdicts[1:])  # "maybe" is asked again
    p = _run("robosteer.scripts.steer", *cmd, "env_steps=100", "out=operator", cwd=work, input=answers)
    assert p.returncode == 0, p.stderr[-3000:]
    run = work / "operator"
    m = json.loads((run / "metrics.json").read_text())
    n = m["robot_episodes"]
    assert (m["reward"], m["run_reward"]) == ("operator", "sparse") and 3 <= n < len(verdicts)
    assert p.stdout.count("success? [y/n]") == n + 1 and "answer y or n (got 'maybe')" in p.stdout
    with h5py.File(run / "episodes" / "session_000.hdf5") as f:
        env_args = json.loads(f["data"].attrs["env_args"])
        eps = [f["data"][d] for d in sorted(f["data"], key=lambda d: int(d.split("_")[1]))]
        judged = [bool(ep.attrs["judged_success"]) for ep in eps]
        dones = [np.asarray(ep["dones"]).astype(bool) for ep in eps]
        twin_steps = [int(ep.attrs["steps"]) for ep in eps]
    assert env_args["env_kwargs"]["end_on_success"] is False
    assert judged == verdicts[:n]
    assert [d[-1] for d in dones] == judged and not any(d[:-1].any() for d in dones)
    assert twin_steps == [40] * n  # every episode ran to the twin's time limit
    # one answer left for a longer budget: the closed terminal stops the run, the unjudged episode is kept
    p = _run(
        "robosteer.scripts.steer",
        *cmd,
        "env_steps=10000",
        "out=operator",
        "resume=true",
        cwd=work,
        input="n\n",
    )
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert "robot_reward=operator needs a person at the terminal" in p.stderr.strip().splitlines()[-1]
    with h5py.File(run / "episodes" / "session_001.hdf5") as f:
        assert len(f["data"]) == 2


def test_resets_operator_asks_before_each_episode_and_stop_ends_the_run_cleanly(setup):
    """resets=operator: before every episode the terminal asks for the scene's reset (Enter), beside the
    verdict after it (robot_reward=operator); typing stop ends the run cleanly: exit 0, metrics written, the
    learner saved, every episode recorded."""
    import h5py

    work, _, base = setup
    answers = "\ny\n\nn\nstop\n"  # reset, verdict, reset, verdict, stop
    cmd = [f"base={base}", *TWIN, "robot_reward=operator", "resets=operator", "env_steps=10000", "out=resets"]
    p = _run("robosteer.scripts.steer", *cmd, cwd=work, input=answers)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.count("reset the scene, then press Enter (or type stop)") == 3
    run = work / "resets"
    m = json.loads((run / "metrics.json").read_text())
    assert m["robot_episodes"] == 2 and (run / "checkpoints" / "latest").exists()
    with h5py.File(run / "episodes" / "session_000.hdf5") as f:
        assert [bool(f["data"][d].attrs["judged_success"]) for d in ("demo_0", "demo_1")] == [True, False]
        assert m["env_steps"] == sum(len(f["data"][d]["actions"]) for d in ("demo_0", "demo_1"))


def test_reward_classifier_reports_its_errors_first_and_pays_its_first_success_frame(setup):
    """robot_reward=classifier: a classifier trained on recorded episodes (camera frames + success) reports its
    threshold and held-out error rates before the arm moves; the twin renders its camera beside the state
    the base reads, every episode runs to the time limit, and each one's learning data end at the step the
    classifier saw success (recorded as such); a resumed run keeps the classifier it was paid by."""
    import h5py

    work, _, base = setup
    args = ["task=reach-v3", "episodes=12", "obs=state+image", "image_size=32", "keep=all"]
    args += ["action_noise_std=0.3", "max_episode_steps=40", "seed=3", "progress=false", "out=clf_demos"]
    p = _run("robosteer.scripts.collect", *args, cwd=work)
    assert p.returncode == 0, p.stderr[-3000:]
    cmd = [f"base={base}", *TWIN, "robot_reward=classifier", "classifier.data=clf_demos/demos.hdf5"]
    cmd += ["classifier.steps=30", "classifier.batch_size=8", "out=classifier"]
    p = _run("robosteer.scripts.steer", *cmd, "env_steps=100", cwd=work)
    assert p.returncode == 0, p.stderr[-3000:]
    log = p.stdout + p.stderr
    report = re.search(r"success classifier on image/corner2: threshold ([0-9.]+); on 3 held-out", log)
    assert report and log.index("success classifier on") < log.index("env step 0 eval"), log[-3000:]
    run = work / "classifier"
    threshold = json.loads((run / "classifier" / "report.json").read_text())["threshold"]
    assert float(report.group(1)) == pytest.approx(threshold, abs=5e-4)
    m = json.loads((run / "metrics.json").read_text())
    assert (m["reward"], m["run_reward"]) == ("classifier", "sparse") and m["robot_episodes"] >= 3
    agree = 0
    with h5py.File(run / "episodes" / "session_000.hdf5") as f:
        assert json.loads(f["data"].attrs["env_args"])["env_kwargs"]["end_on_success"] is False
        for name in f["data"]:
            ep = f["data"][name]
            assert int(ep.attrs["steps"]) == 40  # the twin's time limit: its success did not end it
            agree += bool(ep.attrs["judged_success"]) == bool(ep.attrs["robot_success_any"])
            assert ep["obs/corner2_image"].shape == (len(ep["actions"]), 32, 32, 3)  # robomimic's flat key
            dones = np.asarray(ep["dones"]).astype(bool)
            if ep.attrs["judged_success"]:
                assert np.flatnonzero(dones).tolist() == [int(ep.attrs["judged_step"])]
            else:
                assert not dones.any() and "judged_step" not in ep.attrs
    assert m["robot_judged_agree"] == agree  # the judge against the twin's success at any step
    p = _run("robosteer.scripts.steer", *cmd, "env_steps=200", "resume=true", cwd=work)
    assert p.returncode == 0, p.stderr[-3000:]
    log = p.stdout + p.stderr
    assert "training the success classifier" not in log and f"threshold {threshold:.3f}" in log


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["robot=ur"], "robot=ur resets no scene itself: resets=operator"),
        (["robot=ros2", "resets=operator"], "robot=ros2 reports no success: robot_reward=operator"),
        (
            ["robot=sim_twin", "robot.driver.real_mode=true", "resets=operator", "robot_reward=twin"],
            "robot=sim_twin robot.driver.real_mode=true reports no success",
        ),
        (
            ["robot=sim_twin", "teleop=scripted"],
            "teleop=scripted stands in for a person at the twin in real mode",
        ),
        (["robot=sim_twin", "teleop=wand"], "teleop='wand' is not known: expected one of"),
        (
            ["robot=ur", "resets=operator", "robot_reward=classifier", "classifier.path=x"],
            "robot_reward=classifier on robot=ur needs a camera",
        ),
        (
            ["robot=sim_twin", "resets=hands"],
            "resets='hands' is not known: expected one of ['robot', 'operator']",
        ),
        (["robot=sim_twin", "variant=sac"], "algo=dsrl variant=na"),
        (["robot=sim_twin", "robot_reward=classifier"], "robot_reward=classifier needs a success classifier"),
        (
            ["robot=sim_twin", "robot_reward=smile"],
            "robot_reward='smile' is not known: expected one of ['success', 'twin', 'operator', 'classifier']",
        ),
        (
            ["robot=sim_twin", "learner=ray", "learner.weights_every=0"],
            "learner.weights_every=0 is not valid",
        ),
        (["learner=ray"], "learner= is a setting of a run on a robot (robot=sim_twin | ur | ros2) only"),
    ],
)
def test_steering_on_a_robot_refuses_what_it_cannot_do_in_one_line(setup, extra, message):
    work, _, base = setup
    out = "out=refused/" + "_".join(extra).replace("=", "-")  # a refusal after Hydra starts leaves its log
    p = _run("robosteer.scripts.steer", f"base={base}", *extra, "steerability.directions=0", out, cwd=work)
    assert p.returncode == 2 and message in p.stderr, p.stderr[-2000:]
    assert "Traceback" not in p.stderr


REAL_TWIN = [  # the twin as a real arm: judged by the scripted person, evaluated on its own episodes
    "robot.driver.real_mode=true",
    "robot.driver.max_episode_steps=60",  # the scripted person steps in after 3 chunks without progress
    "resets=operator",
    "operator=scripted",
    "robot_reward=operator",
    "teleop=scripted",
    "arm_eval.episodes=1",
    "arm_eval.final_episodes=2",
    "run.eval_every=150",
    "eval_base=true",
]


def test_learner_on_ray_steers_a_pixel_base_on_the_twin_in_real_mode_with_no_simulator(pixel_base_run):
    """robot=sim_twin real_mode, a camera base, learner=ray (the Ray group: one cluster at a time): the steering and
    learner processes import no simulator (the learner embeds the recorded frames itself); the base and every
    evaluation are blocks of judged episodes on the arm, counted apart from the training steps, the final one
    with its Wilson interval; the scripted person's takeovers are recorded per step and learned from; the
    recording keeps the camera frames; the base never changes. (kill -9 survival: the twin tests above.)"""
    import h5py

    work, base = pixel_base_run
    before = state_dict_hash(load_policy(base, which="ema"))
    cmd = [sys.executable, "-m", "robosteer.scripts.steer", f"base={base}", *TWIN, *REAL_TWIN, "learner=ray"]
    cmd += ["env_steps=200", "out=real_twin"]
    p = subprocess.run(  # a fresh process (clirun's warm one has the simulator loaded already)
        cmd, cwd=work, env=ENV, capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, p.stderr[-3000:]
    run = work / "real_twin"
    m = json.loads((run / "metrics.json").read_text())
    assert m["real_arm"] and m["simulators_imported"] == [] and m["learner"]["simulators_imported"] == []
    assert m["final_block"]["episodes"] == 2 and len(m["success_ci95"]) == 2
    assert m["eval_env_steps"] > 0 and m["env_steps"] >= 200 and m["base_success_rate"] is not None
    assert m["intervention_steps"] > 0 and m["base_hash"] == before == state_dict_hash(
        load_policy(base, which="ema")
    )
    evaluated, person_steps = 0, 0
    with h5py.File(run / "episodes" / "session_000.hdf5") as f:
        for demo in f["data"].values():
            assert "obs/corner_image" in demo  # the camera frames are recorded (the learner read embeddings)
            if "evaluation" in demo.attrs:
                evaluated += 1
                assert "episode_index" not in demo.attrs and "interventions" not in demo  # never learned
            elif "interventions" in demo:
                person_steps += int(demo["interventions"][()].sum())
    assert evaluated >= 2 + 2 + 1 and person_steps == m["intervention_steps"]  # base, final, periodic blocks


def test_safety_aborts_in_a_row_stop_the_run_each_episode_recorded(setup):
    """safety.abort_margin: the hand outside a workspace it can never enter aborts every episode at once (the
    arm stopped, the episode recorded as safety_abort); safety.max_consecutive_aborts=2 of them stop the run
    in one line (exit 1) naming the setting, with resume=true to go on once the cell is checked."""
    import h5py

    work, _, base = setup
    box = [
        "safety.workspace_low=[0.9,0.9,0.9]",
        "safety.workspace_high=[1.0,1.0,1.0]",
        "safety.abort_margin=0.01",
    ]
    cmd = [
        "robosteer.scripts.steer",
        f"base={base}",
        *TWIN,
        *REAL_TWIN,
        *box,
        "safety.max_consecutive_aborts=2",
    ]
    p = _run(*cmd, "env_steps=1000", "out=aborts", cwd=work)
    assert p.returncode == 1, p.stderr[-2000:]
    last = p.stderr.strip().splitlines()[-1]
    assert "2 episodes in a row were aborted for safety (safety.max_consecutive_aborts=2" in last, last
    assert "outside the workspace" in last and "resume=true" in last
    with h5py.File(work / "aborts" / "episodes" / "session_000.hdf5") as f:
        statuses = [d.attrs["status"] for d in f["data"].values()]
    assert statuses == ["safety_abort", "safety_abort"]


def _descendants(root: int, name: str) -> list[int]:
    """Processes under ``root`` (children, grandchildren...) whose command line starts with ``name``."""
    parent, cmdline = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline[int(stat.parent.name)] = (
                (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            )
        except (OSError, IndexError):
            continue
    found = []
    for pid, cmd in cmdline.items():
        p = parent.get(pid)
        while p is not None and p > 1 and p != root:
            p = parent.get(p)
        if p == root and cmd.startswith(name):
            found.append(pid)
    return found


def _learned_episodes(run: Path) -> list[tuple[int, int]]:
    """(episode_index, steps) of every recorded episode the learner was given, over all session files."""
    import h5py

    out = []
    for path in sorted((run / "episodes").glob("session_*.hdf5*")):
        with h5py.File(path) as f:
            for demo in f["data"].values():
                if "episode_index" in demo.attrs:
                    out.append((int(demo.attrs["episode_index"]), len(demo["actions"])))
    return sorted(out)


def _gone(pids: list[int], within_s: float) -> bool:
    import time

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in pids):
        time.sleep(0.1)
    return not any(Path(f"/proc/{pid}").exists() for pid in pids)


def test_learner_on_ray_survives_kill_of_the_learner_and_of_the_actor(setup):
    """learner=ray: the learner trains in a Ray actor of its own. kill -9 of the learner and of the actor
    (robosteer-steer itself) each stop the run with every finished episode recorded, the first with one line
    naming the fault, the second taking the twin and the learner with it (the twin's own kill is the test
    above's); resume=true re-sends the recorded episodes the last checkpoint had not learned, so at the end
    every recorded episode was learned exactly once; the base never changes."""
    import signal
    import time

    work, _, base = setup
    before = state_dict_hash(load_policy(base, which="ema"))
    cmd = [sys.executable, "-m", "robosteer.scripts.steer", f"base={base}", *TWIN, "learner=ray", "out=ray"]
    cmd += ["run.checkpoint_every=100"]
    run = work / "ray"
    latest = run / "checkpoints" / "latest" / "config.json"

    def started(*extra: str) -> subprocess.Popen:
        """A run that goes on until killed, once it saved a checkpoint of its own."""
        saved_at = latest.stat().st_mtime_ns if latest.exists() else None
        proc = subprocess.Popen([*cmd, "env_steps=100000", *extra], cwd=work, env=ENV, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not latest.exists() or latest.stat().st_mtime_ns == saved_at):
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        return proc

    def fault_line(proc: subprocess.Popen) -> str:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err.decode()[-2000:]
        return err.decode().strip().splitlines()[-1]

    proc = started()
    learners = _descendants(proc.pid, "ray::LearnerWorker")
    assert len(learners) == 1, "the learner's Ray worker was not found"
    os.kill(learners[0], signal.SIGKILL)
    line = fault_line(proc)
    assert line.startswith("robosteer-steer: robot fault: the learner process died"), line
    assert "resume=true" in line and "re-sent" in line, line

    proc = started("resume=true")  # past the learner's kill: a checkpoint of the resumed run
    children = _twin_pids(proc.pid) + _descendants(proc.pid, "ray::LearnerWorker")
    assert len(children) == 2
    proc.kill()  # the actor itself: the twin and the learner go with it
    proc.communicate(timeout=30)
    assert _gone(children, 30), "the twin or the learner outlived the actor"

    budget = sum(n for _, n in _learned_episodes(run)) + 100
    p = _run("robosteer.scripts.steer", *cmd[3:], f"env_steps={budget}", "resume=true", cwd=work)
    assert p.returncode == 0, p.stderr[-3000:]
    m = json.loads((run / "metrics.json").read_text())
    learned = _learned_episodes(run)
    assert [i for i, _ in learned] == list(range(len(learned)))  # each index once: none lost, none twice
    assert m["robot_episodes"] == len(learned) and m["env_steps"] == sum(n for _, n in learned)
    assert m["learner"]["mode"] == "ray" and m["updates"] > 0
    assert m["learner"]["staleness_updates"]["max"] >= 0
    assert m["base_hash"] == before == state_dict_hash(load_policy(base, which="ema"))
