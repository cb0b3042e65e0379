"""The UR driver against a fake RTDE interface: command translation, limits, staleness and error handling."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from robosteer.real.drivers.ur import URRobot
from robosteer.real.robot import ArraySpec, RobotError


class FakeRTDE:
    """Both RTDE interfaces (control + receive + IO) of ur_rtde, recording what the driver calls."""

    def __init__(self) -> None:
        self.q = np.array([0.0, -1.57, 1.57, -1.57, -1.57, 0.0])
        self.connected = True
        self.safety_mode = 1
        self.program_running = True
        self.servo_ok = True
        self.servo_calls: list[tuple[list[float], tuple[float, ...]]] = []
        self.stops: list[str] = []
        self.digital: list[tuple[int, bool]] = []

    # receive
    def getActualQ(self) -> list[float]:
        return self.q.tolist()

    def getActualQd(self) -> list[float]:
        return [0.0] * 6

    def getActualTCPPose(self) -> list[float]:
        return [0.4, 0.1, 0.3, 0.0, 3.14, 0.0]

    def getTimestamp(self) -> float:
        return 12.5

    def getSafetyMode(self) -> int:
        return self.safety_mode

    def isConnected(self) -> bool:
        return self.connected

    # control
    def isProgramRunning(self) -> bool:
        return self.program_running

    def servoJ(self, q: list[float], *args: float) -> bool:
        self.servo_calls.append((list(q), args))
        return self.servo_ok

    def servoStop(self, a: float) -> bool:
        self.stops.append("servoStop")
        return True

    def stopJ(self, a: float) -> bool:
        self.stops.append("stopJ")
        return True

    def stopScript(self) -> None:
        self.stops.append("stopScript")

    def disconnect(self) -> None:
        self.connected = False

    # io
    def setStandardDigitalOut(self, pin: int, value: bool) -> bool:
        self.digital.append((pin, value))
        return True


def make(fake: FakeRTDE, **kw: Any) -> URRobot:
    robot = URRobot(
        host="10.0.0.2",
        control_factory=lambda h: fake,
        receive_factory=lambda h: fake,
        io_factory=lambda h: fake,
        **kw,
    )
    robot.connect()
    return robot


def test_joint_position_targets_go_to_servoj_within_limits() -> None:
    fake = FakeRTDE()
    robot = make(fake, rate_hz=125.0, max_joint_step=0.05, joint_low=[-1.0] * 6, joint_high=[1.0] * 6)
    ob = robot.get_observation()
    assert ob.data["joint_pos"].shape == (6,) and ob.info["controller_time"] == 12.5
    target = fake.q + np.array([0.01, 0.2, -0.2, 0.0, 0.0, 0.0])
    robot.send_action(target)
    q, args = fake.servo_calls[-1]
    want = np.clip(np.clip(target, fake.q - 0.05, fake.q + 0.05), -1.0, 1.0)
    assert np.allclose(q, want)  # per-step limit, then the joint limits (-1.57 -> -1.0 on joints 1-4)
    assert np.isclose(args[2], 1 / 125.0)  # servoJ time = one control period


def test_joint_delta_mode_scales_and_adds_to_measured_angles() -> None:
    fake = FakeRTDE()
    robot = make(fake, control_mode="joint_delta", delta_scale=0.02)
    robot.send_action(np.array([1.0, -1.0, 0.5, 0.0, 0.0, 3.0]))
    q, _ = fake.servo_calls[-1]
    assert np.allclose(q, fake.q + 0.02 * np.array([1.0, -1.0, 0.5, 0.0, 0.0, 1.0]))


def test_bad_commands_are_refused_before_the_arm() -> None:
    fake = FakeRTDE()
    robot = make(fake)
    with pytest.raises(RobotError, match="NaN"):
        robot.send_action(np.array([np.nan, 0, 0, 0, 0, 0]))
    with pytest.raises(RobotError, match=r"shape \(5,\), expected \(6,\)"):
        robot.send_action(np.zeros(5))
    assert fake.servo_calls == []


def test_stale_commands_are_dropped() -> None:
    fake = FakeRTDE()
    robot = make(fake, stale_s=0.05)
    robot.send_action(fake.q, timestamp=time.time() - 1.0)
    assert fake.servo_calls == [] and robot.dropped_stale == 1
    robot.send_action(fake.q, timestamp=time.time())
    assert len(fake.servo_calls) == 1


def test_servoj_refusal_stops_the_arm() -> None:
    fake = FakeRTDE()
    robot = make(fake)
    fake.servo_ok = False
    with pytest.raises(RobotError, match="servoJ refused"):
        robot.send_action(fake.q)
    assert "servoStop" in fake.stops


def test_protective_stop_and_lost_connection_raise() -> None:
    fake = FakeRTDE()
    robot = make(fake)
    fake.safety_mode = 3
    with pytest.raises(RobotError, match="safety mode 3"):
        robot.get_observation()
    fake.safety_mode = 1
    fake.program_running = False
    with pytest.raises(RobotError, match="control script is not running"):
        robot.send_action(fake.q)
    fake.program_running = True
    fake.connected = False
    with pytest.raises(RobotError, match="lost the RTDE connection"):
        robot.get_observation()


def test_gripper_on_a_digital_output() -> None:
    fake = FakeRTDE()
    robot = make(fake, gripper_pin=4)
    assert robot.action_spec.shape == (7,)
    robot.send_action(np.r_[fake.q, 1.0])
    robot.send_action(np.r_[fake.q, 0.8])  # still closed: no new write
    robot.send_action(np.r_[fake.q, -1.0])
    assert fake.digital == [(4, True), (4, False)]
    assert robot.hold_action(robot.get_observation(), None)[6] == -1.0


def test_disconnect_stops_and_releases() -> None:
    fake = FakeRTDE()
    robot = make(fake)
    robot.disconnect()
    assert fake.stops[:3] == ["servoStop", "stopJ", "stopScript"] and not robot.is_connected
    with pytest.raises(RobotError, match="not connected"):
        robot.get_observation()


def test_missing_sdk_and_bad_settings_are_clear() -> None:
    try:
        import rtde_control  # noqa: F401

        pytest.skip("ur-rtde is installed here")
    except ImportError:
        pass
    with pytest.raises(RobotError, match="pip install 'robosteer\\[ur\\]'"):
        URRobot().connect()
    with pytest.raises(ValueError, match="lookahead_time"):
        URRobot(lookahead_time=1.0)
    with pytest.raises(ValueError, match="control_mode='torque'"):
        URRobot(control_mode="torque")


def test_safety_defaults_wire_into_the_filter() -> None:
    from robosteer.real.safety import SafetyConfig, SafetyFilter

    fake = FakeRTDE()
    robot = make(fake, joint_low=[-1.0] * 6, joint_high=[1.0] * 6)
    f = SafetyFilter(SafetyConfig.from_dict(robot.safety_defaults()), 6, 1 / robot.rate_hz)
    ob = robot.get_observation()
    out = f.filter(np.array([5.0, 0, 0, 0, 0, 0]), ob.data)
    assert out[0] <= 1.0 / robot.rate_hz + 1e-9  # 1 rad/s from the measured 0.0


class FakeCamera:
    """A camera serving a flat frame; ``fail_connect`` or ``stale`` make it raise as OpenCVCamera does."""

    def __init__(self, name: str, index_or_path: int | str = 0, image_size: int = 84, **kw: Any) -> None:
        self.name, self.image_size, self.kw = name, image_size, kw
        self.connected = False
        self.fail_connect = False
        self.stale = False

    def connect(self) -> None:
        if self.fail_connect:
            raise RobotError(f"camera {self.name}: cannot open 0")
        self.connected = True

    def read(self) -> tuple[np.ndarray, float]:
        if not self.connected or self.stale:
            raise RobotError(f"camera {self.name}: no frame for 0.80 s")
        return np.full((self.image_size, self.image_size, 3), 9, np.uint8), time.time()

    def disconnect(self) -> None:
        self.connected = False


def test_cameras_add_image_keys_to_observations() -> None:
    fake = FakeRTDE()
    robot = make(
        fake,
        cameras={"wrist": {"index_or_path": 0, "image_size": 84}, "front": {}},
        camera_factory=FakeCamera,
    )
    assert robot.observation_spec["image/wrist"] == ArraySpec((84, 84, 3), "uint8")
    assert robot.observation_spec["image/front"].shape == (84, 84, 3)  # the default size
    ob = robot.get_observation()
    img = ob.data["image/wrist"]
    assert img.shape == (84, 84, 3) and img.dtype == np.uint8 and (img == 9).all()
    assert set(ob.info["camera_time"]) == {"wrist", "front"}
    robot.cameras["wrist"].stale = True
    with pytest.raises(RobotError, match="camera wrist: no frame for"):
        robot.get_observation()
    robot.disconnect()
    assert not any(c.connected for c in robot.cameras.values())


def test_a_camera_failing_on_connect_leaves_nothing_connected() -> None:
    fake = FakeRTDE()
    robot = URRobot(
        control_factory=lambda h: fake,
        receive_factory=lambda h: fake,
        cameras={"front": {}, "wrist": {}},
        camera_factory=FakeCamera,
    )
    robot.cameras["wrist"].fail_connect = True
    with pytest.raises(RobotError, match="camera wrist: cannot open"):
        robot.connect()
    assert not robot.cameras["front"].connected and not robot.is_connected

    def no_arm(host: str) -> Any:
        raise OSError("no route to host")

    robot = URRobot(
        control_factory=no_arm, receive_factory=no_arm, cameras={"wrist": {}}, camera_factory=FakeCamera
    )
    with pytest.raises(RobotError, match="cannot connect to the UR arm"):
        robot.connect()
    assert not robot.cameras["wrist"].connected


def test_bad_camera_settings_are_refused_early() -> None:
    with pytest.raises(ValueError, match=r"cameras\.wrist\.image_sise .*nearest valid key: 'image_size'"):
        URRobot(cameras={"wrist": {"index_or_path": 0, "image_sise": 84}})
    with pytest.raises(ValueError, match=r"cameras\.wrist\.image_size=0 is not valid"):
        URRobot(cameras={"wrist": {"image_size": 0}})
    with pytest.raises(ValueError, match=r"cameras\.wrist\.fps=0"):
        URRobot(cameras={"wrist": {"fps": 0}})  # the real OpenCVCamera checks its settings, opening nothing
    assert URRobot(cameras={}).observation_spec.keys() == {"joint_pos", "joint_vel", "tcp_pose"}
