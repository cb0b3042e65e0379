"""The teleoperation layer: mappings on hand-computed readings, the three devices on fake backends (no
pynput, pyspacemouse or pygame needed), missing libraries, and the refusals of the factories."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest

from robosteer.real import teleop as tp
from robosteer.real.teleop import (
    DeltaMap,
    DeviceReading,
    DeviceTeleop,
    GamepadDevice,
    JointDeltaMap,
    JointPositionMap,
    KeyboardDevice,
    SpaceMouseDevice,
    Teleop,
    TeleopDevice,
    TeleopError,
    make_mapping,
    make_teleop,
)

AXES = [1.0, -1.0, 0.5, 0.0, 0.2, -0.4]
Q = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]


def reading(axes=AXES, gripper=None, engaged=True) -> DeviceReading:
    return DeviceReading(np.array(axes, dtype=np.float64), gripper, engaged)


class FakeDevice(TeleopDevice):
    """Plays back a list of readings; counts connects and disconnects."""

    name = "fake"

    def __init__(self, readings: list[DeviceReading]) -> None:
        self.readings = list(readings)
        self.connects = self.disconnects = 0

    def connect(self) -> None:
        self.connects += 1

    def disconnect(self) -> None:
        self.disconnects += 1

    def read(self) -> DeviceReading:
        return self.readings.pop(0)


# --------------------------------------------------------------------------------------------------
# Mappings


def test_delta_scales_xyz_and_holds_the_gripper():
    m = DeltaMap(4, speed=0.5)
    out = m(reading([0.2, -0.4, 1.0, 0.3, 0.3, 0.3], gripper=1.0), {})
    np.testing.assert_allclose(out, [0.1, -0.2, 0.5, 1.0])
    out = m(reading([2.0, 0.0, -3.0, 0, 0, 0], gripper=None), {})  # axes clipped to [-1, 1]; gripper held
    np.testing.assert_allclose(out, [0.5, 0.0, -0.5, 1.0])
    out = m(reading([0.0] * 6, gripper=-1.0), {})
    np.testing.assert_allclose(out, [0.0, 0.0, 0.0, -1.0])
    assert DeltaMap(3, speed=1.0)(reading(), {}).tolist() == [1.0, -1.0, 0.5]  # no gripper dim


def test_gripper_starts_at_gripper_init():
    assert DeltaMap(4, gripper_init=0.25)(reading(gripper=None), {})[3] == 0.25
    assert DeltaMap(4)(reading(gripper=None), {})[3] == -1.0  # open


def test_joint_delta_maps_axis_i_to_joint_i():
    out = JointDeltaMap(7, speed=0.5)(reading(AXES, gripper=None), {})
    np.testing.assert_allclose(out, [0.5, -0.5, 0.25, 0.0, 0.1, -0.2, -1.0])
    out = JointDeltaMap(6, speed=1.0)(reading(AXES, gripper=1.0), {})
    np.testing.assert_allclose(out, AXES)
    out = JointDeltaMap(6, speed=0.5)(reading([4.0, -2.0, 0, 0, 0, 0]), {})  # clipped to [-1, 1] first
    np.testing.assert_allclose(out, [0.5, -0.5, 0, 0, 0, 0])


def test_joint_position_adds_a_step_to_the_current_joints():
    m = JointPositionMap(7, step_rad=0.01)
    out = m(reading(AXES, gripper=1.0), {"joint_pos": np.array(Q, dtype=np.float32)})
    np.testing.assert_allclose(out, [0.11, 0.19, 0.305, 0.4, 0.502, 0.596, 1.0], atol=1e-7)
    out = JointPositionMap(6, step_rad=0.02, obs_key="q")(reading(AXES), {"q": np.array(Q)})
    np.testing.assert_allclose(out, [0.12, 0.18, 0.31, 0.4, 0.504, 0.592])
    out = m(reading([2.0, -3.0, 0, 0, 0, 0]), {"joint_pos": np.array(Q)})  # axes clipped: one step at most
    np.testing.assert_allclose(out, [0.11, 0.19, 0.3, 0.4, 0.5, 0.6, 1.0])


def test_joint_position_with_seven_joints_keeps_the_seventh():
    m = JointPositionMap(7, step_rad=0.01, n_joints=7)  # a 7-joint ROS 2 arm, no gripper
    assert not m.has_gripper
    out = m(reading(AXES), {"joint_pos": np.array([*Q, 0.7])})
    np.testing.assert_allclose(out, [0.11, 0.19, 0.305, 0.4, 0.502, 0.596, 0.7])


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: make_mapping("joint_delt", 6), "nearest valid choice: 'joint_delta'"),
        (lambda: DeltaMap(4, speed=0.0), "speed=0.0 is not valid"),
        (lambda: JointDeltaMap(6, speed=-0.5), "speed=-0.5 is not valid"),
        (lambda: DeltaMap(4, speed=float("nan")), "speed=nan is not valid"),
        (lambda: DeltaMap(4, speed=1.5), "0 < speed <= 1"),
        (lambda: JointPositionMap(6, step_rad=0.0), "step_rad=0.0 is not valid"),
        (lambda: DeltaMap(6), "command_dim 3 .* or 4"),
        (lambda: JointDeltaMap(4), "command_dim 6 or 7"),
        (lambda: JointPositionMap(8), "command_dim=8, n_joints=6"),
        (lambda: DeltaMap(4, gripper_init=2.0), "gripper_init=2.0"),
    ],
)
def test_bad_mapping_arguments_are_refused_in_one_line(build, match):
    with pytest.raises(ValueError, match=match) as e:
        build()
    assert "\n" not in str(e.value)


def test_joint_position_refuses_a_wrong_observation():
    m = JointPositionMap(6)
    with pytest.raises(ValueError, match=r"obs\['joint_pos'\] has 5 values, expected n_joints=6"):
        m(reading(), {"joint_pos": np.zeros(5)})
    with pytest.raises(ValueError, match="obs has no 'joint_pos'"):
        m(reading(), {"state": np.zeros(6)})


def test_reading_needs_six_axes():
    with pytest.raises(ValueError, match="has 3 values, expected 6"):
        DeviceReading(np.zeros(3))


# --------------------------------------------------------------------------------------------------
# DeviceTeleop


def test_device_teleop_commands_only_while_engaged():
    dev = FakeDevice([reading(engaged=False), reading(gripper=1.0), reading(engaged=False)])
    with DeviceTeleop(dev, DeltaMap(4, speed=0.5)) as t:
        assert t.command({}) is None
        np.testing.assert_allclose(t.command({}), [0.5, -0.5, 0.25, 1.0])
        assert t.command({}) is None  # handed back
        assert t.engaged_steps == 1
    assert dev.connects == 1 and dev.disconnects == 1
    t.disconnect()  # idempotent
    assert dev.disconnects == 1 and not t.is_connected


def test_non_finite_readings_and_commands_are_never_passed_on():
    nan = float("nan")
    dev = FakeDevice(
        [
            reading([nan, 0, 0, 0, 0, 0]),
            reading(gripper=float("inf")),
            reading([nan, 0, 0, 0, 0, 0], engaged=False),
            reading(),  # finite reading, NaN joint in obs -> NaN target
            reading(),
        ]
    )
    t = DeviceTeleop(dev, JointPositionMap(6, step_rad=0.01))
    t.connect()
    obs = {"joint_pos": np.array(Q)}
    assert t.command(obs) is None
    assert t.command(obs) is None
    assert t.command(obs) is None
    assert t.command({"joint_pos": np.array([nan, *Q[1:]])}) is None
    assert t.nonfinite == 4 and t.engaged_steps == 0
    np.testing.assert_allclose(t.command(obs), [0.11, 0.19, 0.305, 0.4, 0.502, 0.596])


def test_command_before_connect_raises():
    with pytest.raises(TeleopError, match="teleop=fake is not connected"):
        DeviceTeleop(FakeDevice([reading()]), DeltaMap()).command({})


def test_note_command_keeps_the_policy_gripper_on_take_over():
    t = DeviceTeleop(FakeDevice([reading(gripper=None), reading(gripper=-1.0)]), JointDeltaMap(7, speed=1.0))
    t.connect()
    t.note_command(np.array([0, 0, 0, 0, 0, 0, 1.0]))  # the policy closed the gripper
    assert t.command({})[6] == 1.0  # taking over does not open it
    assert t.command({})[6] == -1.0
    t.note_command(np.array([0.0] * 6))  # wrong shape: ignored
    assert t.mapping.gripper == -1.0


def test_teleop_is_easy_to_subclass_for_a_scripted_operator():
    class Scripted(Teleop):
        def command(self, obs):
            return np.array([0.0, 0.0, -1.0, 1.0]) if obs["state"][2] > 0.3 else None

    with Scripted() as s:
        assert s.is_connected
        assert s.command({"state": np.array([0, 0, 0.2])}) is None
        assert s.command({"state": np.array([0, 0, 0.4])}).tolist() == [0.0, 0.0, -1.0, 1.0]
    assert not s.is_connected
    s.disconnect()
    with pytest.raises(TypeError):
        Teleop()


# --------------------------------------------------------------------------------------------------
# Keyboard


class FakeListener:
    def __init__(self, on_press, on_release):
        self.on_press, self.on_release = on_press, on_release
        self.started = self.stopped = False

    def start(self):
        self.started = True

    def stop(self):
        self.stopped = True


def char(c):
    return SimpleNamespace(char=c)


SPACE = SimpleNamespace(char=None, name="space")


def keyboard() -> tuple[KeyboardDevice, FakeListener]:
    made = []
    dev = KeyboardDevice(listener_factory=lambda **cb: made.append(FakeListener(**cb)) or made[-1])
    dev.connect()
    return dev, made[0]


def test_keyboard_space_toggles_control_and_ignores_auto_repeat():
    dev, lis = keyboard()
    assert lis.started and not dev.read().engaged
    lis.on_press(SPACE)
    assert dev.read().engaged
    lis.on_press(SPACE)  # auto-repeat while held: no second toggle
    assert dev.read().engaged
    lis.on_release(SPACE)
    assert dev.read().engaged  # a toggle, not hold-to-engage
    lis.on_press(SPACE)
    lis.on_release(SPACE)
    assert not dev.read().engaged


def test_keyboard_keys_give_axes_and_gripper():
    dev, lis = keyboard()
    for k in ("W", "d", "r", "j"):  # shift held: still w
        lis.on_press(char(k))
    r = dev.read()
    assert r.axes.tolist() == [1.0, -1.0, 1.0, 0.0, 0.0, 1.0] and r.gripper is None
    lis.on_press(char("s"))  # w and s cancel
    lis.on_release(char("r"))
    assert dev.read().axes.tolist() == [0.0, -1.0, 0.0, 0.0, 0.0, 1.0]
    lis.on_press(char("q"))
    assert dev.read().gripper == 1.0
    lis.on_press(char("e"))
    assert dev.read().gripper is None  # both: unchanged
    lis.on_release(char("q"))
    assert dev.read().gripper == -1.0
    lis.on_press(SimpleNamespace(char=None, name=None))  # an unnamed key is ignored
    dev.disconnect()
    assert lis.stopped and dev.read().axes.tolist() == [0.0] * 6


def test_keyboard_through_make_teleop():
    made = []
    t = make_teleop(
        "keyboard",
        "delta",
        4,
        speed=0.5,
        listener_factory=lambda **cb: made.append(FakeListener(**cb)) or made[-1],
    )
    with t:
        lis = made[0]
        lis.on_press(char("w"))
        assert t.command({}) is None  # moving without holding control
        lis.on_press(SPACE)
        lis.on_press(char("q"))
        np.testing.assert_allclose(t.command({}), [0.5, 0.0, 0.0, 1.0])
        lis.on_release(char("q"))
        lis.on_release(char("w"))
        np.testing.assert_allclose(t.command({}), [0.0, 0.0, 0.0, 1.0])  # gripper held closed
    assert lis.stopped


def test_keyboard_uses_pynput_listener(monkeypatch):
    pynput = types.ModuleType("pynput")
    pynput.__path__ = []
    kb = types.ModuleType("pynput.keyboard")
    kb.Listener = FakeListener
    monkeypatch.setitem(sys.modules, "pynput", pynput)
    monkeypatch.setitem(sys.modules, "pynput.keyboard", kb)
    dev = KeyboardDevice()
    dev.connect()
    assert isinstance(dev._listener, FakeListener) and dev._listener.started


# --------------------------------------------------------------------------------------------------
# SpaceMouse


class FakeMouse:
    def __init__(self):
        self.state = SimpleNamespace(x=0.0, y=0.0, z=0.0, roll=0.0, pitch=0.0, yaw=0.0, buttons=[0, 0])
        self.closed = False

    def set(self, **kw):
        for k, v in kw.items():
            setattr(self.state, k, v)

    def read(self):
        return self.state

    def close(self):
        self.closed = True


def test_spacemouse_engages_past_the_deadzone_and_disengages_on_release():
    mouse = FakeMouse()
    dev = SpaceMouseDevice(deadzone=0.05, backend=mouse)
    dev.connect()
    assert not dev.read().engaged
    mouse.set(x=0.03, yaw=-0.04)  # drift below the deadzone
    r = dev.read()
    assert not r.engaged and r.axes.tolist() == [0.0] * 6
    mouse.set(x=0.3, z=1.2)
    r = dev.read()
    assert r.engaged and r.axes.tolist() == [0.3, 0.0, 1.0, 0.0, 0.0, 0.0] and r.gripper is None
    mouse.set(x=0.0, z=0.0, yaw=0.0)
    assert not dev.read().engaged
    dev.disconnect()
    assert mouse.closed


def test_spacemouse_buttons_engage_and_drive_the_gripper():
    mouse = FakeMouse()
    t = make_teleop("spacemouse", "joint_position", 7, backend=mouse, step_rad=0.01)
    t.connect()
    obs = {"joint_pos": np.array(Q)}
    mouse.set(buttons=[1, 0])
    np.testing.assert_allclose(t.command(obs), [*Q, 1.0])  # left: close, no motion
    mouse.set(buttons=[0, 0], pitch=-0.5)
    np.testing.assert_allclose(t.command(obs), [0.1, 0.2, 0.3, 0.4, 0.495, 0.6, 1.0])  # gripper held
    mouse.set(buttons=[0, 1], pitch=0.0)
    assert t.command(obs)[6] == -1.0  # right: open
    mouse.set(buttons=[1, 1])
    assert t.command(obs)[6] == -1.0  # both: unchanged
    mouse.set(buttons=[0, 0], y=float("nan"))
    assert t.command(obs) is None and t.nonfinite == 1


def test_spacemouse_lost_mid_run_raises():
    mouse = FakeMouse()
    dev = SpaceMouseDevice(backend=mouse)
    dev.connect()
    mouse.state = None
    with pytest.raises(TeleopError, match="returned no state"):
        dev.read()
    with pytest.raises(ValueError, match=r"deadzone=1\.0"):
        SpaceMouseDevice(deadzone=1.0)


def test_spacemouse_opens_through_pyspacemouse(monkeypatch):
    mod = types.ModuleType("pyspacemouse")
    mod.open = lambda: None  # pyspacemouse 1.x: no device
    monkeypatch.setitem(sys.modules, "pyspacemouse", mod)
    with pytest.raises(TeleopError, match="no SpaceMouse found"):
        SpaceMouseDevice().connect()
    mouse = FakeMouse()
    mod.open = lambda: mouse
    dev = SpaceMouseDevice()
    dev.connect()
    mouse.set(roll=0.5)
    assert dev.read().axes.tolist() == [0.0, 0.0, 0.0, 0.5, 0.0, 0.0]


# --------------------------------------------------------------------------------------------------
# Gamepad


class FakePad:
    def __init__(self):
        self.axes = {0: 0.0, 1: 0.0, 2: -1.0, 3: 0.0, 4: 0.0, 5: -1.0}  # triggers rest at -1
        self.buttons = {5: False}
        self.pumps = 0
        self.closed = False

    def pump(self):
        self.pumps += 1

    def get_axis(self, i):
        return self.axes[i]

    def get_button(self, i):
        return self.buttons.get(i, False)

    def close(self):
        self.closed = True


def test_gamepad_engaged_while_the_right_bumper_is_held():
    pad = FakePad()
    dev = GamepadDevice(deadzone=0.1, backend=pad)
    dev.connect()
    pad.axes.update({0: 0.05, 1: -0.8, 3: 0.6, 4: -0.5})  # lx in the deadzone; ly up, rx right, ry up
    r = dev.read()
    assert not r.engaged
    assert r.axes.tolist() == [0.8, 0.0, 0.5, 0.0, 0.0, -0.6] and r.gripper is None
    pad.buttons[5] = True
    assert dev.read().engaged
    pad.axes[5] = 1.0  # right trigger: close
    assert dev.read().gripper == 1.0
    pad.axes[5], pad.axes[2] = -1.0, 0.9  # left trigger: open
    assert dev.read().gripper == -1.0
    pad.buttons[5] = False
    assert not dev.read().engaged
    assert pad.pumps == 5
    dev.disconnect()
    assert pad.closed


def test_gamepad_joint_delta_through_make_teleop():
    pad = FakePad()
    t = make_teleop("gamepad", "joint_delta", 6, backend=pad, speed=0.5)
    t.connect()
    pad.axes.update({0: -1.0, 4: 0.4})  # stick left, right stick down
    assert t.command({}) is None
    pad.buttons[5] = True
    np.testing.assert_allclose(t.command({}), [0.0, 0.5, -0.2, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="axis_index key 'lz'"):
        GamepadDevice(axis_index={"lz": 2})


def test_gamepad_opens_pygame_headless(monkeypatch):
    calls = []
    pad = FakePad()
    pg = types.ModuleType("pygame")
    pg.display = SimpleNamespace(
        init=lambda: calls.append("display"), quit=lambda: calls.append("display quit")
    )
    pg.event = SimpleNamespace(pump=lambda: calls.append("pump"))
    count = [0]
    pg.joystick = SimpleNamespace(
        init=lambda: calls.append("joystick"),
        quit=lambda: calls.append("quit"),
        get_count=lambda: count[0],
        Joystick=lambda i: SimpleNamespace(
            init=lambda: None,
            quit=lambda: calls.append("js quit"),
            get_axis=pad.get_axis,
            get_button=pad.get_button,
        ),
    )
    monkeypatch.setitem(sys.modules, "pygame", pg)
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)  # both restored after the test
    monkeypatch.delenv("PYGAME_HIDE_SUPPORT_PROMPT", raising=False)
    with pytest.raises(TeleopError, match="no gamepad 0 \\(0 connected\\)"):
        GamepadDevice().connect()
    assert tp.os.environ["SDL_VIDEODRIVER"] == "dummy"
    count[0] = 1
    dev = GamepadDevice()
    dev.connect()
    pad.buttons[5] = True
    assert dev.read().engaged and "pump" in calls
    dev.disconnect()
    assert calls[-3:] == ["js quit", "quit", "display quit"]


# --------------------------------------------------------------------------------------------------
# Missing libraries and factory refusals


@pytest.mark.parametrize(
    ("device", "module", "pin"),
    [
        (lambda: KeyboardDevice(), "pynput", "pynput==1.8.2"),
        (lambda: SpaceMouseDevice(), "pyspacemouse", "pyspacemouse==2.1.0"),
        (lambda: GamepadDevice(), "pygame", "pygame==2.6.1"),
    ],
)
def test_missing_library_names_the_install(monkeypatch, device, module, pin):
    monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.delenv("PYGAME_HIDE_SUPPORT_PROMPT", raising=False)  # the gamepad sets it: restored after
    with pytest.raises(TeleopError) as e:
        device().connect()
    assert str(e.value).endswith(f"needs {module}: pip install 'robosteer[teleop]' ({pin})")
    assert "\n" not in str(e.value)


def test_a_library_that_cannot_start_says_why_in_one_line(monkeypatch):
    def broken(name):
        raise ImportError("this platform is not supported: ('failed to acquire X connection')\n\nTry one")

    monkeypatch.setattr(tp.importlib, "import_module", broken)
    with pytest.raises(TeleopError) as e:
        KeyboardDevice().connect()
    msg = str(e.value)
    assert msg.startswith(
        "teleop=keyboard: pynput.keyboard cannot start here (this platform is not supported"
    )
    assert "X display" in msg and "\n" not in msg


def test_a_missing_dependency_of_the_library_is_named(monkeypatch):
    def no_cffi(name):
        raise ModuleNotFoundError("No module named 'cffi'", name="cffi")

    monkeypatch.setattr(tp.importlib, "import_module", no_cffi)
    with pytest.raises(
        TeleopError, match=r"teleop=spacemouse: pyspacemouse cannot load \(No module named 'cffi'\)"
    ):
        SpaceMouseDevice().connect()


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (
            ("spacemose", "delta", 4),
            {},
            "teleop='spacemose' is not valid.*nearest valid choice: 'spacemouse'",
        ),
        (("keybord", "delta", 4), {}, "nearest valid choice: 'keyboard'"),
        (("gamepad", "delt", 4), {}, "mapping='delt' is not valid.*nearest valid choice: 'delta'"),
        (("gamepad", "delta", 4), {"sped": 0.5}, "'sped' is not an option.*nearest valid choice: 'speed'"),
        (("gamepad", "delta", 4), {"step_rad": 0.1}, "'step_rad' is not an option of teleop=gamepad"),
        (("gamepad", "delta", 4), {"speed": -1.0}, "speed=-1.0 is not valid"),
    ],
)
def test_make_teleop_refusals(args, kwargs, match):
    with pytest.raises(ValueError, match=match) as e:
        make_teleop(*args, **kwargs)
    assert "\n" not in str(e.value)


def test_make_teleop_builds_but_does_not_connect():
    t = make_teleop("gamepad", "joint_position", 6, backend=FakePad(), step_rad=0.02, deadzone=0.2)
    assert isinstance(t, DeviceTeleop) and not t.is_connected
    assert isinstance(t.mapping, JointPositionMap) and t.mapping.step_rad == 0.02
    assert isinstance(t.device, GamepadDevice) and t.device.deadzone == 0.2


def test_the_teleop_extra_pins_what_the_install_lines_name():
    """pyproject's ``teleop`` extra and the one-line install hints name the same versions."""
    import tomllib
    from pathlib import Path

    from robosteer.real.teleop import PINS

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert sorted(pyproject["project"]["optional-dependencies"]["teleop"]) == sorted(
        f"{name}=={version}" for name, version in PINS.items()
    )
