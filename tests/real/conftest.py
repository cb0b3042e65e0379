"""Fakes shared by the real-robot tests: a tiny real diffusion policy, chunk policies with faults, a robot."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest
import torch

from robosteer.real.robot import ArraySpec, Observation, Robot, RobotError

STATE_DIM, ACTION_DIM = 39, 4
TINY = {"mlp_hidden_dim": 32, "mlp_n_blocks": 2, "time_embed_dim": 16, "horizon": 8, "n_action_steps": 4}


def tiny_policy(seed: int = 0) -> Any:
    """An untrained (randomised) 39-d state / 4-d action diffusion policy: real code path, fast."""
    from robosteer.policies import make_policy

    torch.manual_seed(seed)
    shape_meta = {
        "obs": {"state": {"shape": [STATE_DIM], "type": "low_dim"}},
        "action": {"shape": [ACTION_DIM]},
    }

    def s(d: int, lo: float, hi: float) -> dict:
        return {"min": np.full(d, lo), "max": np.full(d, hi), "mean": np.zeros(d), "std": np.ones(d)}

    stats = {"state": s(STATE_DIM, -1.0, 1.0), "action": s(ACTION_DIM, -1.0, 1.0)}
    policy = make_policy("diffusion", shape_meta, stats=stats, **TINY)
    policy.task = "push-v3"
    return policy.eval()


class ScriptedChunkPolicy:
    """A chunk policy with the runtime's surface whose behaviour tests control (constant, NaN, stall, fail)."""

    def __init__(
        self, action: np.ndarray, horizon: int = 8, n_obs_steps: int = 2, n_action_steps: int = 4
    ) -> None:
        self.action = np.asarray(action, dtype=np.float32)
        self.horizon, self.n_obs_steps, self.n_action_steps = horizon, n_obs_steps, n_action_steps
        self.shape_meta = {"obs": {"state": {"shape": [STATE_DIM]}}, "action": {"shape": [len(self.action)]}}
        self.noise_shape = (horizon, len(self.action))
        self.calls = 0
        self.stall_after: int | None = None  # calls beyond this block until released
        self.release = threading.Event()
        self.nan_after: int | None = None
        self.fail_after: int | None = None
        self.windows: list[np.ndarray] = []
        self.sample_delay_s = 0.0  # planning time (seconds) of every call

    def sample(self, obs: dict[str, np.ndarray], noise: Any = None) -> np.ndarray:
        self.calls += 1
        self.windows.append(np.asarray(obs["state"]))
        if self.sample_delay_s:
            time.sleep(self.sample_delay_s)
        if self.stall_after is not None and self.calls > self.stall_after:
            self.release.wait(5.0)
        if self.fail_after is not None and self.calls > self.fail_after:
            raise ConnectionError("policy server gone")
        b = np.asarray(obs["state"]).shape[0]
        out = np.broadcast_to(self.action, (b, self.horizon, len(self.action))).copy()
        out += 0.01 * np.arange(self.horizon, dtype=np.float32)[None, :, None]  # tells chunk positions apart
        if self.nan_after is not None and self.calls > self.nan_after:
            out[:] = np.nan
        return out

    def reset(self, env_ids: Any = None) -> None:
        self.windows.clear()


class ServablePolicy(ScriptedChunkPolicy):
    """ScriptedChunkPolicy with what PolicyBackend reads from a GenerativePolicy."""

    def __init__(self, action: np.ndarray | None = None) -> None:
        super().__init__(np.array([0.1, 0.2, 0.3, 0.4]) if action is None else action)

        class _Cfg:
            n_obs_steps, horizon, n_action_steps = 2, 8, 4

        self.config = _Cfg()

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.tile(self.action, (obs["state"].shape[0], 1))


class FakeRobot(Robot):
    """An in-process delta-control arm: position integrates commands on every get_observation tick."""

    control_modes = ("ee_delta",)

    def __init__(
        self, rate_hz: float = 200.0, success_at_z: float | None = None, max_steps: int = 60
    ) -> None:
        super().__init__()
        self.rate_hz = rate_hz
        self.connected = False
        self.pos = np.zeros(3)
        self.sent: list[tuple[np.ndarray, float]] = []
        self.stops = 0
        self.step = 0
        self.seq = 0
        self.success_at_z = success_at_z
        self.max_steps = max_steps
        self.fail_on_step: int | None = None
        self.done = False

    @property
    def action_spec(self) -> ArraySpec:
        return ArraySpec((4,), "float32", (-1.0,) * 4, (1.0,) * 4)

    @property
    def observation_spec(self) -> dict[str, ArraySpec]:
        return {"state": ArraySpec((STATE_DIM,))}

    @property
    def is_connected(self) -> bool:
        return self.connected

    def connect(self) -> None:
        self.connected = True

    def disconnect(self) -> None:
        self.connected = False

    def reset(self, seed: int | None = None) -> Observation:
        self.pos[:] = 0.0
        self.step = 0
        self.done = False
        self.sent.clear()
        return self.get_observation()

    def get_observation(self) -> Observation:
        if self.fail_on_step is not None and self.step >= self.fail_on_step:
            raise RobotError("link lost")
        state = np.zeros(STATE_DIM, dtype=np.float32)
        state[:3] = self.pos
        self.seq += 1
        success = self.success_at_z is not None and self.pos[2] >= self.success_at_z
        done = success or self.step >= self.max_steps
        info = {"step": self.step, "success": bool(success), "done": bool(done), "reward": float(self.pos[2])}
        return Observation({"state": state}, time.time(), self.seq, info)

    def send_action(self, action: np.ndarray, timestamp: float | None = None) -> None:
        a = np.asarray(action, dtype=np.float64)
        assert a.shape == (4,) and np.isfinite(a).all(), f"unsafe command reached the arm: {a}"
        self.sent.append((a.copy(), float(timestamp or time.time())))
        self.pos += 0.01 * a[:3]
        self.step += 1

    def hold_action(self, obs: Observation | None, last_action: np.ndarray | None) -> np.ndarray:
        return np.zeros(4)

    def stop(self) -> None:
        self.stops += 1

    def safety_defaults(self) -> dict[str, Any]:
        return {
            "kind": "delta",
            "command_low": [-1.0] * 4,
            "command_high": [1.0] * 4,
            "gripper_index": 3,
            "delta_scale": 0.01,
        }


@pytest.fixture
def fake_robot() -> FakeRobot:
    robot = FakeRobot()
    robot.connect()
    return robot
