"""Universal Robots (e-Series / CB3) over RTDE, through the ``ur-rtde`` SDK (optional extra: ``pip install ur-rtde``).

Why this shape: ``ur_rtde``'s ``servoJ`` streams joint targets at the control rate and is what
diffusion_policy's real UR5 runner used; the driver translates the runtime's commands into it and refuses
anything the arm should never see. The SDK is imported only when a ``URRobot`` connects without injected
interfaces, so the rest of robosteer (and its tests, with a fake RTDE interface) runs without it.

Control modes:
- ``joint_position``: the command is 6 joint targets (rad), sent with ``servoJ``.
- ``joint_delta``: the command is a per-step joint change in [-1, 1], scaled by ``delta_scale`` rad and
  added to the measured joint angles.
An optional 7th command dim drives a gripper on a standard digital output (``gripper_pin``): > 0 closes.

Cameras: the arm has none, so ``cameras`` (name -> :class:`~robosteer.real.drivers.camera.OpenCVCamera`
settings, optional extra ``robosteer[camera]``) adds ``image/<name>`` frames, uint8 (S, S, 3) like the ROS 2
driver's, to every observation. The observation keeps the joint state's timestamp; a camera whose newest
frame is older than its ``max_age_s`` makes ``get_observation`` raise, so the control loop stops the arm
rather than act on an old picture.

Faults become :class:`RobotError`: lost connection, a protective or emergency stop (safety mode not
NORMAL/REDUCED), the control script not running, ``servoJ`` refusing a target, non-finite or mis-shaped
commands. Commands whose timestamp is older than ``stale_s`` are dropped, never executed late.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from robosteer.real.drivers.camera import DEFAULT_IMAGE_SIZE, OpenCVCamera, camera_settings
from robosteer.real.robot import ArraySpec, Observation, Robot, RobotError, SafetyStop

# UR e-Series joint limits (rad): base..wrist 3; every joint turns +-2 pi.
UR_JOINT_LIMIT = 2 * np.pi
SAFETY_MODES_OK = (1, 2)  # ur_rtde getSafetyMode(): 1 NORMAL, 2 REDUCED; 3+ protective/e-stop/violation


def _import_rtde() -> tuple[Any, Any, Any]:
    try:
        import rtde_control
        import rtde_io
        import rtde_receive
    except ImportError as e:
        raise RobotError(
            "robot=ur needs the ur-rtde SDK: pip install 'robosteer[ur]' (or pip install ur-rtde) "
            f"on the machine wired to the arm ({e})"
        ) from e
    return rtde_control.RTDEControlInterface, rtde_receive.RTDEReceiveInterface, rtde_io.RTDEIOInterface


class URRobot(Robot):
    """A UR arm at ``host``; ``control_factory``/``receive_factory``/``io_factory`` replace the SDK (tests).

    ``cameras``: e.g. ``{"wrist": {"index_or_path": 0, "image_size": 84}}``;
    ``camera_factory(name=..., **settings)`` replaces :class:`OpenCVCamera` (tests).
    """

    control_modes = ("joint_position", "joint_delta")

    def __init__(
        self,
        host: str = "192.168.1.10",
        rate_hz: float = 125.0,
        control_mode: str | None = None,
        joint_low: list[float] | None = None,
        joint_high: list[float] | None = None,
        max_joint_step: float = 0.05,
        delta_scale: float = 0.01,
        servo_speed: float = 0.5,
        servo_accel: float = 0.5,
        lookahead_time: float = 0.1,
        gain: float = 300.0,
        gripper_pin: int | None = None,
        stale_s: float = 0.05,
        control_factory: Callable[[str], Any] | None = None,
        receive_factory: Callable[[str], Any] | None = None,
        io_factory: Callable[[str], Any] | None = None,
        cameras: Mapping[str, Mapping[str, Any]] | None = None,
        camera_factory: Callable[..., Any] | None = None,
    ) -> None:
        super().__init__(control_mode)
        if cameras is not None and not isinstance(cameras, Mapping):
            raise ValueError(f"cameras must be a mapping of name -> settings, got {cameras!r}")
        # checked (keys, image_size) and built before anything connects; nothing opens until connect()
        settings = {name: camera_settings(name, entry) for name, entry in (cameras or {}).items()}
        self.camera_sizes = {
            name: int(s.get("image_size", DEFAULT_IMAGE_SIZE)) for name, s in settings.items()
        }
        make_camera = camera_factory or OpenCVCamera
        self.cameras = {name: make_camera(name=name, **s) for name, s in settings.items()}
        if not 0.03 <= lookahead_time <= 0.2:
            raise ValueError(f"lookahead_time={lookahead_time} is not valid: ur_rtde accepts 0.03..0.2 s")
        if not 100.0 <= gain <= 2000.0:
            raise ValueError(f"gain={gain} is not valid: ur_rtde accepts 100..2000")
        self.host = host
        self.rate_hz = float(rate_hz)
        self.joint_low = np.asarray(
            joint_low if joint_low is not None else [-UR_JOINT_LIMIT] * 6, dtype=np.float64
        )
        self.joint_high = np.asarray(
            joint_high if joint_high is not None else [UR_JOINT_LIMIT] * 6, dtype=np.float64
        )
        if (
            self.joint_low.shape != (6,)
            or self.joint_high.shape != (6,)
            or (self.joint_low >= self.joint_high).any()
        ):
            raise ValueError(
                f"joint_low/joint_high must be 6 values with low < high, got {self.joint_low}, {self.joint_high}"
            )
        self.max_joint_step = float(max_joint_step)
        self.delta_scale = float(delta_scale)
        self.servo = (float(servo_speed), float(servo_accel), float(lookahead_time), float(gain))
        self.gripper_pin = gripper_pin
        self.stale_s = float(stale_s)
        self._factories = (control_factory, receive_factory, io_factory)
        self._ctrl: Any = None
        self._recv: Any = None
        self._io: Any = None
        self._seq = 0
        self._gripper = 0.0
        self.dropped_stale = 0

    # ------------------------------------------------------------------ specs
    @property
    def action_dim(self) -> int:
        return 6 + (self.gripper_pin is not None)

    @property
    def action_spec(self) -> ArraySpec:
        g = (self.gripper_pin is not None,)
        if self.control_mode == "joint_position":
            low = tuple(self.joint_low) + (-1.0,) * g[0]
            high = tuple(self.joint_high) + (1.0,) * g[0]
        else:
            low, high = (-1.0,) * self.action_dim, (1.0,) * self.action_dim
        return ArraySpec((self.action_dim,), "float64", low, high)

    @property
    def observation_spec(self) -> dict[str, ArraySpec]:
        spec = {"joint_pos": ArraySpec((6,)), "joint_vel": ArraySpec((6,)), "tcp_pose": ArraySpec((6,))}
        spec.update({f"image/{name}": ArraySpec((s, s, 3), "uint8") for name, s in self.camera_sizes.items()})
        return spec

    @property
    def is_connected(self) -> bool:
        return self._ctrl is not None and bool(self._ctrl.isConnected()) and bool(self._recv.isConnected())

    # ------------------------------------------------------------------ connection
    def connect(self) -> None:
        """The cameras first (a missing one never touches the arm), then the arm; a failure in either
        disconnects the cameras that were connected."""
        self._connect_cameras()
        try:
            self._connect_arm()
        except BaseException:
            self._disconnect_cameras()
            raise

    def _connect_cameras(self) -> None:
        connected = []
        for name, cam in self.cameras.items():
            try:
                cam.connect()
            except Exception as e:
                for other in [*connected, cam]:
                    with contextlib.suppress(Exception):
                        other.disconnect()
                if isinstance(e, RobotError):
                    raise
                raise RobotError(f"camera {name}: {type(e).__name__}: {e}") from e
            connected.append(cam)

    def _disconnect_cameras(self) -> None:
        for cam in self.cameras.values():
            with contextlib.suppress(Exception):
                cam.disconnect()

    def _connect_arm(self) -> None:
        control_f, receive_f, io_f = self._factories
        if control_f is None or receive_f is None:
            control_f, receive_f, sdk_io = _import_rtde()
            io_f = io_f or sdk_io
        try:
            self._recv = receive_f(self.host)
            self._ctrl = control_f(self.host)
            self._io = io_f(self.host) if (io_f is not None and self.gripper_pin is not None) else None
        except Exception as e:
            self._ctrl = self._recv = self._io = None
            raise RobotError(f"cannot connect to the UR arm at {self.host}: {e}") from e
        self._check_state()

    def _check_state(self) -> None:
        if self._ctrl is None or self._recv is None:
            raise RobotError("UR arm is not connected: call connect() first")
        if not self._ctrl.isConnected() or not self._recv.isConnected():
            raise RobotError(f"lost the RTDE connection to the UR arm at {self.host}")
        mode = int(self._recv.getSafetyMode())
        if mode not in SAFETY_MODES_OK:  # the arm stopped itself: the episode ends, not the run
            raise SafetyStop(
                f"UR arm at {self.host} is in safety mode {mode} (protective/emergency stop or violation): "
                "clear it on the teach pendant before commanding the arm"
            )
        if hasattr(self._ctrl, "isProgramRunning") and not self._ctrl.isProgramRunning():
            raise RobotError(
                f"the RTDE control script is not running on {self.host} (stopped from the pendant?)"
            )

    # ------------------------------------------------------------------ Robot interface
    def get_observation(self) -> Observation:
        self._check_state()
        q = np.asarray(self._recv.getActualQ(), dtype=np.float64)
        qd = np.asarray(self._recv.getActualQd(), dtype=np.float64)
        tcp = np.asarray(self._recv.getActualTCPPose(), dtype=np.float64)
        if q.shape != (6,) or not np.isfinite(q).all():
            raise RobotError(f"UR arm reported joint angles {q.tolist()}: expected 6 finite values")
        stamp = time.time()
        data = {
            "joint_pos": q.astype(np.float32),
            "joint_vel": qd.astype(np.float32),
            "tcp_pose": tcp.astype(np.float32),
        }
        info: dict[str, Any] = {"controller_time": float(self._recv.getTimestamp())}
        if self.cameras:
            info["camera_time"] = {}
            for name, cam in self.cameras.items():
                data[f"image/{name}"], info["camera_time"][name] = cam.read()  # stale: RobotError
        self._seq += 1
        return Observation(data, stamp, self._seq, info)

    def translate(self, action: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, float | None]:
        """Command -> (6 joint targets for servoJ, gripper value or None); raises on bad input.

        The last line of defence after the safety filter: targets are clipped to the joint limits and to
        ``max_joint_step`` rad from the measured angles, whatever the filter was configured to.
        """
        a = np.asarray(action, dtype=np.float64).reshape(-1)
        if a.shape != (self.action_dim,):
            raise RobotError(
                f"UR command has shape {a.shape}, expected ({self.action_dim},) in {self.control_mode} mode"
            )
        if not np.isfinite(a).all():
            raise RobotError(f"UR command {a.tolist()} holds NaN/Inf: refused")
        joints = a[:6]
        target = (
            joints.copy()
            if self.control_mode == "joint_position"
            else q + np.clip(joints, -1, 1) * self.delta_scale
        )
        target = np.clip(target, q - self.max_joint_step, q + self.max_joint_step)
        target = np.clip(target, self.joint_low, self.joint_high)
        grip = float(a[6]) if self.gripper_pin is not None else None
        return target, grip

    def send_action(self, action: np.ndarray, timestamp: float | None = None) -> None:
        if timestamp is not None and timestamp < time.time() - self.stale_s:
            self.dropped_stale += 1  # late commands are never executed
            return
        self._check_state()
        q = np.asarray(self._recv.getActualQ(), dtype=np.float64)
        target, grip = self.translate(action, q)
        speed, accel, lookahead, gain = self.servo
        ok = self._ctrl.servoJ(target.tolist(), speed, accel, 1.0 / self.rate_hz, lookahead, gain)
        if ok is False:
            self.stop()
            raise RobotError(
                f"servoJ refused target {np.round(target, 4).tolist()} on {self.host}: arm stopped"
            )
        if grip is not None and self._io is not None and (grip > 0) != (self._gripper > 0):
            self._io.setStandardDigitalOut(int(self.gripper_pin), bool(grip > 0))
        if grip is not None:
            self._gripper = grip

    def hold_action(self, obs: Observation | None, last_action: np.ndarray | None) -> np.ndarray:
        if self.control_mode == "joint_delta":
            cmd = np.zeros(self.action_dim)
        else:
            q = obs.data["joint_pos"] if obs is not None else self._recv.getActualQ()
            cmd = np.zeros(self.action_dim)
            cmd[:6] = np.asarray(q, dtype=np.float64)
        if self.gripper_pin is not None:
            cmd[6] = self._gripper
        return cmd

    def stop(self) -> None:
        if self._ctrl is None:
            return
        with contextlib.suppress(Exception):
            self._ctrl.servoStop(2.0)
        with contextlib.suppress(Exception):
            self._ctrl.stopJ(2.0)

    def disconnect(self) -> None:
        if self._ctrl is not None:
            self.stop()
            try:
                self._ctrl.stopScript()
                self._ctrl.disconnect()
            except Exception:
                pass
        if self._recv is not None:
            with contextlib.suppress(Exception):
                self._recv.disconnect()
        self._ctrl = self._recv = self._io = None
        self._disconnect_cameras()

    def safety_defaults(self) -> dict[str, Any]:
        """Safety-filter defaults for this arm: joint limits and per-step limits in the current mode."""
        if self.control_mode == "joint_position":
            low, high = list(self.action_spec.low or ()), list(self.action_spec.high or ())
            return {
                "kind": "absolute",
                "command_low": low,
                "command_high": high,
                "max_velocity": 1.0,  # rad/s on any joint
                "position_key": "joint_pos",
                "position_slice": [0, 6],
                "pos_dims": list(range(6)),
                "gripper_index": 6 if self.gripper_pin is not None else None,
            }
        return {
            "kind": "delta",
            "command_low": [-1.0] * self.action_dim,
            "command_high": [1.0] * self.action_dim,
            "max_delta": 0.5,
            "position_key": "joint_pos",
            "position_slice": [0, 6],
            "pos_dims": list(range(6)),
            "gripper_index": 6 if self.gripper_pin is not None else None,
        }
