"""The scripted person at a twin in real mode (real/scripted.py): when it takes over, for how long, and what it
answers; driven by a fake twin's hidden truth."""

from __future__ import annotations

import numpy as np
import pytest

from robosteer.real.scripted import ScriptedOperator, ScriptedPerson


class _Twin:
    """The part of SimTwinRobot the harness reads: ``hidden()`` and ``reset_scene``."""

    def __init__(self) -> None:
        self.state = np.zeros(39, dtype=np.float32)
        self.state[4:7] = [0.1, 0.6, 0.02]  # the object
        self.state[36:39] = [0.1, 0.8, 0.02]  # the goal
        self.success_any = False
        self.scenes: list[int | None] = []

    def hidden(self) -> dict:
        return {
            "state": self.state.copy(),
            "success_any": self.success_any,
            "expert_action": np.array([0.5, 0.0, -0.5, 1.0]),
        }

    def reset_scene(self, seed: int | None) -> int:
        self.scenes.append(seed)
        return 0 if seed is None else seed


def test_the_operator_takes_over_when_the_hand_leaves_the_task_region_then_hands_back():
    twin = _Twin()
    twin.state[:3] = [0.0, 0.6, 0.2]  # the hand at the start: the region spans hand, object, goal +- 0.1
    op = ScriptedOperator(twin, margin=0.1, hold_steps=3, idle_chunks=100, max_takeovers=1)
    assert op.command({}) is None  # inside: the policy's turn
    twin.state[:3] = [0.0, 0.6, 0.31]  # z 0.31 > 0.2 + 0.1: outside
    first = op.command({})
    np.testing.assert_array_equal(first, [0.5, 0.0, -0.5, 1.0])  # the expert's hands
    twin.state[:3] = [0.0, 0.6, 0.2]
    assert op.command({}) is not None and op.command({}) is not None  # held for hold_steps = 3 ticks
    assert op.command({}) is None  # handed back
    twin.state[:3] = [0.0, 0.6, 0.5]
    assert op.command({}) is None  # max_takeovers = 1: its patience is spent this episode
    op.reset()
    assert op.command({}) is None and op.takeovers == 0 and op.takeovers_total == 1


def test_the_operator_takes_over_a_task_that_makes_no_progress_for_idle_chunks():
    """The task's distance: |hand - object| + |object - goal|; idle when it fell by less than idle_m."""
    twin = _Twin()
    twin.state[:3] = [0.1, 0.7, 0.1]
    op = ScriptedOperator(twin, chunk_steps=2, idle_chunks=2, idle_m=0.005, hold_steps=1)
    answers = [op.command({}) for _ in range(4)]  # tick 1 anchors; ticks 2 and 4 check: idle twice
    assert answers[:3] == [None, None, None] and answers[3] is not None
    op.reset()
    answers = []
    for _ in range(6):  # the hand closes in on the object by 0.004 a tick: 0.008 per check, progress
        twin.state[1] -= 0.004
        answers.append(op.command({}))
    assert answers == [None] * 6
    twin.state[1] += 0.004  # moving away: no progress, the idle count grows again


def test_the_person_resets_the_scene_from_the_seed_and_answers_from_the_hidden_success():
    twin = _Twin()
    person = ScriptedPerson(twin)
    assert person.confirm_reset("evaluation 1/2", 1_000_007) and twin.scenes == [1_000_007]
    arrays = {"actions": np.zeros((5, 4))}
    assert person(0, {}, arrays) is None
    twin.success_any = True
    assert person(0, {}, arrays) == 4  # a yes: the last step, as the terminal operator's


def test_bad_operator_settings_are_refused():
    with pytest.raises(ValueError, match="hold_steps >= 1"):
        ScriptedOperator(_Twin(), hold_steps=0)
