"""The robot steering loop's parts: the learner's chunk as the control loop's plan, and a recorded episode
as chunk transitions (real/steering.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robosteer.policies.steering.loop import OnlineRunConfig
from robosteer.real.steering import (
    ClassifierJudge,
    LearnerActing,
    Operator,
    RobotSteeringError,
    judged,
    judged_episode,
    recorded_transitions,
    session_path,
)


class _Base:
    noise_shape = (6, 2)

    class config:
        n_obs_steps, horizon, n_action_steps = 2, 6, 3

    def __init__(self) -> None:
        self.shape_meta = {"obs": {"state": {"shape": [3]}}, "action": {"shape": [2]}}


class _Learner:
    device = "cpu"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def warmup_action(self, obs, gen):
        self.calls.append("warmup")
        return None, torch.full((1, 3, 2), -1.0)

    def explore(self, obs, gen):
        self.calls.append("explore")
        assert obs["state"].shape == (1, 2, 3) and obs["state"].dtype == torch.float32
        return None, torch.arange(6.0).reshape(1, 3, 2)  # (1, E, Da)


def test_the_learners_executed_rows_sit_where_the_control_loop_reads_them():
    learner = _Learner()
    acting = LearnerActing(learner, _Base(), torch.Generator())
    window = {"state": np.zeros((1, 2, 3), dtype=np.float64)}
    plan = acting.sample(window)
    assert plan.shape == (1, 6, 2) and learner.calls == ["warmup"]
    acting.warm = False
    plan = acting.sample(window)
    # the loop executes rows To-1 .. To-1+E-1 (max_actions = E): exactly the learner's chunk
    np.testing.assert_array_equal(plan[0, 1:4], np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(plan[0, 0], plan[0, 1])  # padding repeats the nearest executed row
    np.testing.assert_array_equal(plan[0, 4:], np.repeat(plan[0, 3:4], 2, axis=0))
    assert learner.calls == ["warmup", "explore"]


@pytest.mark.parametrize("reward", ["sparse", "shaped"])
def test_a_recorded_episode_becomes_back_to_back_chunks_of_the_applied_actions(reward):
    t_len, ta = 7, 3
    arrays = {
        "obs": {"state": np.arange(t_len * 3, dtype=np.float32).reshape(t_len, 3)},
        "actions": np.arange(t_len * 2, dtype=np.float32).reshape(t_len, 2),
        "rewards": np.array([0, 1, 2, 3, 4, 5, 10], dtype=np.float32),
        "dones": np.array([0, 0, 0, 0, 0, 0, 1], dtype=np.uint8),
    }
    cfg = OnlineRunConfig(reward=reward, reward_scale=10.0)
    t = recorded_transitions(arrays, ("state",), 2, ta, cfg)
    assert len(t["reward"]) == 3  # chunks start at 0, 3, 6
    np.testing.assert_array_equal(t["taken"][1].numpy(), arrays["actions"][3:6].reshape(-1))
    np.testing.assert_array_equal(
        t["taken"][2].numpy(), np.tile(arrays["actions"][6], 3)
    )  # cut short: padded
    np.testing.assert_array_equal(t["obs/state"][1].numpy(), arrays["obs"]["state"][[2, 3]])
    np.testing.assert_array_equal(t["next_obs/state"][0].numpy(), arrays["obs"]["state"][[2, 3]])
    np.testing.assert_array_equal(t["done"].numpy(), [0, 0, 1])
    if reward == "sparse":  # the robot's success flag only
        np.testing.assert_array_equal(t["reward"].numpy(), [-1, -1, 0])
    else:  # Σ (r/10 − 1) / Ta over the executed steps
        want = [(0.3 - 3) / 3, (1.2 - 3) / 3, (1.0 - 1) / 3]
        np.testing.assert_allclose(t["reward"].numpy(), want, rtol=1e-6)


def test_each_session_records_into_a_file_of_its_own(tmp_path):
    assert session_path(tmp_path).name == "session_000.hdf5"
    (tmp_path / "session_000.hdf5").touch()
    (tmp_path / "session_001.hdf5.partial").touch()  # a session cut short by kill -9
    assert session_path(tmp_path).name == "session_002.hdf5"


def test_held_steps_are_dropped_and_their_reward_and_success_go_to_the_action_before():
    """In sync mode the arm holds while each chunk is planned: the transitions skip those steps, so each one
    is the executed chunk; a hold's reward and success count with the action before it."""
    held = [True, False, False, True, True, False, False, True]  # 4 policy actions, Ta = 2
    t_len = len(held)
    arrays = {
        "obs": {"state": np.arange(t_len, dtype=np.float32)[:, None].repeat(3, 1)},
        "actions": np.arange(t_len, dtype=np.float32)[:, None].repeat(2, 1) + 0.5,
        "rewards": np.arange(t_len, dtype=np.float32),
        "dones": np.array([0, 0, 0, 0, 0, 0, 0, 1], dtype=np.uint8),  # success reached during the last hold
    }
    cfg = OnlineRunConfig(reward="dense")
    t = recorded_transitions(arrays, ("state",), 1, 2, cfg, held)
    np.testing.assert_array_equal(t["taken"][:, ::2].numpy(), [[1.5, 2.5], [5.5, 6.5]])  # kept actions only
    np.testing.assert_array_equal(t["obs/state"][:, 0, 0].numpy(), [1, 5])
    np.testing.assert_array_equal(t["next_obs/state"][:, 0, 0].numpy(), [5, 7])  # the next action's state
    np.testing.assert_array_equal(t["reward"].numpy(), [1 + 2 + 3 + 4, 5 + 6 + 7])
    np.testing.assert_array_equal(t["done"].numpy(), [0, 1])


def _answers(*replies):
    """A scripted terminal: each call returns the next reply (EOFError when none is left), prompts kept."""
    prompts, told, left = [], [], list(replies)

    def ask(prompt):
        prompts.append(prompt)
        if not left:
            raise EOFError
        return left.pop(0)

    return ask, told.append, prompts, told


def _episode(t_len: int) -> dict:
    return {
        "obs": {"state": np.arange(t_len, dtype=np.float32)[:, None].repeat(3, 1)},
        "actions": np.zeros((t_len, 2), dtype=np.float32),
        "rewards": np.zeros(t_len, dtype=np.float32),
        "dones": np.zeros(t_len, dtype=np.uint8),
    }


def test_the_operator_is_asked_until_it_answers_y_or_n():
    ask, tell, prompts, told = _answers("maybe", " Y ", "no")
    op = Operator(ask, tell)
    assert op(3, {"status": "truncated", "steps": 500}, _episode(500)) == 499  # a yes: the last step
    assert prompts[0] == "episode 3 ended (truncated, 500 steps): success? [y/n] " and len(prompts) == 2
    assert told == ["answer y or n (got 'maybe')"]
    assert op(4, {"status": "truncated", "steps": 500}, _episode(500)) is None


def test_a_closed_terminal_stops_the_run_in_one_line():
    ask, tell, _, _ = _answers()
    with pytest.raises(RobotSteeringError, match="robot_reward=operator needs a person at the terminal"):
        Operator(ask, tell)(0, {}, _episode(3))


def test_a_reset_is_confirmed_with_enter_and_stop_ends_the_run():
    ask, tell, prompts, told = _answers("", "later", " STOP ")
    op = Operator(ask, tell)
    assert op.confirm_reset(0) is True
    assert prompts[0] == "episode 0: reset the scene, then press Enter (or type stop) "
    assert op.confirm_reset(1) is False and len(prompts) == 3
    assert told == ["press Enter once the scene is reset, or type stop (got 'later')"]
    with pytest.raises(RobotSteeringError, match="resets=operator needs a person at the terminal"):
        op.confirm_reset(2)


class _Scores:
    """A classifier whose probability of frame t is ``p[t]`` (frames carry their index)."""

    def __init__(self, p):
        self.p = np.asarray(p, dtype=np.float32)

    def probabilities(self, frames):
        return self.p[frames[:, 0, 0, 0].astype(int)]


@pytest.mark.parametrize(
    "p, at",
    [
        ([0.1, 0.2, 0.7, 0.9, 0.95, 0.4], 2),  # frame 3 first reaches 0.8: step 2 reached it
        ([0.9, 0.1, 0.2, 0.3, 0.1, 0.1], None),  # the reset's frame is not read: no success
        ([0.1, 0.1, 0.1, 0.1, 0.1, 0.8], 4),  # the threshold itself counts
    ],
)
def test_the_classifier_judge_ends_the_episode_at_its_first_success_frame(p, at):
    frames = np.zeros((6, 4, 4, 3), dtype=np.uint8) + np.arange(6, dtype=np.uint8)[:, None, None, None]
    arrays = {**_episode(6), "obs": {"state": np.zeros((6, 3)), "image/corner": frames}}
    assert ClassifierJudge(_Scores(p), 0.8, "image/corner")(0, {}, arrays) == at


def test_a_judged_success_cuts_the_learning_episode_at_its_step():
    """The learner's episode ends where the judge saw success (its last chunk pays 0 and terminates); the
    recording keeps every step, its flags the judge's."""
    arrays = {**_episode(10), "dones": np.array([0, 0, 0, 0, 0, 0, 0, 0, 0, 1], dtype=np.uint8)}
    held = [False] * 5 + [True] * 5
    rec, learned, learned_held = judged_episode(arrays, 4, held)
    np.testing.assert_array_equal(rec["dones"], [0, 0, 0, 0, 1, 0, 0, 0, 0, 0])
    assert len(learned["actions"]) == 5 and learned["obs"]["state"][-1, 0] == 4 and learned_held == held[:5]
    t = recorded_transitions(learned, ("state",), 2, 3, OnlineRunConfig(reward="sparse"), learned_held)
    np.testing.assert_array_equal(t["reward"].numpy(), [-1, 0])  # chunks at steps 0 and 3
    np.testing.assert_array_equal(t["done"].numpy(), [0, 1])
    assert len(rec["actions"]) == 10 and arrays["dones"][9] == 1  # the recording is whole, unmutated
    # no success seen: the whole episode is learned, nothing terminates
    rec, learned, learned_held = judged_episode(arrays, None, held)
    assert len(learned["actions"]) == 10 and not learned["dones"].any() and learned_held == held


@pytest.mark.parametrize("success", [True, False])
def test_the_verdict_alone_makes_the_sparse_reward(success):
    """The robot's own flags are not read: a 'no' for an episode the robot ended on success pays -1 per
    chunk and never terminates; a 'yes' pays 0 and terminates on the last chunk only."""
    t_len = 7
    arrays = {
        "obs": {"state": np.zeros((t_len, 3), dtype=np.float32)},
        "actions": np.zeros((t_len, 2), dtype=np.float32),
        "rewards": np.zeros(t_len, dtype=np.float32),
        "dones": np.array([0, 0, 0, 1, 0, 0, 0], dtype=np.uint8),  # the robot's flag mid-episode: ignored
    }
    ep = judged(arrays, t_len - 1 if success else None)
    assert ep["actions"] is arrays["actions"] and arrays["dones"][3] == 1  # the recording is not mutated
    t = recorded_transitions(ep, ("state",), 2, 3, OnlineRunConfig(reward="sparse"))
    assert len(t["reward"]) == 3  # the whole episode: chunks at 0, 3, 6
    np.testing.assert_array_equal(t["reward"].numpy(), [-1, -1, 0] if success else [-1, -1, -1])
    np.testing.assert_array_equal(t["done"].numpy(), [0, 0, 1] if success else [0, 0, 0])


@pytest.mark.parametrize(("reward", "worst"), [("sparse", -10.0), ("shaped", -10.0), ("dense", 0.0)])
def test_a_safety_abort_is_terminal_at_the_worst_return(reward, worst):
    """γ = 0.9: the worst return of any continuation is r_min / (1 - γ): -1 / 0.1 = -10 for the -1 per chunk
    schemes, 0 for dense (Meta-World's rewards are >= 0), so aborting is never cheaper than continuing."""
    from robosteer.real.steering import abort_reward

    assert abort_reward(reward, 0.9) == pytest.approx(worst)
    t_len = 7
    arrays = {
        "obs": {"state": np.arange(t_len * 3, dtype=np.float32).reshape(t_len, 3)},
        "actions": np.zeros((t_len, 2), dtype=np.float32),
        "rewards": np.ones(t_len, dtype=np.float32),
        "dones": np.zeros(t_len, dtype=np.uint8),
        "safety_abort": True,
    }
    t = recorded_transitions(arrays, ("state",), 2, 3, OnlineRunConfig(reward=reward), gamma=0.9)
    np.testing.assert_array_equal(t["done"].numpy(), [0, 0, 1])  # the aborted chunk ends the episode
    assert t["reward"][-1].item() == pytest.approx(worst)
    assert t["reward"][0].item() != pytest.approx(worst) or reward == "dense"  # only the last chunk
    with pytest.raises(ValueError, match="gamma"):
        recorded_transitions(arrays, ("state",), 2, 3, OnlineRunConfig(reward=reward))


def test_the_chunks_a_person_commanded_are_marked_after_the_holds_are_dropped():
    """interventions (T,) per recorded step; with holds dropped the chunks are cut from the kept steps, and a
    chunk is the person's when any of its steps is."""
    held = [False, False, True, False, False, False, True, False]  # 6 kept steps, Ta = 2: three chunks
    person = [False, False, False, False, True, False, False, False]  # kept step 3 (index 4): chunk 1
    t_len = len(held)
    arrays = {
        "obs": {"state": np.zeros((t_len, 3), dtype=np.float32)},
        "actions": np.zeros((t_len, 2), dtype=np.float32),
        "rewards": np.zeros(t_len, dtype=np.float32),
        "dones": np.zeros(t_len, dtype=np.uint8),
        "interventions": np.array(person),
    }
    t = recorded_transitions(arrays, ("state",), 1, 2, OnlineRunConfig(reward="sparse"), held)
    np.testing.assert_array_equal(t["person"].numpy(), [False, True, False])
    assert t["person"].dtype == torch.bool


def test_arm_evaluation_blocks_are_checked():
    from robosteer.real.steering import ArmEvalConfig

    assert ArmEvalConfig().final_episodes == 50
    with pytest.raises(ValueError, match="final_episodes=0"):
        ArmEvalConfig(final_episodes=0)
