"""The small Robot interface every driver (sim twin, UR, ROS 2) implements.

Modelled on LeRobot's ``Robot`` ABC, plus what timestamped execution needs (diffusion_policy's real-robot
runner): every observation carries the wall-clock time it was captured, every command the wall-clock time
it is meant to execute, and the driver declares its spaces, control modes and rate so that the runtime
and the safety filter can be configured from the robot rather than by hand.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class RobotError(RuntimeError):
    """The robot refused or failed a command, lost its connection, or is in a protective stop."""


class SafetyStop(RobotError):
    """The arm stopped itself for safety (a protective or emergency stop): the control loop aborts the episode
    (recorded, status ``safety_abort``), not the run; a person clears the stop before the next one."""


@dataclass
class Observation:
    """One observation: arrays by key, the capture time (``time.time()`` seconds) and robot-side info.

    ``info`` holds what the robot knows beyond sensors: ``step``, and for the sim twin ``success``,
    ``reward``, ``done`` (episode over) and ``episode_seed``.
    """

    data: dict[str, np.ndarray]
    timestamp: float
    seq: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    def age(self, now: float | None = None) -> float:
        """Seconds since capture."""
        return (time.time() if now is None else now) - self.timestamp


@dataclass(frozen=True)
class ArraySpec:
    """Shape, dtype and (optional) bounds of one array the robot produces or accepts."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    low: tuple[float, ...] | None = None
    high: tuple[float, ...] | None = None


class Robot(ABC):
    """A robot arm (or its twin) as the runtime sees it. Use as a context manager: connect ... disconnect.

    Subclasses declare ``control_modes`` (the first is the default), ``rate_hz`` (the control rate the
    runtime ticks at), ``action_spec`` and ``observation_spec``.
    """

    control_modes: tuple[str, ...] = ()
    rate_hz: float = 10.0

    @property
    def data_rate_hz(self) -> float:
        """The rate the recorded steps stand for in the world, which a dataset records as its fps: an arm's
        control rate; a simulator's own step rate, whatever pace it is run at (the sim twin)."""
        return float(self.rate_hz)

    def __init__(self, control_mode: str | None = None) -> None:
        mode = control_mode or (self.control_modes[0] if self.control_modes else "")
        if self.control_modes and mode not in self.control_modes:
            raise ValueError(
                f"control_mode={mode!r} is not valid for {type(self).__name__}: expected one of {self.control_modes}"
            )
        self.control_mode = mode

    @property
    @abstractmethod
    def action_spec(self) -> ArraySpec:
        """The command array ``send_action`` takes in the current control mode."""

    @property
    @abstractmethod
    def observation_spec(self) -> dict[str, ArraySpec]:
        """The arrays ``get_observation().data`` holds."""

    @property
    @abstractmethod
    def is_connected(self) -> bool: ...

    @abstractmethod
    def connect(self) -> None:
        """Open the connection; raise :class:`RobotError` with the reason when it fails."""

    @abstractmethod
    def get_observation(self) -> Observation:
        """The latest observation (never blocks longer than a control period)."""

    @abstractmethod
    def send_action(self, action: np.ndarray, timestamp: float | None = None) -> None:
        """Command ``action`` to take effect at wall-clock ``timestamp`` (None: now); drivers drop stale ones."""

    @abstractmethod
    def stop(self) -> None:
        """Stop motion now (e-stop path): safe to call at any time, also from another thread."""

    @abstractmethod
    def disconnect(self) -> None:
        """Stop and release the connection. Idempotent."""

    def hold_action(self, obs: Observation | None, last_action: np.ndarray | None) -> np.ndarray:
        """The command that holds the arm where it is (watchdog); drivers override for their control mode."""
        raise NotImplementedError(f"{type(self).__name__} defines no hold action")

    def reset(self, seed: int | None = None) -> Observation:
        """Start an episode. Real arms: the operator resets the scene; drivers may move home. Returns the first obs."""
        return self.get_observation()

    def command_latency_s(self) -> float:
        """Estimated one-way delay from ``send_action`` to the arm (the runtime sends that far ahead)."""
        return 0.0

    def __enter__(self) -> Robot:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()
