"""A ROS 2 bridge: the arm's ``sensor_msgs/JointState`` and camera topics in, joint commands out.

Why a bridge rather than a ROS-native runtime: the runtime, safety filter and policy client stay the same
on every robot; this driver is a small rclpy node that keeps the latest joint state and images (stamped
with their header time) and publishes ``std_msgs/Float64MultiArray`` commands, which is what ros2_control's
``forward_command_controller`` (e.g. ``forward_position_controller``) consumes. rclpy cannot be installed
here (it comes with a ROS 2 distribution), so it is imported only when a ``ROS2Robot`` connects; the
message conversions below are plain functions, tested without ROS. See docs/deploy.md and
``real/ros2/robosteer_bridge.launch.py`` for running it on a ROS 2 machine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from robosteer.real.robot import ArraySpec, Observation, Robot, RobotError

_ENCODINGS = {"rgb8": (3, False), "bgr8": (3, True), "mono8": (1, False)}


def joint_state_to_array(
    names: Sequence[str], positions: Sequence[float], wanted: Sequence[str]
) -> np.ndarray:
    """Positions of ``wanted`` joints in that order from a JointState's (name, position) lists."""
    index = {n: i for i, n in enumerate(names)}
    missing = [n for n in wanted if n not in index]
    if missing:
        raise RobotError(f"JointState lacks joints {missing}: it has {list(names)}")
    if len(positions) != len(names):
        raise RobotError(f"JointState has {len(names)} names but {len(positions)} positions")
    return np.asarray([positions[index[n]] for n in wanted], dtype=np.float32)


def image_to_array(height: int, width: int, encoding: str, step: int, data: bytes) -> np.ndarray:
    """A ``sensor_msgs/Image`` payload -> (H, W, 3) uint8 RGB (bgr8 and mono8 are converted)."""
    if encoding not in _ENCODINGS:
        raise RobotError(
            f"image encoding {encoding!r} is not supported: expected one of {sorted(_ENCODINGS)}"
        )
    ch, bgr = _ENCODINGS[encoding]
    if step < width * ch or len(data) < step * height:
        raise RobotError(
            f"image buffer of {len(data)} bytes (step {step}) is too small for {height}x{width}x{ch}"
        )
    rows = np.frombuffer(bytes(data), dtype=np.uint8)[: step * height].reshape(height, step)
    img = rows[:, : width * ch].reshape(height, width, ch)
    if ch == 1:
        img = np.repeat(img, 3, axis=2)
    elif bgr:
        img = img[..., ::-1]
    return np.ascontiguousarray(img)


def stamp_to_seconds(sec: int, nanosec: int) -> float:
    return float(sec) + 1e-9 * float(nanosec)


class ROS2Robot(Robot):
    """Joint-position control through ROS 2 topics (needs a sourced ROS 2 environment for rclpy)."""

    control_modes = ("joint_position",)

    def __init__(
        self,
        joint_names: Sequence[str] = (
            "shoulder_pan_joint",
            "shoulder_lift_joint",
            "elbow_joint",
            "wrist_1_joint",
            "wrist_2_joint",
            "wrist_3_joint",
        ),
        joint_state_topic: str = "/joint_states",
        command_topic: str = "/forward_position_controller/commands",
        camera_topics: dict[str, str] | None = None,
        rate_hz: float = 30.0,
        node_name: str = "robosteer_bridge",
        state_timeout_s: float = 0.5,
        control_mode: str | None = None,
    ) -> None:
        super().__init__(control_mode)
        self.joint_names = list(joint_names)
        self.joint_state_topic = joint_state_topic
        self.command_topic = command_topic
        self.camera_topics = dict(camera_topics or {})
        self.rate_hz = float(rate_hz)
        self.node_name = node_name
        self.state_timeout_s = float(state_timeout_s)
        self._node: Any = None
        self._pub: Any = None
        self._executor: Any = None
        self._spin: threading.Thread | None = None
        self._lock = threading.Lock()
        self._joints: tuple[np.ndarray, float] | None = None
        self._images: dict[str, np.ndarray] = {}
        self._seq = 0

    @property
    def action_spec(self) -> ArraySpec:
        return ArraySpec((len(self.joint_names),), "float64")

    @property
    def observation_spec(self) -> dict[str, ArraySpec]:
        spec = {"joint_pos": ArraySpec((len(self.joint_names),))}
        spec.update({f"image/{name}": ArraySpec((0, 0, 3), "uint8") for name in self.camera_topics})
        return spec

    @property
    def is_connected(self) -> bool:
        return self._node is not None

    def connect(self) -> None:
        try:
            import rclpy
            from rclpy.executors import MultiThreadedExecutor
            from sensor_msgs.msg import Image, JointState
            from std_msgs.msg import Float64MultiArray
        except ImportError as e:
            raise RobotError(
                "robot=ros2 needs rclpy, sensor_msgs and std_msgs from a ROS 2 distribution: "
                f"source /opt/ros/<distro>/setup.bash first (see docs/deploy.md) ({e})"
            ) from e
        self._Float64MultiArray = Float64MultiArray
        if not rclpy.ok():
            rclpy.init()
        self._node = rclpy.create_node(self.node_name)
        self._node.create_subscription(JointState, self.joint_state_topic, self._on_joints, 10)
        for name, topic in self.camera_topics.items():
            self._node.create_subscription(Image, topic, lambda msg, n=name: self._on_image(n, msg), 2)
        self._pub = self._node.create_publisher(Float64MultiArray, self.command_topic, 10)
        self._executor = MultiThreadedExecutor()
        self._executor.add_node(self._node)
        self._spin = threading.Thread(target=self._executor.spin, name="ros2-spin", daemon=True)
        self._spin.start()
        deadline = time.time() + 5.0
        while self._joints is None and time.time() < deadline:
            time.sleep(0.05)
        if self._joints is None:
            self.disconnect()
            raise RobotError(
                f"no JointState on {self.joint_state_topic} within 5 s: is the arm's driver running?"
            )

    def _on_joints(self, msg: Any) -> None:
        q = joint_state_to_array(list(msg.name), list(msg.position), self.joint_names)
        with self._lock:
            self._joints = (
                q,
                stamp_to_seconds(msg.header.stamp.sec, msg.header.stamp.nanosec) or time.time(),
            )

    def _on_image(self, name: str, msg: Any) -> None:
        img = image_to_array(msg.height, msg.width, msg.encoding, msg.step, msg.data)
        with self._lock:
            self._images[name] = img

    def get_observation(self) -> Observation:
        with self._lock:
            if self._joints is None:
                raise RobotError("no joint state received yet")
            q, stamp = self._joints
            images = dict(self._images)
        if time.time() - stamp > self.state_timeout_s:
            raise RobotError(
                f"joint state is {time.time() - stamp:.2f} s old (> {self.state_timeout_s} s): driver down?"
            )
        self._seq += 1
        data = {"joint_pos": q, **{f"image/{k}": v for k, v in images.items()}}
        return Observation(data, stamp, self._seq, {})

    def send_action(self, action: np.ndarray, timestamp: float | None = None) -> None:
        a = np.asarray(action, dtype=np.float64).reshape(-1)
        if a.shape != (len(self.joint_names),) or not np.isfinite(a).all():
            raise RobotError(
                f"ROS 2 command {a.tolist()} is not {len(self.joint_names)} finite joint targets"
            )
        if self._pub is None:
            raise RobotError("ROS 2 bridge is not connected")
        msg = self._Float64MultiArray()
        msg.data = a.tolist()
        self._pub.publish(msg)

    def hold_action(self, obs: Observation | None, last_action: np.ndarray | None) -> np.ndarray:
        if obs is None:
            obs = self.get_observation()
        return np.asarray(obs.data["joint_pos"], dtype=np.float64)

    def stop(self) -> None:
        """Hold the measured position (forward controllers have no stop service; the pendant's e-stop rules)."""
        if self._pub is not None and self._joints is not None:
            self.send_action(self._joints[0])

    def disconnect(self) -> None:
        if self._executor is not None:
            self._executor.shutdown()
        if self._node is not None:
            self._node.destroy_node()
        self._node = self._pub = self._executor = None

    def safety_defaults(self) -> dict[str, Any]:
        return {
            "kind": "absolute",
            "max_velocity": 1.0,
            "position_key": "joint_pos",
            "position_slice": [0, len(self.joint_names)],
            "pos_dims": list(range(len(self.joint_names))),
        }
