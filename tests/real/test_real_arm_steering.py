"""robosteer-steer on a real arm (``robot=ur``, ``robot=ros2``) end to end through its CLI, against fakes of the
drivers' SDKs (tests/fixtures/fake_sdks on the command's PYTHONPATH: ur-rtde, rclpy and its messages, pynput):
DSRL-NA on a tiny 6-joint base, the operator at the terminal resetting the scene and judging every episode,
a person at the keyboard taking the arm over, the arm's own judged evaluation blocks counted apart from the
training steps, a protective stop that ends one episode (not the run), and no simulator in the process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import clirun
import numpy as np
import pytest

from robosteer.policies.checkpoint import load_policy, state_dict_hash

REPO = Path(__file__).resolve().parents[2]
FAKES = REPO / "tests" / "fixtures" / "fake_sdks"
HOME_Q = np.array(
    [0.0, -1.57, 1.57, -1.57, -1.57, 0.0], dtype=np.float32
)  # the fake arms' start (_fake_arm.py)
TRAIN_ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
# the person at the keyboard takes over every ~0.9 s for 0.4 s: every 40-tick episode (1.3 s or more at the
# rates below) overlaps a takeover, wherever the run's setup time puts the first one
ARM_ENV = {
    **TRAIN_ENV,
    "PYTHONPATH": f"{FAKES}{os.pathsep}{REPO}",
    "ROBOSTEER_FAKE_KEYS_AFTER_S": "0.4",
    "ROBOSTEER_FAKE_KEYS_HOLD_S": "0.4",
}
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
ENV_STEPS = 120  # 3 training episodes of 40 steps, a periodic block after the second
ARM_STEER = [
    "resets=operator",
    "robot_reward=operator",
    "teleop=keyboard",
    "offline=none",
    "runtime.max_steps=40",
    f"env_steps={ENV_STEPS}",
    "arm_eval.episodes=1",
    "arm_eval.final_episodes=2",
    "run.eval_every=80",
    "run.warmup_chunks=4",
    "run.progress=false",
]
DSRL = ["dsrl.hidden=[32,32]", "dsrl.batch_size=16", "dsrl.noise_critic_steps=1", "steerability.directions=0"]
EXPO = ["algo=expo", "expo.hidden=[32,32]", "expo.batch_size=16"]
# The steering process, with a report of the simulator modules it imported (none may be, on a real arm),
# printed last at exit. Not through clirun: its warm process has Meta-World imported already.
WRAPPER = """
import atexit, json, runpy, sys
atexit.register(lambda: print("simulator modules: " + json.dumps(sorted(
    m for m in sys.modules if m.split(".")[0] in ("mujoco", "metaworld"))), file=sys.stderr))
sys.argv = ["robosteer-steer", *sys.argv[1:]]
runpy.run_module("robosteer.scripts.steer", run_name="__main__", alter_sys=True)
"""
# the terminal's answers: prompts alternate reset (y: go) and verdict; every other episode is a success
ANSWERS = "y\ny\ny\nn\n" * 40


@pytest.fixture(scope="module")
def arm_base(tmp_path_factory) -> tuple[Path, Path]:
    """(work dir, a tiny diffusion base over a 6-joint arm: joint_pos (6,) in, 6 absolute joint targets out),
    trained for 3 steps on small random walks around the fake arms' home pose."""
    from robosteer.policies.data import DatasetWriter

    work = tmp_path_factory.mktemp("arm")
    rng = np.random.default_rng(0)
    env_args = {"env_name": "ur-reach-fake", "env_kwargs": {"suite": "real"}}
    with DatasetWriter(work / "arm_demos.hdf5", env_args=env_args) as writer:
        for _ in range(4):
            walk = HOME_Q + np.cumsum(rng.normal(0.0, 0.005, (41, 6)), axis=0).astype(np.float32)  # (41, 6)
            dones = np.zeros(40, dtype=np.uint8)
            dones[-1] = 1
            obs = {"joint_pos": walk[:-1]}  # (40, 6); each action is the next pose
            writer.add_episode(obs, walk[1:], np.zeros(40, np.float32), dones, attrs={"success": True})
    args = ["policy=diffusion", "dataset=arm_demos.hdf5", "obs_keys=[joint_pos]", "steps=3", "out=base"]
    p = clirun.run(
        [sys.executable, "-m", "robosteer.scripts.train", *args, *TINY_BASE],
        cwd=work,
        env=TRAIN_ENV,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return work, work / "base"


def _steer_on_arm(work: Path, base: Path, *extra: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", WRAPPER, f"base={base}", *extra, *ARM_STEER]
    return subprocess.run(cmd, cwd=work, env=env, input=ANSWERS, capture_output=True, text=True, timeout=300)


def _episodes(run: Path) -> list[dict]:
    from robosteer.policies.data import open_dataset

    with open_dataset(run / "episodes" / "session_000.hdf5") as f:
        assert f.env_args["env_kwargs"]["suite"] == "real"  # not replayable in a simulator
        return list(f.episodes(obs_keys=["joint_pos"]))


def _check_arm_run(
    p: subprocess.CompletedProcess, run: Path, robot: str, base_hash: str
) -> tuple[dict, list]:
    """What every real-arm run must show: exit 0, no simulator imported, the final judged block with its
    interval, evaluation steps counted apart from training steps, and a person's takeovers recorded."""
    from robosteer.sim.stats import wilson_interval

    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.stderr.strip().splitlines()[-1] == "simulator modules: []", p.stderr[-2000:]
    m = json.loads((run / "metrics.json").read_text())
    assert m["robot"] == robot and m["real_arm"] is True and m["base_hash"] == base_hash
    block = m["final_block"]
    assert block["final"] and block["episodes"] == 2
    assert m["success_ci95"] == pytest.approx(list(wilson_interval(block["successes"], 2)))
    assert m["success_rate"] == block["success_rate"]
    episodes = _episodes(run)
    verdicts = [bool(ep["attrs"]["judged_success"]) for ep in episodes]
    training = [ep for ep in episodes if "episode_index" in ep["attrs"]]
    judged = [ep for ep in episodes if "evaluation" in ep["attrs"]]  # the base's block, a periodic, the final
    assert len(training) == m["robot_episodes"] and len(judged) == 2 + 1 + 2 == m["eval_episodes_on_arm"]
    assert m["env_steps"] == sum(len(ep["actions"]) for ep in training) >= ENV_STEPS
    assert m["eval_env_steps"] == sum(len(ep["actions"]) for ep in judged) > 0
    # each episode was reset and judged at the terminal, in turn, and its verdict recorded
    resets, asked = p.stdout.count("reset the scene, then press Enter"), p.stdout.count("success? [y/n]")
    assert resets == asked == len(episodes) and verdicts == [i % 2 == 0 for i in range(len(episodes))]
    base_block = [v for v, ep in zip(verdicts, episodes) if ep["attrs"].get("evaluation_of") == "base"]
    assert len(base_block) == 2 and m["base_success_rate"] == np.mean(base_block)  # measured on the arm first
    # the person's takeovers: recorded per step in training episodes only, counted, and moving the base joint
    assert m["intervention_steps"] > 0
    assert all(ep["interventions"] is None for ep in judged)
    person = [np.asarray(ep["interventions"], dtype=bool) for ep in training]
    assert sum(int(iv.sum()) for iv in person) == m["intervention_steps"]
    moved = [ep["actions"][iv, 0] - ep["obs"]["joint_pos"][iv, 0] for ep, iv in zip(training, person)]
    assert np.concatenate(moved).mean() > 0  # 'w' held: +x, the base joint turns positive
    return m, episodes


def test_steer_on_a_ur_arm_with_operator_teleop_and_a_protective_stop(arm_base):
    """robot=ur over the fake ur-rtde: a protective stop after the 100th servoJ (usually in the first training
    episode, after the base's two-episode block) ends that episode with status safety_abort, recorded and
    counted; the run goes on (the driver's stop clears it, the person at the pendant) to its final block."""
    work, base = arm_base
    before = state_dict_hash(load_policy(base, which="best"))
    env = {**ARM_ENV, "ROBOSTEER_FAKE_UR_PROTECTIVE_STOP_AFTER": "100"}
    # 25 Hz: 40 ticks are 1.6 s, longer than the person's takeover period
    extra = ["robot=ur", "robot.driver.host=fake", "robot.driver.rate_hz=25", *DSRL, "out=ur"]
    p = _steer_on_arm(work, base, *extra, env=env)
    m, episodes = _check_arm_run(p, work / "ur", "ur", before)
    assert m["safety_aborts"] == 1
    aborted = [ep for ep in episodes if ep["attrs"]["status"] == "safety_abort"]
    assert len(aborted) == 1 and "safety mode 3" in aborted[0]["attrs"]["safety_abort"]
    assert any(ep["interventions"] is not None and ep["interventions"].any() for ep in episodes)
    assert state_dict_hash(load_policy(base, which="best")) == before  # the base's files are untouched


def test_expo_on_a_ros2_arm_with_operator_and_teleop(arm_base):
    """robot=ros2 over the fake rclpy with algo=expo: joint states from the executor's spin thread, commands on
    the forward_position_controller topic; the same run as on the UR arm, with no safety abort; EXPO's base
    imitates the person's takeovers (its online copy: the base's files are untouched)."""
    work, base = arm_base
    before = state_dict_hash(load_policy(base, which="best"))
    p = _steer_on_arm(work, base, "robot=ros2", *EXPO, "out=ros2", env=ARM_ENV)
    m, _ = _check_arm_run(p, work / "ros2", "ros2", before)
    assert m["safety_aborts"] == 0 and m["variant"].startswith("expo")
    assert state_dict_hash(load_policy(base, which="best")) == before
