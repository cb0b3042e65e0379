"""ActionChunkWrapper over every episode length, chunk size and ending (property-based, hypothesis).

A recording env ends after E steps (terminated or truncated) and pays a different reward per step; the
wrapper is stepped chunk by chunk until the episode ends. Whatever the shapes, each chunk must execute
exactly ``min(Ta, steps left)`` of its actions, in order, and report their reward sum, success flags and
ending: a chunk boundary that crosses the episode's end is the case fixed-size tests rarely hit.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from robosteer.sim.chunking import ActionChunkWrapper


class RecordingEnv(gym.Env):
    """Ends after ``length`` steps; step t pays reward t + 1 and succeeds where ``success[t]``."""

    def __init__(self, length: int, terminates: bool, success: list[bool]) -> None:
        self.length, self.terminates, self.success = length, terminates, success
        self.action_space = gym.spaces.Box(-1e6, 1e6, (2,), dtype=np.float64)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), dtype=np.float64)
        self.executed: list[np.ndarray] = []

    def reset(self, *, seed=None, options=None):
        self.executed = []
        return np.zeros(1), {}

    def step(self, action):
        t = len(self.executed)
        self.executed.append(np.array(action, dtype=np.float64))
        ended = t + 1 == self.length
        info = {"success": self.success[t], "t": t}
        return (
            np.array([t + 1.0]),
            float(t + 1),
            ended and self.terminates,
            ended and not self.terminates,
            info,
        )


episodes = st.integers(1, 20).flatmap(
    lambda n: st.tuples(st.just(n), st.booleans(), st.lists(st.booleans(), min_size=n, max_size=n))
)


@given(episode=episodes, chunk=st.integers(1, 6))
def test_every_chunk_executes_exactly_the_steps_left(episode, chunk) -> None:
    length, terminates, success = episode
    env = RecordingEnv(length, terminates, success)
    wrapper = ActionChunkWrapper(env, chunk)
    wrapper.reset()
    done_steps, calls = 0, 0
    while True:
        actions = np.stack([[100.0 * calls + t, -(100.0 * calls + t)] for t in range(chunk)])  # (Ta, 2)
        obs, reward, terminated, truncated, info = wrapper.step(actions)
        executed = min(chunk, length - done_steps)
        steps = np.arange(done_steps, done_steps + executed)  # the episode's steps this chunk ran
        np.testing.assert_array_equal(np.stack(env.executed[done_steps:]), actions[:executed])
        assert len(env.executed) == done_steps + executed
        assert reward == float((steps + 1).sum())
        assert info["steps_executed"] == executed and info["t"] == steps[-1]
        want_flags = np.zeros(chunk, dtype=bool)
        want_flags[:executed] = [success[t] for t in steps]
        np.testing.assert_array_equal(info["step_success"], want_flags)
        assert info["success"] == bool(want_flags.any())
        ended = done_steps + executed == length
        assert (terminated, truncated) == (ended and terminates, ended and not terminates)
        assert obs[0] == steps[-1] + 1  # the last executed step's observation
        done_steps, calls = done_steps + executed, calls + 1
        if ended:
            break
    assert calls == -(-length // chunk)  # ceil(E / Ta) chunks per episode
