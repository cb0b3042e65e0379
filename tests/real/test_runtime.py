"""The control loop on an in-process fake arm: scheduling, stale dropping, blending, faults and recording."""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np
import pytest
from conftest import FakeRobot, ScriptedChunkPolicy

from robosteer.policies.data import DatasetWriter, open_dataset
from robosteer.real.robot import RobotError
from robosteer.real.runtime import ControlLoop, DeployError, RuntimeConfig, run_episodes
from robosteer.real.safety import SafetyConfig, SafetyFilter


def make_loop(robot: FakeRobot, policy: ScriptedChunkPolicy, **kw: object) -> ControlLoop:
    safety_kw = {"hold_after_s": 0.05, "stop_after_s": 0.15}
    safety_kw.update(kw.pop("safety", {}))  # type: ignore[arg-type]
    safety = SafetyFilter(
        SafetyConfig.from_dict({**robot.safety_defaults(), **safety_kw}), 4, 1 / robot.rate_hz
    )
    cfg = RuntimeConfig(**{"lead_s": 0.0, "max_steps": 200, **kw})  # type: ignore[arg-type]
    return ControlLoop(robot, policy, safety, cfg)


def test_sync_executes_each_chunk_in_order(fake_robot: FakeRobot) -> None:
    fake_robot.success_at_z = 0.05
    policy = ScriptedChunkPolicy(np.array([0.0, 0.0, 1.0, 0.5]))
    loop = make_loop(fake_robot, policy, mode="sync")
    ep = loop.run_episode(seed=0)
    assert ep["success"] and ep["status"] == "success" and ep["chunks"] >= 1
    sent = np.array([a for a, _ in fake_robot.sent if a[2] > 0])
    # Ta = 4 actions per chunk, taken from chunk indices To-1 .. To+2 (offsets 0.01 * index)
    assert np.allclose(sent[:4, 2], 1.0)  # clipped to the command bound 1.0
    assert np.allclose(sent[:4, 3], 0.5 + 0.01 * np.arange(1, 5))
    stamps = [t for _, t in fake_robot.sent]
    assert all(b > a for a, b in itertools.pairwise(stamps))  # every command carries a later execution time
    assert len(policy.windows) == ep["chunks"] and policy.windows[0].shape == (1, 2, 39)
    loop.close()


def test_sync_marks_the_steps_the_arm_held_between_chunks(fake_robot: FakeRobot) -> None:
    """``held_steps`` (what a learner skips, real/steering.py): in sync mode every chunk's Ta actions run
    back to back and the arm holds while the next is planned, so the steps not held come in runs of Ta."""
    fake_robot.max_steps, fake_robot.rate_hz = 40, 50.0
    policy = ScriptedChunkPolicy(np.array([0.0, 0.0, 0.1, 0.5]))
    policy.sample_delay_s = 0.05  # planning takes a few ticks: the arm holds meanwhile
    loop = make_loop(fake_robot, policy, mode="sync", safety={"hold_after_s": 0.2, "stop_after_s": 1.0})
    ep = loop.run_episode(seed=0)
    held = np.asarray(ep["held_steps"])
    assert len(held) == len(ep["arrays"]["actions"]) and held.any()
    runs = [len(list(g)) for k, g in itertools.groupby(held) if not k]  # lengths of the non-held stretches
    # a late tick can move one step across a slot boundary (the mark comes from capture times)
    assert len(runs) >= 3 and all(3 <= n <= 5 for n in runs[:-1]) and runs[-1] <= 5, runs
    loop.close()


def test_async_drops_stale_actions_and_blends(fake_robot: FakeRobot) -> None:
    fake_robot.max_steps = 40
    policy = ScriptedChunkPolicy(np.array([0.1, 0.0, 0.0, 0.0]), horizon=16, n_action_steps=8)
    loop = make_loop(fake_robot, policy, mode="async", lead_s=0.02, async_threshold=12, blend=0.5)
    ep = loop.run_episode(seed=0)
    assert ep["status"] == "truncated" and ep["chunks"] >= 3
    assert ep["stale_dropped"] > 0  # lead 4 ticks at 200 Hz: the start of every chunk is already past
    # blending of overlapping chunks gives values between two chunk positions (0.01 steps)
    grip = np.array([a[3] for a, _ in fake_robot.sent if a[0] > 0])
    assert np.any(np.abs(grip * 100 - np.round(grip * 100)) > 1e-3)
    loop.close()


def test_policy_nan_never_reaches_the_arm_and_the_watchdog_stops(fake_robot: FakeRobot) -> None:
    policy = ScriptedChunkPolicy(np.array([0.2, 0.0, 0.0, 0.0]))
    policy.nan_after = 1
    loop = make_loop(fake_robot, policy, mode="sync")
    with pytest.raises(DeployError, match="watchdog: no fresh action") as e:
        loop.run_episode(seed=0)
    assert e.value.episode is not None and e.value.episode["rejected_chunks"] >= 1
    assert fake_robot.stops >= 1
    assert loop.safety.counts["nan"] >= 1 and loop.safety.counts["stop"] == 1
    # FakeRobot.send_action asserts that every command was finite; held commands are zero motion
    assert all(np.isfinite(a).all() for a, _ in fake_robot.sent)
    loop.close()


def test_stalled_policy_holds_then_stops(fake_robot: FakeRobot) -> None:
    policy = ScriptedChunkPolicy(np.array([0.2, 0.0, 0.0, 0.0]))
    policy.stall_after = 1
    loop = make_loop(fake_robot, policy, mode="async", policy_timeout_s=5.0)
    with pytest.raises(DeployError, match="policy request in flight: True"):
        loop.run_episode(seed=0)
    assert loop.safety.counts["hold"] >= 1 and fake_robot.stops >= 1
    moving = [i for i, (a, _) in enumerate(fake_robot.sent) if a[0] != 0]
    assert moving and all(np.allclose(a[:3], 0) for a, _ in fake_robot.sent[moving[-1] + 1 :])  # held after
    policy.release.set()
    loop.close()


def test_policy_timeout_shorter_than_the_watchdog(fake_robot: FakeRobot) -> None:
    policy = ScriptedChunkPolicy(np.array([0.2, 0.0, 0.0, 0.0]))
    policy.stall_after = 0
    loop = make_loop(
        fake_robot,
        policy,
        mode="sync",
        policy_timeout_s=0.05,
        safety={"hold_after_s": 0.5, "stop_after_s": 1.0},
    )
    with pytest.raises(DeployError, match="policy stalled"):
        loop.run_episode(seed=0)
    policy.release.set()
    loop.close()


def test_faults_keep_the_recorded_data(fake_robot: FakeRobot, tmp_path) -> None:
    policy = ScriptedChunkPolicy(np.array([0.0, 0.0, 0.5, 0.0]))
    fake_robot.max_steps = 15
    loop = make_loop(fake_robot, policy, mode="sync")
    path = tmp_path / "episodes.hdf5"
    with DatasetWriter(path, env_args={"env_name": "fake"}) as writer:

        def kill_server_next_episode(ep: dict) -> None:
            policy.fail_after = policy.calls + 1  # the server dies during the second episode

        result = run_episodes(loop, 3, [0, 1, 2], writer=writer, on_episode=kill_server_next_episode)
    assert result["episodes"] == 2 and "policy failed: ConnectionError" in result["error"]
    assert result["per_episode"][0]["status"] == "truncated" and result["per_episode"][1]["status"] == "error"
    with open_dataset(path) as demos:
        assert demos.num_episodes == 2
        ep = demos.episode(1)
        assert ep["attrs"]["status"] == "error" and len(ep["actions"]) >= 1
        assert ep["obs"]["state"].shape[1] == 39
    loop.close()


def test_robot_link_lost_is_reported(fake_robot: FakeRobot) -> None:
    fake_robot.fail_on_step = 5
    loop = make_loop(fake_robot, ScriptedChunkPolicy(np.array([0.1, 0.0, 0.0, 0.0])), mode="sync")
    with pytest.raises(DeployError, match="robot link lost"):
        loop.run_episode(seed=0)
    loop.close()


def test_policy_must_match_the_robot_observations(fake_robot: FakeRobot) -> None:
    policy = ScriptedChunkPolicy(np.zeros(4))
    policy.shape_meta = {"obs": {"image/wrist": {"shape": [84, 84, 3]}}, "action": {"shape": [4]}}
    with pytest.raises(ValueError, match=r"observation keys \['image/wrist'\]"):
        make_loop(fake_robot, policy)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"mode": "fast"}, "mode='fast'"),
        ({"obs_timeout_s": 0.0}, "obs_timeout_s=0.0 is not valid"),
        ({"obs_timeout_s": float("nan")}, "obs_timeout_s=nan is not valid"),
        ({"policy_timeout_s": -1.0}, "policy_timeout_s=-1.0 is not valid"),
    ],
)
def test_bad_runtime_config(kwargs: dict, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        RuntimeConfig(**kwargs).validate()
    RuntimeConfig(obs_timeout_s=5.0, policy_timeout_s=0.5).validate()  # positive seconds pass


def test_estop_from_another_thread_stops_the_episode(fake_robot: FakeRobot) -> None:
    import threading

    fake_robot.max_steps = 10_000
    loop = make_loop(fake_robot, ScriptedChunkPolicy(np.array([0.1, 0.0, 0.0, 0.0])), mode="async")
    threading.Timer(0.1, loop.safety.estop, args=("operator e-stop",)).start()
    with pytest.raises(DeployError, match=r"stopped|watchdog"):
        loop.run_episode(seed=0)
    assert fake_robot.stops >= 2  # the e-stop hook, then the runtime's own stop
    assert loop.safety.events[-1].kind in ("estop", "stop") and loop.safety.counts["estop"] == 1
    loop.close()


class RampPolicy(ScriptedChunkPolicy):
    """Continues its prefix: after the known actions, the gripper channel rises by 0.01 per chunk position.

    With the right prefix (the commands executed and committed, slot for slot) the arm receives one unbroken
    ramp across chunk boundaries; a prefix shifted by k slots shows as a jump of 0.01 * k at a boundary.
    """

    supports_prefix = True

    def __init__(self) -> None:
        super().__init__(np.zeros(4), horizon=16, n_action_steps=4)
        self.prefixes: list[np.ndarray | None] = []

    def sample(self, obs: dict[str, np.ndarray], noise: Any = None, prefix: Any = None) -> np.ndarray:
        self.calls += 1
        self.prefixes.append(None if prefix is None else np.asarray(prefix))
        out = np.zeros((1, self.horizon, 4), dtype=np.float32)
        p = 0 if prefix is None else prefix.shape[1]
        if p:
            out[0, :p] = prefix[0]
        last = out[0, p - 1, 3] if p else 0.0
        out[0, p:, 3] = last + 0.01 * np.arange(1, self.horizon - p + 1)
        return out


@pytest.mark.parametrize("inpaint", [True, False])
def test_async_inpainting_continues_the_committed_actions(fake_robot: FakeRobot, inpaint: bool) -> None:
    fake_robot.max_steps = 60
    # 50 Hz (20 ms slots) with a 4-slot lead: at the fixture's 200 Hz a loaded 2-core machine misses slots,
    # which shows as holds and jumps that have nothing to do with inpainting
    fake_robot.rate_hz = 50.0
    policy = RampPolicy()
    loop = make_loop(fake_robot, policy, mode="async", lead_s=0.08, inpaint=inpaint)
    ep = loop.run_episode(seed=0)
    loop.close()
    assert ep["status"] == "truncated" and ep["chunks"] >= 4
    grip = np.array([a[3] for a, _ in fake_robot.sent])
    moving = grip[np.argmax(grip > 0) :]  # from the first chunk's first action on
    steps = np.round(np.diff(moving) * 100).astype(int)
    if inpaint:
        assert all(p is not None for p in policy.prefixes)
        assert policy.prefixes[0].shape == (1, 1, 4)  # first chunk: the arm at rest, only the past (hold)
        assert all(p.shape[1] >= 1 + 4 for p in policy.prefixes[1:])  # later: past + in flight (lead 4)
        # one unbroken ramp: +1 per slot (0 where the arm held), never a jump back or ahead
        assert set(steps.tolist()) <= {0, 1} and (steps == 1).mean() > 0.8, steps
    else:
        assert all(p is None for p in policy.prefixes)
        assert (steps < 0).any()  # each chunk restarts its own ramp: the plans do not join up


@pytest.mark.parametrize("where", ["robot", "policy"])
def test_a_fault_between_episodes_is_reported_like_one_inside(
    fake_robot: FakeRobot, tmp_path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link (robot.reset) or the server (policy.reset) lost between episodes: the arm is stopped, the
    recorded episodes stay, and the run returns its figures with ``error`` instead of raising."""
    fake_robot.max_steps = 15
    policy = ScriptedChunkPolicy(np.array([0.0, 0.0, 0.5, 0.0]))
    resets = {"n": 0}
    target = fake_robot if where == "robot" else policy
    original = target.reset

    def reset(*args: Any, **kw: Any) -> Any:
        resets["n"] += 1
        if resets["n"] == 2:
            raise RobotError("link lost") if where == "robot" else ConnectionError("policy server gone")
        return original(*args, **kw)

    monkeypatch.setattr(target, "reset", reset)
    loop = make_loop(fake_robot, policy, mode="sync")
    stops = fake_robot.stops
    with DatasetWriter(tmp_path / "episodes.hdf5", env_args={"env_name": "fake"}) as writer:
        result = run_episodes(loop, 3, [0, 1, 2], writer=writer)
    loop.close()
    assert f"{where} reset failed" in result["error"] and "the arm was stopped" in result["error"], result
    assert (
        result["episodes"] == 1 and result["per_episode"][0]["status"] == "truncated"
    )  # not the unstarted one
    assert fake_robot.stops > stops
    with open_dataset(tmp_path / "episodes.hdf5") as demos:
        assert demos.num_episodes == 1


class _Person:
    """A scripted person: holds the arm from tick ``start`` for ``ticks`` ticks with ``command``."""

    def __init__(self, start: int, ticks: int, command: np.ndarray) -> None:
        self.start, self.ticks, self.command_value = start, ticks, command
        self.calls, self.resets, self.noted = 0, 0, []

    def reset(self) -> None:
        self.resets += 1

    def note_command(self, cmd: np.ndarray) -> None:
        self.noted.append(np.asarray(cmd))

    def command(self, obs: dict[str, np.ndarray]) -> np.ndarray | None:
        self.calls += 1
        return self.command_value if self.start <= self.calls - 1 < self.start + self.ticks else None


def test_a_person_takes_over_their_commands_are_filtered_recorded_and_the_plan_restarts_on_hand_back(
    fake_robot: FakeRobot,
) -> None:
    """teleop: while the person holds control their command (through the safety filter) is sent instead of
    the policy's, the steps are marked as interventions (not held), the policy's plan in flight is dropped,
    and on hand-back the next chunk is planned from an observation taken after the takeover."""
    fake_robot.max_steps, fake_robot.rate_hz = 40, 100.0
    policy = ScriptedChunkPolicy(np.array([0.0, 0.0, 0.1, 0.5]))
    person = _Person(start=6, ticks=10, command=np.array([2.0, 0.0, 0.0, 1.0]))  # x beyond the bound
    loop = make_loop(fake_robot, policy, mode="sync", safety={"hold_after_s": 0.2, "stop_after_s": 1.0})
    loop.teleop = person
    ep = loop.run_episode(seed=0)
    sent = np.array([a for a, _ in fake_robot.sent])  # (ticks, 4)
    persons = sent[sent[:, 0] > 0.5]  # the policy's x stays below 0.1
    assert len(persons) == 10 and np.allclose(persons[:, 0], 1.0)  # clipped to the command bound, every one
    flags = np.asarray(ep["interventions"])
    assert flags.sum() == ep["intervention_steps"] and 8 <= flags.sum() <= 10  # a step's obs may be merged
    held = np.asarray(ep["held_steps"])
    assert not held[flags].any()  # a person's step is an acted step, not a hold
    after = [w[0, -1, 0] for w in policy.windows]  # the hand's x in each planned window
    assert max(after) >= 0.09  # a chunk was planned from where the person left the arm (x = 10 x 0.01)
    assert person.resets == 1 and len(person.noted) == len(fake_robot.sent)
    loop.close()


def test_the_measured_position_past_the_workspace_aborts_the_episode_not_the_run(
    fake_robot: FakeRobot,
) -> None:
    """safety.abort_margin: the hand 0.01 past the workspace edge + margin ends the episode (status
    safety_abort, the arm stopped, recorded), where the filter's limits alone only bound the commands."""
    fake_robot.max_steps = 200
    policy = ScriptedChunkPolicy(np.array([0.0, 0.0, 1.0, 0.0]))  # up, 0.01 per step
    limits = {"workspace_low": [-1.0, -1.0, -1.0], "workspace_high": [1.0, 1.0, 0.05], "abort_margin": 0.02}
    loop = make_loop(fake_robot, policy, mode="sync", safety=limits)
    # the workspace bounds commands: push the hand past it as a collision would, then the check fires
    original = fake_robot.send_action

    def pushed(action: np.ndarray, timestamp: float | None = None) -> None:
        original(action, timestamp)
        fake_robot.pos[2] += 0.01  # something shoves the arm up beyond what was commanded

    fake_robot.send_action = pushed  # type: ignore[method-assign]
    ep = loop.run_episode(seed=0)
    assert ep["status"] == "safety_abort" and "safety.abort_margin=0.02" in ep["safety_abort"]
    assert fake_robot.pos[2] > 0.07 - 1e-9 and fake_robot.stops >= 1
    arrays = ep["arrays"]
    assert len(arrays["actions"]) == len(
        arrays["obs"]["state"]
    )  # the last step recorded with the stop's hold
    loop.close()


def test_a_protective_stop_the_robot_reports_ends_the_episode_for_safety(fake_robot: FakeRobot) -> None:
    from robosteer.real.robot import SafetyStop

    fake_robot.max_steps = 200
    policy = ScriptedChunkPolicy(np.array([0.0, 0.0, 0.1, 0.0]))
    loop = make_loop(fake_robot, policy, mode="sync")
    original = fake_robot.get_observation

    def observe() -> Any:
        if fake_robot.step >= 12:
            raise SafetyStop("protective stop (safety mode 3)")
        return original()

    fake_robot.get_observation = observe  # type: ignore[method-assign]
    ep = loop.run_episode(seed=0)
    assert ep["status"] == "safety_abort" and "protective stop" in ep["safety_abort"]
    assert ep["arrays"] is not None and fake_robot.stops >= 1
    loop.close()
