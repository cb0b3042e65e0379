"""The safety filter: each limit changes exactly what it should and logs an event; the watchdog escalates."""

from __future__ import annotations

import time

import numpy as np
import pytest

from robosteer.real.safety import SafetyConfig, SafetyFilter


def make(**kw: object) -> SafetyFilter:
    base = {"command_low": [-1.0] * 4, "command_high": [1.0] * 4, "gripper_index": 3, "delta_scale": 0.01}
    return SafetyFilter(SafetyConfig.from_dict({**base, **kw}), action_dim=4, dt=0.0125)


def obs_at(pos: list[float]) -> dict[str, np.ndarray]:
    state = np.zeros(39, np.float32)
    state[:3] = pos
    return {"state": state}


def test_nan_inf_and_bad_shape_become_the_hold_command() -> None:
    f = make()
    f.filter([0.1, 0.2, 0.3, 0.7], obs_at([0, 0.6, 0.2]))
    for bad in ([np.nan, 0, 0, 0], [0, np.inf, 0, 0], [0.1, 0.2]):
        out = f.filter(bad, obs_at([0, 0.6, 0.2]))
        assert np.array_equal(out, [0.0, 0.0, 0.0, 0.7])  # no motion, gripper kept
    assert f.counts["nan"] == 2 and f.counts["shape"] == 1


def test_bounds_and_gripper_are_clipped() -> None:
    f = make(gripper_low=-0.5, gripper_high=0.5)
    out = f.filter([3.0, -2.0, 0.5, 0.9], None)
    assert np.allclose(out, [1.0, -1.0, 0.5, 0.5])
    assert f.counts["clip"] == 1 and f.counts["gripper"] == 1


def test_per_step_delta_limit() -> None:
    f = make(max_delta=0.2)
    f.filter([0.0, 0.0, 0.0, 0.0], None)
    out = f.filter([1.0, -1.0, 0.1, 0.0], None)
    assert np.allclose(out, [0.2, -0.2, 0.1, 0.0])
    assert f.counts["delta"] == 1


def test_velocity_limit_scales_delta_commands() -> None:
    f = make(max_velocity=0.5)
    out = f.filter([0.6, 0.8, 0.0, 1.0], None)
    assert np.isclose(np.linalg.norm(out[:3]), 0.5) and np.allclose(
        out[:3] / np.linalg.norm(out[:3]), [0.6, 0.8, 0.0]
    )
    assert out[3] == 1.0


def test_velocity_limit_on_absolute_targets() -> None:
    cfg = SafetyConfig.from_dict(
        {
            "kind": "absolute",
            "max_velocity": 1.0,
            "position_key": "q",
            "position_slice": [0, 2],
            "pos_dims": [0, 1],
        }
    )
    f = SafetyFilter(cfg, action_dim=2, dt=0.1)
    out = f.filter([1.0, -0.05], {"q": np.array([0.0, 0.0])})
    assert np.allclose(out, [0.1, -0.05])  # at most 1 rad/s * 0.1 s away from the measured angles


def test_workspace_blocks_only_outward_motion() -> None:
    f = make(workspace_low=[-0.5, 0.4, 0.05], workspace_high=[0.5, 1.0, 0.5])
    # 0.5 cm below the ceiling: +z allowed up to 0.5 command units (0.005 m / 0.01)
    out = f.filter([0.0, 0.0, 1.0, 0.0], obs_at([0.0, 0.6, 0.495]))
    assert np.allclose(out, [0.0, 0.0, 0.5, 0.0])
    out = f.filter([0.3, -0.2, -1.0, 0.0], obs_at([0.0, 0.6, 0.495]))  # inward: untouched
    assert np.allclose(out, [0.3, -0.2, -1.0, 0.0])
    out = f.filter([-1.0, 0.0, 0.0, 0.0], obs_at([-0.6, 0.6, 0.2]))  # already outside: no further outward
    assert np.allclose(out, [0.0, 0.0, 0.0, 0.0])
    assert f.counts["workspace"] == 2


def test_disabled_filter_passes_values_through() -> None:
    f = make(enabled=False)
    assert np.allclose(f.filter([3.0, 0, 0, 0], None), [3.0, 0, 0, 0])


def test_watchdog_holds_then_stops() -> None:
    f = make(hold_after_s=0.1, stop_after_s=0.3)
    f.filter([0.1, 0, 0, 0], None, now=100.0)
    assert f.watchdog(now=100.05) == "ok"
    assert f.watchdog(now=100.15) == "hold"
    assert f.watchdog(now=100.35) == "stop"
    assert f.watchdog(now=100.36) == "stop"  # latched
    with pytest.raises(RuntimeError, match="stopped"):
        f.filter([0.0, 0, 0, 0], None)
    f.reset()
    assert f.watchdog(now=200.0) == "ok"


def test_estop_runs_hooks_and_latches() -> None:
    f = make()
    calls: list[str] = []
    f.add_estop_hook(calls.append)
    f.estop("operator pressed e-stop")
    assert calls == ["operator pressed e-stop"] and f.counts["estop"] == 1
    with pytest.raises(RuntimeError):
        f.filter([0.0, 0, 0, 0], None)


def test_bad_config_names_the_key() -> None:
    with pytest.raises(ValueError, match="did you mean 'max_delta'"):
        SafetyConfig.from_dict({"max_delt": 0.1})
    with pytest.raises(ValueError, match="hold_after_s <= stop_after_s"):
        SafetyConfig.from_dict({"hold_after_s": 2.0, "stop_after_s": 1.0})


# ---------------------------------------------------------------- no input makes a non-finite command
BAD = [np.nan, np.inf, -np.inf]
# Every mode: delta without limits, with a workspace box, with a velocity limit; absolute without limits,
# with a velocity limit, with joint bounds; and the filter switched off.
MODES: dict[str, dict[str, object]] = {
    "delta": {},
    "delta_workspace": {"workspace_low": [-0.5, 0.4, 0.05], "workspace_high": [0.5, 1.0, 0.5]},
    "delta_velocity": {"max_velocity": 0.5, "max_delta": 0.5},
    "absolute": {"kind": "absolute"},
    "absolute_velocity": {"kind": "absolute", "max_velocity": 1.0},
    "absolute_bounds": {"kind": "absolute", "max_delta": 0.3},
    "disabled": {"enabled": False},
}


def nan_filter(mode: str) -> SafetyFilter:
    return make(**MODES[mode])


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("where", ["action", "position", "both", "time"])
def test_no_input_makes_a_non_finite_command(mode: str, bad: float, where: str) -> None:
    f = nan_filter(mode)
    good_obs = obs_at([0.1, 0.6, 0.2])
    first = f.filter([0.1, 0.2, 0.3, 0.7], good_obs)  # a previous command: absolute holds fall back on it
    assert np.isfinite(first).all()
    before = f.counts.get("nan", 0)
    action = [0.2, 0.1, 0.0, 0.5]
    obs = obs_at([0.1, 0.6, 0.2])
    now = None
    if where in ("action", "both"):
        action[1] = bad
    if where in ("position", "both"):
        obs["state"][1] = bad
    if where == "time":
        now = bad
    out = f.filter(action, obs, now=now)
    assert out.shape == (4,) and np.isfinite(out).all(), (mode, where, out)
    if where == "position" and mode == "disabled":
        return  # the limits are off: the position is not read, the finite action passes
    assert f.counts.get("nan", 0) == before + 1  # every non-finite input is an event
    if where != "time":  # a NaN clock is replaced by the wall clock; the command itself is fine
        assert np.array_equal(out, f.hold_command(good_obs if where == "action" else obs)), out
        if MODES[mode].get("kind") == "absolute" and where != "action":
            assert np.allclose(out[:3], first[:3])  # no finite position: the previous target is held
        if MODES[mode].get("kind") != "absolute":
            assert np.allclose(out[:3], 0.0) and out[3] == first[3]  # no motion, gripper kept
    # the watchdog still runs on a real clock after a NaN time
    assert f.watchdog(now=time.time() + 10.0) == "stop"


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("bad", BAD)
def test_hold_with_a_non_finite_position_is_finite(mode: str, bad: float) -> None:
    f = nan_filter(mode)
    f.filter([0.1, 0.2, 0.3, 0.7], obs_at([0.1, 0.6, 0.2]))
    obs = obs_at([bad, 0.6, 0.2])
    assert np.isfinite(f.hold_command(obs)).all() and np.isfinite(f.hold(obs)).all()
    assert f.counts.get("nan", 0) >= 1


@pytest.mark.parametrize("bad", BAD)
def test_absolute_without_any_finite_hold_refuses_instead_of_sending_nan(bad: float) -> None:
    f = nan_filter("absolute_velocity")  # first command of an episode, position unknown
    with pytest.raises(RuntimeError, match="no finite current position"):
        f.filter([0.1, 0.2, 0.3, 0.7], obs_at([bad, 0.6, 0.2]))
    assert f.counts["nan"] == 1
    with pytest.raises(RuntimeError, match="no finite current position"):
        f.hold(obs_at([0.0, bad, 0.2]))


def test_non_numeric_actions_and_nan_limits_are_refused() -> None:
    f = make()
    assert np.array_equal(f.filter(["a", "b", "c", "d"], None), np.zeros(4))
    assert np.array_equal(f.filter([[0.1], [0.2, 0.3]], None), np.zeros(4))  # ragged
    assert f.counts["shape"] == 2
    with pytest.raises(ValueError, match="NaN"):
        SafetyConfig.from_dict({"workspace_low": [0, np.nan, 0], "workspace_high": [1, 1, 1]})
    with pytest.raises(ValueError, match="delta_scale"):
        SafetyConfig.from_dict({"delta_scale": 0.0})


# ---------------------------------------------------------------- limits and boundaries by hand
def test_watchdog_boundaries_are_inclusive_and_the_clock_starts_at_the_first_tick() -> None:
    f = make(hold_after_s=0.25, stop_after_s=0.5)
    assert f.watchdog(now=50.0) == "ok" and f.last_fresh_time == 50.0  # no command yet: the clock starts
    assert f.watchdog(now=50.2499) == "ok"
    assert f.watchdog(now=50.25) == "hold" and f.events[-1].time == 50.25
    assert f.watchdog(now=50.5) == "stop" and f.stopped and f.counts == {"hold": 1, "stop": 1}
    g = make(hold_after_s=0.25, stop_after_s=0.25)  # equal thresholds are allowed: stop at once
    g.filter([0.0] * 4, None, now=1.0)
    assert g.watchdog(now=1.25) == "stop"


def test_per_dim_delta_velocity_at_the_limit_and_event_times() -> None:
    f = make(max_delta=[0.1, 0.2, 0.3, 0.4])
    f.filter([0.0, 0.0, 0.0, 0.0], None, now=3.0)
    out = f.filter([1.0, -1.0, 0.05, -1.0], None, now=4.0)
    np.testing.assert_allclose(out, [0.1, -0.2, 0.05, -0.4])
    assert [(e.kind, e.time) for e in f.events] == [("delta", 4.0)]
    assert f.events[-1].to_dict() == {"kind": "delta", "time": 4.0, "detail": f.events[-1].detail}
    g = make(max_velocity=0.5)
    out = g.filter([0.0, 0.5, 0.0, 0.0], None)  # |delta| = 0.5 exactly: not scaled
    np.testing.assert_allclose(out, [0.0, 0.5, 0.0, 0.0])
    assert "velocity" not in g.counts
    out = g.filter([0.0, 0.0, 0.75, 1.0], None)
    np.testing.assert_allclose(out, [0.0, 0.0, 0.5, 1.0])
    assert g.counts == {"velocity": 1}


def test_workspace_floor_and_scale_by_hand_on_other_pos_dims() -> None:
    """pos_dims [1, 2, 3] move the position; command range = (box − pos) / delta_scale, 0 outside the box."""
    f = SafetyFilter(
        SafetyConfig.from_dict(
            {
                "pos_dims": [1, 2, 3],
                "delta_scale": 0.02,
                "workspace_low": [0.0, 0.0, 0.1],
                "workspace_high": [1.0, 1.0, 0.5],
            }
        ),
        action_dim=4,
        dt=0.1,
    )
    out = f.filter([9.0, -1.0, 1.0, -1.0], obs_at([0.005, 0.99, 0.11]))
    np.testing.assert_allclose(out, [9.0, -0.25, 0.5, -0.5], atol=1e-5)  # dim 0: not a position dim
    out = f.filter([0.0, 1.0, -1.0, 1.0], obs_at([1.5, 0.5, 0.2]))  # x above the box: only inward
    np.testing.assert_allclose(out, [0.0, 0.0, -1.0, 1.0], atol=1e-5)


def test_absolute_hold_and_velocity_with_a_longer_position() -> None:
    cfg = SafetyConfig.from_dict(
        {"kind": "absolute", "max_velocity": 2.0, "position_slice": [0, 3], "gripper_index": 3}
    )
    f = SafetyFilter(cfg, action_dim=4, dt=0.05)
    out = f.filter([1.0, -1.0, 0.2, 0.8], obs_at([0.0, 0.5, 0.1]))
    np.testing.assert_allclose(out, [0.1, 0.4, 0.2, 0.8])  # within 2 · 0.05 of each joint; gripper free
    held = f.hold(obs_at([0.3, -0.2, 0.1]))
    np.testing.assert_allclose(held, [0.3, -0.2, 0.1, 0.8])  # the measured joints, the last gripper


def test_config_validation_boundaries() -> None:
    for bad in (
        {"hold_after_s": 0.0},
        {"delta_scale": 0.0},
        {"delta_scale": float("inf")},
        {"kind": "velocity"},
        {"workspace_low": [0.0, 0.0, 0.0]},
        {"command_high": [1.0]},
        {"max_delta": [0.1, float("nan")]},
        {"gripper_high": float("nan")},
    ):
        with pytest.raises(ValueError):
            SafetyConfig.from_dict(bad)
    cfg = SafetyConfig.from_dict({"pos_dims": (0, 1), "hold_after_s": 1.0, "stop_after_s": 1.0})
    assert cfg.pos_dims == [0, 1] and SafetyConfig.from_dict(None) == SafetyConfig()


def test_non_finite_time_uses_the_wall_clock() -> None:
    f = make()
    before = time.time()
    f.filter([0.0] * 4, None, now=float("nan"))
    assert f.counts == {"nan": 1} and before <= f.last_fresh_time <= time.time()


# ---------------------------------------------------------------- what every event records
def test_events_record_kind_time_and_a_detail() -> None:
    """Each intervention is logged with its kind, the command's time and a detail naming the values."""
    f = make(max_velocity=0.5, workspace_low=[-0.5, 0.4, 0.05], workspace_high=[0.5, 1.0, 0.5])
    f.filter([0.0, 0.0, 0.9, 0.0], obs_at([0.0, 0.6, 0.499]), now=10.0)  # velocity, then the ceiling
    f.filter([np.nan, 0, 0, 0], obs_at([0.0, 0.6, 0.2]), now=11.0)
    f.hold({"state": np.full(39, np.nan)})
    assert f.watchdog(now=10.5) == "hold" and f.watchdog(now=11.0) == "stop"  # fresh: 10.0 (held: not fresh)
    got = [(e.kind, e.time) for e in f.events]
    assert got[:3] == [("velocity", 10.0), ("workspace", 10.0), ("nan", 11.0)]
    assert [k for k, _ in got[3:]] == ["nan", "hold", "stop"] and got[4:] == [("hold", 10.5), ("stop", 11.0)]
    for e, words in zip(
        f.events, ("|delta| 0.9 > 0.5", "->", "non-finite action", "while holding", "holding", "stopped")
    ):
        assert isinstance(e.detail, str) and words in e.detail, (e.kind, e.detail)


def test_disabled_filter_still_refuses_shapes_and_holds_nan_where_the_arm_is() -> None:
    cfg = SafetyConfig.from_dict(
        {"enabled": False, "kind": "absolute", "position_key": "q", "position_slice": [0, 2]}
    )
    f = SafetyFilter(cfg, action_dim=2, dt=0.1)
    with pytest.raises(ValueError, match=r"expected \(2,\)"):
        f.filter([0.1, 0.2, 0.3], {"q": np.array([0.0, 0.0])})
    with pytest.raises(ValueError, match=r"expected \(2,\)"):
        f.filter(None, {"q": np.array([0.0, 0.0])})
    out = f.filter([np.nan, 0.0], {"q": np.array([0.4, -0.3])}, now=7.0)
    np.testing.assert_allclose(out, [0.4, -0.3])  # absolute hold: the measured position
    assert [(e.kind, e.time) for e in f.events] == [("nan", 7.0)] and "filter disabled" in f.events[0].detail


def test_absolute_velocity_clip_is_a_velocity_event() -> None:
    cfg = SafetyConfig.from_dict(
        {"kind": "absolute", "max_velocity": 1.0, "position_key": "q", "position_slice": [0, 2]}
    )
    f = SafetyFilter(cfg, action_dim=2, dt=0.1)
    f.filter([1.0, 0.0], {"q": np.array([0.0, 0.0])}, now=2.0)
    assert f.counts == {"velocity": 1} and f.events[0].time == 2.0


def test_estop_default_reason_and_watchdog_after_an_estop() -> None:
    f = make()
    calls: list[str] = []
    f.add_estop_hook(calls.append)
    f.estop()
    assert calls == ["e-stop"] and f.events[-1].detail == "e-stop"
    assert not f.stopped and f.watchdog(now=1.0) == "stop"  # the e-stop alone stops the watchdog


def test_watchdog_without_a_time_reads_the_wall_clock() -> None:
    f = make(hold_after_s=5.0, stop_after_s=10.0)
    f.filter([0.0] * 4, None, now=time.time())
    assert f.watchdog() == "ok"
    f.last_fresh_time = time.time() - 6.0
    assert f.watchdog() == "hold"


def test_clip_and_gripper_events_carry_time_and_values() -> None:
    f = make(gripper_low=-0.5, gripper_high=0.5)
    out = f.filter([2.0, 0.0, 0.0, 0.9], None, now=21.0)
    np.testing.assert_allclose(out, [1.0, 0.0, 0.0, 0.5])
    assert [(e.kind, e.time) for e in f.events] == [("clip", 21.0), ("gripper", 21.0)]
    assert "2.0" in f.events[0].detail and f.events[1].detail == "gripper 0.9 -> 0.5"


def test_workspace_applies_to_delta_control_with_a_known_position_only() -> None:
    box = {"workspace_low": [-0.5, 0.4, 0.05], "workspace_high": [0.5, 1.0, 0.5]}
    f = make(**box)
    out = f.filter([1.0, 1.0, 1.0, 0.0], None)  # no observation: nothing to bound against
    np.testing.assert_allclose(out, [1.0, 1.0, 1.0, 0.0])
    cfg = SafetyConfig.from_dict({"kind": "absolute", **box})
    g = SafetyFilter(cfg, action_dim=4, dt=0.1)
    out = g.filter([0.9, 0.9, 0.9, 0.0], obs_at([0.9, 0.9, 0.9]))  # absolute targets: no workspace box
    np.testing.assert_allclose(out, [0.9, 0.9, 0.9, 0.0])
    assert not f.events and not g.events


def test_row_shaped_actions_and_positions_are_flattened_and_read_in_float64() -> None:
    f = make(workspace_low=[-0.5, 0.4, 0.05], workspace_high=[0.5, 1.0, 0.5])
    state = obs_at([0.0, 0.6, 0.495])["state"]  # float32, as robots report it
    out = f.filter(np.array([[0.0, 0.0, 1.0, 0.0]]), {"state": state[None]})  # (1, A) and (1, D)
    assert out.shape == (4,) and out[2] == (0.5 - float(state[2])) / 0.01  # computed in float64


def test_event_details_and_times_by_hand() -> None:
    f = make(command_high=[1.234567] * 4)
    f.filter([2.0, 0.0, 0.0, 0.0], None, now=1.0)
    assert f.events[-1].detail == "[2.0, 0.0, 0.0, 0.0] -> [1.2346, 0.0, 0.0, 0.0]"
    f.filter([0.123456, 0.0, 0.0, 5.0], None, now=2.0)
    assert f.events[-2].detail == "[0.1235, 0.0, 0.0, 5.0] -> [0.1235, 0.0, 0.0, 1.2346]"
    assert f.events[-1].detail == "gripper 1.235 -> 1"  # then the gripper range (±1)
    f.filter([0.1, 0.2], None, now=3.0)
    assert (f.events[-1].kind, f.events[-1].time) == ("shape", 3.0)
    assert f.events[-1].detail == "action shape (2,) != (4,): held"
    before = time.time()
    f.filter([0.0] * 4, None, now=float("inf"))
    e = f.events[-1]
    assert e.detail == "non-finite time inf: the wall clock is used" and before <= e.time <= time.time()
    f.hold({"state": np.full(39, np.nan)})  # an event without a time of its own: the wall clock's
    assert f.events[-1].kind == "nan" and before <= f.events[-1].time <= time.time()


def test_a_non_numeric_position_is_refused_like_nan() -> None:
    f = make()
    out = f.filter([0.5, 0.0, 0.0, 0.3], {"state": np.array(["a", "b", "c"])}, now=4.0)
    np.testing.assert_allclose(out, [0.0, 0.0, 0.0, 0.0])
    assert [(e.kind, e.time) for e in f.events] == [("nan", 4.0)]


def test_a_non_finite_command_from_the_limits_is_held_and_logged() -> None:
    """The last line of defence: should the limits ever produce NaN, the hold command goes out instead."""
    cfg = SafetyConfig.from_dict({"kind": "absolute", "position_key": "q", "position_slice": [0, 2]})
    f = SafetyFilter(cfg, action_dim=2, dt=0.1)
    f._limited = lambda a, pos, now: np.array([np.nan, 0.0])  # type: ignore[method-assign]
    out = f.filter([0.1, 0.2], {"q": np.array([0.3, -0.4])}, now=5.0)
    np.testing.assert_allclose(out, [0.3, -0.4])  # absolute hold: the measured position
    assert [(e.kind, e.time) for e in f.events] == [("nan", 5.0)]
    assert f.events[0].detail == "limits produced a non-finite command [nan, 0.0]: held"


def test_unknown_key_without_a_near_match_has_no_hint_and_reset_flags_are_bools() -> None:
    with pytest.raises(ValueError, match=r"unknown safety key 'zzzzzz' \(valid: "):
        SafetyConfig.from_dict({"zzzzzz": 1})
    f = make()
    f.estop()
    f.reset()
    assert f.estopped is False and f.stopped is False


def test_the_measured_position_past_the_limits_by_more_than_the_margin_is_a_violation():
    """abort_margin: delta kind reads the hand against the workspace box, absolute kind the joints against
    the command bounds; within the margin (or with no margin) nothing is a violation."""
    from robosteer.real.safety import SafetyConfig, SafetyFilter

    box = {"workspace_low": [0.0, 0.0, 0.0], "workspace_high": [1.0, 1.0, 1.0], "abort_margin": 0.05}
    f = SafetyFilter(SafetyConfig(**box), 4, 0.01)
    assert f.violation({"state": np.array([1.04, 0.5, 0.5])}) is None  # 0.04 past: inside the margin
    why = f.violation({"state": np.array([0.5, -0.06, 0.5])})
    assert why is not None and "outside the workspace by 0.06" in why
    assert (
        SafetyFilter(SafetyConfig(**{**box, "abort_margin": None}), 4, 0.01).violation(
            {"state": np.array([5.0, 5.0, 5.0])}
        )
        is None
    )
    joints = SafetyConfig(
        kind="absolute", command_low=[-1.0, -2.0], command_high=[1.0, 2.0], abort_margin=0.1,
        position_key="q", position_slice=[0, 2],
    )  # fmt: skip
    g = SafetyFilter(joints, 2, 0.01)
    assert g.violation({"q": np.array([1.05, -2.05])}) is None
    assert "joint limits by 0.2" in g.violation({"q": np.array([0.0, 2.2])})
    with pytest.raises(ValueError, match="abort_margin=-1"):
        SafetyConfig(abort_margin=-1.0).validate()
    with pytest.raises(ValueError, match="max_consecutive_aborts=0"):
        SafetyConfig(max_consecutive_aborts=0).validate()
