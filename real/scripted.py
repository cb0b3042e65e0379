"""The person at a twin in real mode, scripted: resets the scene, judges episodes, takes the arm over.

Why: the real-arm path (no simulator in the loop, judged evaluation, interventions, safety aborts) must run in
``make test`` and in a measured run without anyone at a keyboard. The twin in real mode
(real/drivers/sim_twin.py) behaves as an arm does; this module plays its person, through the same doors a
person uses: :meth:`ScriptedPerson.confirm_reset` answers ``resets=operator``'s prompt, its judge answers
``robot_reward=operator``'s question, and :class:`ScriptedOperator` is a :class:`~robosteer.real.teleop.Teleop`.
What they know comes from the twin's hidden truth (:meth:`SimTwinRobot.hidden`), which only this harness
reads: the control loop, the learner and the recording never see it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from robosteer.real.teleop import Teleop


class ScriptedPerson:
    """Resets the twin's scene before each episode (from the episode's seed) and says whether it succeeded
    (the twin's success at any step since the scene was reset: what a person watching would answer)."""

    def __init__(self, robot: Any) -> None:
        self.robot = robot

    def confirm_reset(self, episode: int | str, seed: int | None = None) -> bool:
        self.robot.reset_scene(seed)
        return True

    def __call__(self, episode: int | str, summary: dict[str, Any], arrays: dict[str, Any]) -> int | None:
        """The verdict, as :class:`~robosteer.real.steering.Operator` gives it: the last step on a yes."""
        hidden = self.robot.hidden() or {}
        return len(arrays["actions"]) - 1 if hidden.get("success_any") else None


# Meta-World's 39-d state: the hand's xyz, the first object's xyz, the goal's xyz
HAND, OBJECT, GOAL = slice(0, 3), slice(4, 7), slice(36, 39)


class ScriptedOperator(Teleop):
    """Takes the arm over when the hand leaves the task's region (the box around where the hand, the object
    and the goal were when the episode began, widened by ``margin`` metres) or the task made no progress for
    ``idle_chunks`` chunks in a row (its distance, hand to object plus object to goal, fell by less than
    ``idle_m`` over each ``chunk_steps`` ticks), drives it with the task's scripted expert for ``hold_steps``
    ticks, then hands back. At most ``max_takeovers`` per episode (a person's patience), so the policy is
    never simply replaced."""

    def __init__(
        self,
        robot: Any,
        margin: float = 0.1,
        chunk_steps: int = 8,
        idle_chunks: int = 3,
        idle_m: float = 0.005,
        hold_steps: int = 40,
        max_takeovers: int = 2,
    ) -> None:
        if chunk_steps < 1 or idle_chunks < 1 or hold_steps < 1 or min(max_takeovers, idle_m, margin) < 0:
            raise ValueError(
                "the scripted operator needs chunk_steps, idle_chunks, hold_steps >= 1 and margin, idle_m, "
                f"max_takeovers >= 0; got {chunk_steps}, {idle_chunks}, {hold_steps}, {margin}, {idle_m}, "
                f"{max_takeovers}"
            )
        self.robot, self.margin = robot, float(margin)
        self.chunk_steps, self.idle_chunks, self.idle_m = int(chunk_steps), int(idle_chunks), float(idle_m)
        self.hold_steps, self.max_takeovers = int(hold_steps), int(max_takeovers)
        self.takeovers_total = 0
        self.reset()

    def reset(self) -> None:
        self.left = 0  # ticks of the current takeover still to go
        self.takeovers = 0
        self.ticks = 0
        self.idle = 0
        self.anchor: float | None = None  # the task's distance where the current idle check began
        self.low: np.ndarray | None = None  # the task's region, set at the episode's first tick
        self.high: np.ndarray | None = None

    def command(self, obs: Mapping[str, np.ndarray]) -> np.ndarray | None:
        hidden = self.robot.hidden()
        if hidden is None:
            return None
        if self.left > 0:
            self.left -= 1
            return np.asarray(hidden["expert_action"], dtype=np.float64)
        state = np.asarray(hidden["state"], dtype=np.float64)
        hand = state[HAND]
        if self.low is None:  # the episode's first tick: where the task is
            points = np.stack([hand, state[OBJECT], state[GOAL]])  # (3, 3)
            self.low, self.high = points.min(0) - self.margin, points.max(0) + self.margin
        distance = float(np.linalg.norm(hand - state[OBJECT]) + np.linalg.norm(state[OBJECT] - state[GOAL]))
        if self.takeovers < self.max_takeovers and (self._outside(hand) or self._idle(distance)):
            self.takeovers += 1
            self.takeovers_total += 1
            self.left, self.idle, self.anchor = self.hold_steps - 1, 0, None
            return np.asarray(hidden["expert_action"], dtype=np.float64)
        return None

    def _outside(self, hand: np.ndarray) -> bool:
        return bool(np.any(hand < self.low) or np.any(hand > self.high))

    def _idle(self, distance: float) -> bool:
        """Every ``chunk_steps`` ticks: has the task's distance fallen by less than ``idle_m`` since the last
        check, ``idle_chunks`` checks in a row."""
        self.ticks += 1
        if self.anchor is None:
            self.anchor = distance
            return False
        if self.ticks % self.chunk_steps:
            return False
        progress, self.anchor = self.anchor - distance, distance
        self.idle = self.idle + 1 if progress < self.idle_m else 0
        return self.idle >= self.idle_chunks
