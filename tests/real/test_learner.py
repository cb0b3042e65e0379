"""The learner's process (real/learner.py) without Ray: what each episode owes, the published weights, resent
and missing episodes, faults, snapshots; and the recordings a resumed run re-sends (real/steering.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from robosteer.policies.data import DatasetWriter
from robosteer.policies.steering.loop import OnlineLearner, OnlineRunConfig
from robosteer.real.learner import (
    LearnerConfig,
    LearnerError,
    LearnerWorker,
    held_attr,
    held_from_attr,
)
from robosteer.real.steering import RobotSteeringError, recorded_unlearned


class _Counting(OnlineLearner):
    """A learner whose one weight counts its updates; ``loss`` is what every update reports."""

    kind = "counting"
    obs_keys = ("state",)
    taken_dim = 6  # 3 executed steps x 2 action dims

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))
        self.opt = torch.optim.SGD([self.w], lr=1.0)
        self.calls: list[tuple[int, int]] = []
        self.loss = 0.0
        self.banked = 0

    @property
    def label(self) -> str:
        return "counting"

    def warmup_action(self, obs, generator):
        raise AssertionError("the worker never acts")

    explore = warmup_action

    def learn(self, n_updates, n_transitions, sample, generator):
        for _ in range(n_updates):
            batch = sample(4)
            assert batch["obs"]["state"].shape == (4, 2, 3)
            with torch.no_grad():
                self.w += 1.0
        self.calls.append((n_updates, n_transitions))
        return {"critic_loss": self.loss}

    def observe_recorded(self, obs) -> None:
        self.banked += len(obs["state"])

    def eval_policy(self):
        raise AssertionError("the worker never evaluates")

    def optimizers(self):
        return {"w": self.opt}

    def get_config(self):
        return {}


def _episode(steps: int, success_at: int | None = None) -> dict:
    dones = np.zeros(steps, dtype=bool)
    if success_at is not None:
        dones[success_at] = True
    return {
        "obs": {"state": np.arange(3 * steps, dtype=np.float32).reshape(steps, 3)},
        "actions": np.ones((steps, 2), dtype=np.float32),
        "rewards": np.zeros(steps, dtype=np.float32),
        "dones": dones,
    }


def _worker(learner: OnlineLearner, state=None, **cfg) -> LearnerWorker:
    run = OnlineRunConfig(**{"utd": 1.0, "warmup_chunks": 0, "buffer_size": 64, **cfg})
    return LearnerWorker(
        learner,
        {"state": (2, 3)},
        run,
        None,
        state,
        n_obs_steps=2,
        exec_steps=3,
        learn_slice=2,
        weights_every=3,
    )


def _settled(worker: LearnerWorker) -> dict:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        stats = worker.stats()
        if stats["backlog"] == 0 or stats["fault"]:
            return stats
        time.sleep(0.01)
    raise AssertionError("the learner did not catch up")


def test_the_learner_trains_what_each_episode_owes_in_slices_and_publishes_every_n_updates():
    learner = _Counting()
    worker = _worker(learner)
    try:
        stats = worker.add_episode(0, _episode(9), None)  # 9 steps: 3 chunks of 3
        assert stats["transitions"] == 3 and stats["episodes"] == 1 and stats["last_return"] == -3.0
        stats = _settled(worker)
        assert stats["updates"] == 3 and learner.calls == [(2, 2), (1, 1)]  # learn_slice 2 transitions a call
        assert learner.banked == 3  # the learner saw the recorded states
        version, state = worker.weights(-1)
        assert version == 3 and float(state["w"]) == 3.0
        assert worker.weights(3) == (3, None)  # nothing newer than the acting weights
        worker.add_episode(1, _episode(6), None)
        stats = _settled(worker)
        assert stats["updates"] == 5 and worker.weights(3)[0] == 3  # 2 updates: under weights_every
        worker.add_episode(2, _episode(3), None)
        assert _settled(worker)["updates"] == 6 and worker.weights(3)[0] == 6
    finally:
        worker.stop()


def test_nothing_is_learned_before_the_warm_up_ends_then_the_whole_episode_is_owed():
    learner = _Counting()
    worker = _worker(learner, warmup_chunks=4)
    try:
        worker.add_episode(0, _episode(9), None)  # 3 transitions: still warming up
        assert _settled(worker)["updates"] == 0
        worker.add_episode(1, _episode(9), None)  # 6 >= 4: this episode's 3 transitions are owed
        assert _settled(worker)["updates"] == 3
    finally:
        worker.stop()


def test_a_resent_episode_is_acknowledged_once_and_a_gap_is_refused():
    worker = _worker(_Counting())
    try:
        worker.add_episode(0, _episode(9), None)
        assert (
            worker.add_episode(0, _episode(9), None)["transitions"] == 3
        )  # already learned: not added twice
        with pytest.raises(LearnerError, match="episode 2 arrived but the learner expected episode 1"):
            worker.add_episode(2, _episode(9), None)
    finally:
        worker.stop()


def test_a_non_finite_loss_is_a_fault_the_actor_reads_and_nothing_trains_after_it():
    learner = _Counting()
    learner.loss = float("nan")
    worker = _worker(learner)
    try:
        worker.add_episode(0, _episode(9), None)
        stats = _settled(worker)
        assert stats["fault"] == "non-finite critic_loss = nan at learner update 2"
        assert stats["updates"] == 0 and learner.calls == [(2, 2)]  # the bad slice is not counted
    finally:
        worker.stop()


def test_a_snapshot_restores_the_whole_learner_in_a_new_process():
    learner = _Counting()
    worker = _worker(learner)
    try:
        worker.add_episode(0, _episode(9), None)
        _settled(worker)
        snap = worker.snapshot()
    finally:
        worker.stop()
    assert snap["counters"]["updates"] == 3 and int(snap["modules"]["buffer"]["size"]) == 3
    again = _Counting()
    worker = _worker(again, state=snap)
    try:
        assert float(again.w.detach()) == 3.0 and worker.buffer.size == 3
        assert worker.stats()["episodes"] == 1 and worker.gen.get_state().equal(snap["generator"])
        worker.add_episode(1, _episode(9), None)  # it expects the next episode
        assert _settled(worker)["updates"] == 6
    finally:
        worker.stop()


@pytest.mark.parametrize("steps", [1, 8, 13])
def test_held_steps_survive_the_recording_as_bits(steps):
    held = [bool(i % 3 == 1) for i in range(steps)]
    assert held_from_attr(held_attr(held, steps), steps) == held
    assert held_from_attr(held_attr(None, steps), steps) == [False] * steps


def _record(path, episodes) -> None:
    with DatasetWriter(path, env_args={"env_name": "reach-v3"}) as w:
        for arrays, attrs in episodes:
            w.add_episode(**arrays, attrs=attrs)


def test_a_resume_re_sends_the_recorded_episodes_from_the_checkpoints_count_cut_as_judged(tmp_path):
    held = [False, True, False, False, False, False]
    judged_ok = {"judged_success": True, "judged_step": 3, "success": False}
    _record(
        tmp_path / "session_000.hdf5",
        [
            (_episode(6), {"episode_index": 0}),
            (_episode(6), {"episode_index": 1, "held_steps": held_attr(held, 6), **judged_ok}),
        ],
    )
    _record(
        tmp_path / "session_001.hdf5.partial",  # a run killed mid-session: its finished episodes count
        [
            (_episode(5), {"status": "error"}),  # cut short by a fault: never the learner's
            (_episode(6), {"episode_index": 2, "judged_success": False}),
        ],
    )
    got = recorded_unlearned(tmp_path, 1, ("state",))
    assert [attrs["episode_index"] for _, _, attrs in got] == [1, 2]
    arrays, held_back, _ = got[0]
    assert len(arrays["actions"]) == 4 and held_back == held[:4]  # cut after the judged step 3
    assert arrays["dones"].tolist() == [False, False, False, True]
    assert len(got[1][0]["actions"]) == 6 and not got[1][0]["dones"].any() and got[1][1] is None
    assert recorded_unlearned(tmp_path, 3, ("state",)) == []


def test_a_missing_recorded_episode_is_refused_in_one_line(tmp_path):
    _record(tmp_path / "session_000.hdf5", [(_episode(6), {"episode_index": 0})])
    _record(tmp_path / "session_001.hdf5", [(_episode(6), {"episode_index": 2})])
    with pytest.raises(RobotSteeringError, match="recorded episode 1 is missing while later ones are there"):
        recorded_unlearned(tmp_path, 0, ("state",))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mode": "remote"}, "learner.mode='remote' is not known: expected one of"),
        ({"weights_every": 0}, "learner.weights_every=0 is not valid"),
        ({"max_backlog": 0}, "learner.max_backlog=0 is not valid"),
        ({"timeout_s": 0}, "learner.timeout_s=0 is not valid"),
    ],
)
def test_bad_learner_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LearnerConfig(**kwargs)


@pytest.mark.parametrize(
    "address, message",
    [
        ("127.0.0.1:1", "learner.address='127.0.0.1:1': no Ray head answers there"),
        ("headnode", "learner.address='headnode' is not valid: expected HOST:PORT"),
    ],
)
def test_a_learner_address_nobody_answers_is_refused_in_seconds(address, message):
    from robosteer.real.learner import RayLearner

    with pytest.raises(LearnerError, match=message):
        RayLearner(LearnerConfig(mode="ray", address=address, insecure=True), _Counting())


def _no_ray_token(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    for var in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))  # no ~/.ray/auth_token either


def test_joining_a_cluster_without_its_token_is_refused_unless_insecure(monkeypatch, tmp_path):
    _no_ray_token(monkeypatch, tmp_path)
    with pytest.raises(
        ValueError, match=r"learner.address=gpu-host:6379: no Ray token is set .*insecure=true"
    ):
        LearnerConfig(mode="ray", address="gpu-host:6379")
    LearnerConfig(mode="ray", address="gpu-host:6379", insecure=True)  # the user's explicit choice
    LearnerConfig(mode="ray")  # a cluster this run starts makes its own token
    monkeypatch.setenv("RAY_AUTH_TOKEN", "t" * 64)
    LearnerConfig(mode="ray", address="gpu-host:6379")


def test_authentication_turns_on_a_fresh_token_for_a_cluster_started_here_and_keeps_a_given_one(
    monkeypatch, tmp_path
):
    from robosteer.real.learner import authenticate_ray

    _no_ray_token(monkeypatch, tmp_path)
    authenticate_ray(LearnerConfig(mode="ray"))
    first = os.environ["RAY_AUTH_TOKEN"]
    assert os.environ["RAY_AUTH_MODE"] == "token" and len(first) == 64
    monkeypatch.delenv("RAY_AUTH_TOKEN")
    authenticate_ray(LearnerConfig(mode="ray"))
    assert os.environ["RAY_AUTH_TOKEN"] != first  # a fresh one per cluster, never a constant
    authenticate_ray(LearnerConfig(mode="ray", address="h:1", insecure=True))
    assert os.environ["RAY_AUTH_TOKEN"] != first  # a token already set is kept
    _no_ray_token(monkeypatch, tmp_path)
    authenticate_ray(LearnerConfig(mode="ray", address="h:1", insecure=True))
    assert "RAY_AUTH_MODE" not in os.environ and "RAY_AUTH_TOKEN" not in os.environ
    monkeypatch.undo()  # this process's Ray settings as they were, for whatever runs next here
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


RAY_HEAD = """
import os, sys, time
import ray
from robosteer.real.learner import LearnerConfig, authenticate_ray
authenticate_ray(LearnerConfig(mode="ray"))
ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR")
print(ray.get_runtime_context().gcs_address, os.environ["RAY_AUTH_TOKEN"], flush=True)
sys.stdin.read()  # held until the test closes stdin
ray.shutdown()
"""
RAY_CLIENT = "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); print('joined')"


def test_a_cluster_robosteer_starts_refuses_a_client_without_its_token(tmp_path):
    """learner=ray's own cluster is token-authenticated: a client without the token cannot join it (so cannot
    run code there, nor command the robot through the learner); one with the token can."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")} | {"HOME": str(tmp_path)}
    head = subprocess.Popen(
        [sys.executable, "-c", RAY_HEAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        address, token = head.stdout.readline().split()
        join = [sys.executable, "-c", RAY_CLIENT, address]
        stranger = subprocess.run(join, capture_output=True, text=True, env=env, timeout=120)
        assert stranger.returncode != 0 and "joined" not in stranger.stdout
        owner = {**env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
        member = subprocess.run(join, capture_output=True, text=True, env=owner, timeout=120)
        assert member.returncode == 0 and "joined" in member.stdout, member.stderr[-2000:]
    finally:
        head.stdin.close()
        head.wait(timeout=60)
