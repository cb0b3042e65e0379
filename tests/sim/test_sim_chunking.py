"""Action chunks: (B, Ta, A) steps that stop inside the chunk at termination or truncation."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from robosteer import sim
from robosteer.sim.chunking import ActionChunkWrapper

# Meta-World's scripted policies warn that their gains saturate; the env clips actions anyway.
pytestmark = pytest.mark.filterwarnings("ignore:Constant\\(s\\) may be too high")


def test_chunk_stops_at_truncation_per_env() -> None:
    with sim.make_env("reach-v3", num_envs=2, action_chunk=4, max_episode_steps=6) as env:
        assert env.single_action_space.shape == (4, 4)
        env.reset(seed=0)
        chunk = np.zeros((2, 4, 4), np.float32)  # (B, Ta, A)
        _, _, terminated, truncated, info = env.step(chunk)
        assert info["steps_executed"].tolist() == [4, 4] and not truncated.any()
        assert info["step_success"].shape == (2, 4)
        _, _, terminated, truncated, info = env.step(chunk)
        assert info["steps_executed"].tolist() == [2, 2]  # steps 5 and 6, then the episode is over
        assert truncated.all() and not terminated.any()
        assert info["episode_length"].tolist() == [6, 6]
        _, _, _, _, info = env.step(chunk)
        assert info["episode_length"].tolist() == [4, 4]  # the auto-reset episode started fresh


def test_chunk_stops_at_success_with_summed_reward() -> None:
    expert = sim.ScriptedExpert("reach-v3")
    actions, rewards = [], []
    with sim.make_env("reach-v3") as env:  # record the expert's episode step by step
        obs = env.reset(seed=[42])
        while True:
            actions.append(expert.act(obs)[0])
            obs, reward, terminated, truncated, info = env.step(actions[-1][None])
            rewards.append(float(reward[0]))
            if terminated[0] or truncated[0]:
                break
    assert terminated[0]
    length, ta = len(actions), 8
    padded = np.concatenate([np.stack(actions), np.zeros((ta, 4), np.float32)])  # (T + Ta, A)
    with sim.make_env("reach-v3", action_chunk=ta) as env:
        env.reset(seed=[42])
        for k in range(0, length, ta):
            _, reward, terminated, truncated, info = env.step(padded[None, k : k + ta])
            executed = int(info["steps_executed"][0])
            np.testing.assert_allclose(reward[0], sum(rewards[k : k + executed]), rtol=1e-6)
            if terminated[0]:
                break
        assert k + executed == length and executed == length - (length - 1) // ta * ta
        assert info["success"][0] and info["step_success"][0, executed - 1]
        assert not info["step_success"][0, executed:].any()
        assert info["episode_length"][0] == length


class _Recorder(gym.Env):
    """A single env that records each action and whether it was asked to render; step t (1-based) gives
    reward t, observation [t, −t], and ends or succeeds where told."""

    def __init__(self, end_at=None, truncate_at=None, succeed_at=(), cameras=(), steps_left=100):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
        lo, hi = np.array([-1.0, -2.0], np.float32), np.array([1.0, 2.0], np.float32)
        self.action_space = gym.spaces.Box(lo, hi, dtype=np.float32)
        self.end_at, self.truncate_at, self.succeed_at = end_at, truncate_at, succeed_at
        self.cameras, self.steps_left, self.render_images = cameras, steps_left, True
        self.t, self.actions, self.rendered = 0, [], []

    def step(self, action):
        self.actions.append(np.asarray(action).tolist())
        self.rendered.append(self.render_images)
        self.t += 1
        self.steps_left -= 1
        info = {"success": self.t in self.succeed_at, "t": self.t}
        obs = np.array([self.t, -self.t], np.float64)
        return obs, float(self.t), self.t == self.end_at, self.t == self.truncate_at, info


def _chunk(ta: int) -> np.ndarray:
    return np.arange(ta * 2, dtype=np.float32).reshape(ta, 2) / 10  # (Ta, A), every entry distinct


def test_chunk_executes_its_rows_in_order_until_termination() -> None:
    inner = _Recorder(end_at=3, succeed_at=(3,))
    env = ActionChunkWrapper(inner, 4)
    obs, reward, terminated, truncated, info = env.step(_chunk(4))
    assert inner.actions == _chunk(4)[:3].tolist()  # rows 0, 1, 2; row 3 is never executed
    assert obs.tolist() == [3.0, -3.0] and reward == 1.0 + 2.0 + 3.0
    assert terminated and not truncated and info["t"] == 3  # the last executed step's info
    assert info["steps_executed"] == 3 and info["success"] is True
    assert info["step_success"].tolist() == [False, False, True, False]


def test_chunk_stops_at_truncation_and_runs_on_past_success() -> None:
    env = ActionChunkWrapper(_Recorder(truncate_at=2), 4)
    _, reward, terminated, truncated, info = env.step(_chunk(4))
    assert (reward, terminated, truncated, info["steps_executed"]) == (3.0, False, True, 2)
    assert info["success"] is False and not info["step_success"].any()
    inner = _Recorder(succeed_at=(1,))  # success without termination: the whole chunk runs
    _, reward, terminated, truncated, info = ActionChunkWrapper(inner, 3).step(_chunk(3))
    assert len(inner.actions) == 3 and reward == 6.0 and not (terminated or truncated)
    assert info["success"] is True and info["step_success"].tolist() == [True, False, False]


def test_chunk_action_space_and_refusals() -> None:
    env = ActionChunkWrapper(_Recorder(), np.int64(3))
    assert env.chunk == 3 and env.action_space.shape == (3, 2) and env.action_space.dtype == np.float32
    assert env.action_space.low.tolist() == [[-1.0, -2.0]] * 3
    assert env.action_space.high.tolist() == [[1.0, 2.0]] * 3
    assert ActionChunkWrapper(_Recorder(), 1).action_space.shape == (1, 2)
    for bad in (0, True, 2.0, "4"):
        with pytest.raises(ValueError, match="action_chunk"):
            ActionChunkWrapper(_Recorder(), bad)
    with pytest.raises(ValueError, match=r"expected \(3, 2\)"):
        env.step(np.zeros((2, 2), np.float32))


@pytest.mark.parametrize(
    ("cameras", "render_last", "steps_left", "want"),
    [
        (("corner",), 2, 100, [False, False, True, True]),  # the chunk's last To steps
        (("corner",), 2, 3, [False, True, True, True]),  # and the last To steps before the time limit
        (("corner",), None, 100, [True] * 4),  # None: every step renders
        ((), 2, 100, [True] * 4),  # no cameras: nothing to skip
    ],
)
def test_lazy_rendering_only_where_the_policy_reads(cameras, render_last, steps_left, want) -> None:
    inner = _Recorder(cameras=cameras, steps_left=steps_left)
    ActionChunkWrapper(inner, 4, render_last=render_last).step(_chunk(4))
    assert inner.rendered == want and inner.render_images is True  # rendering is back on after the chunk


class _Bare(gym.Env):
    """A float64 env with neither ``cameras`` nor a ``success`` info key."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float64)

    def step(self, action):
        return np.zeros(1), 1.0, False, False, {}


def test_chunk_keeps_the_inner_dtype_and_reads_missing_keys_as_false() -> None:
    env = ActionChunkWrapper(_Bare(), 2, render_last=1)  # render_last without cameras: nothing to skip
    assert env.action_space.dtype == np.float64
    _, reward, _, _, info = env.step(np.zeros((2, 1)))
    assert reward == 2.0 and info["success"] is False
    assert info["step_success"].dtype == bool and info["step_success"].tolist() == [False, False]
