"""The ROS 2 bridge's message conversions (no ROS needed) and its import guard."""

from __future__ import annotations

import numpy as np
import pytest

from robosteer.real.drivers.ros2 import ROS2Robot, image_to_array, joint_state_to_array
from robosteer.real.robot import RobotError


def test_joint_state_is_reordered_by_name() -> None:
    q = joint_state_to_array(["b", "a", "c"], [2.0, 1.0, 3.0], ["a", "b", "c"])
    assert np.array_equal(q, [1.0, 2.0, 3.0])
    with pytest.raises(RobotError, match=r"lacks joints \['d'\]"):
        joint_state_to_array(["a"], [1.0], ["a", "d"])
    with pytest.raises(RobotError, match="2 names but 1 positions"):
        joint_state_to_array(["a", "b"], [1.0], ["a"])


def test_images_are_converted_to_rgb() -> None:
    bgr = np.zeros((2, 3, 3), np.uint8)
    bgr[..., 0] = 255  # blue in BGR
    padded = np.concatenate([bgr.reshape(2, 9), np.zeros((2, 3), np.uint8)], axis=1)  # step 12 > 9
    img = image_to_array(2, 3, "bgr8", 12, padded.tobytes())
    assert img.shape == (2, 3, 3) and (img[..., 2] == 255).all() and (img[..., 0] == 0).all()
    mono = image_to_array(2, 2, "mono8", 2, bytes([1, 2, 3, 4]))
    assert mono.shape == (2, 2, 3) and mono[1, 1].tolist() == [4, 4, 4]
    with pytest.raises(RobotError, match="not supported"):
        image_to_array(1, 1, "32FC1", 4, b"\x00" * 4)
    with pytest.raises(RobotError, match="too small"):
        image_to_array(4, 4, "rgb8", 12, b"\x00" * 10)


def test_connect_without_ros_explains_how() -> None:
    try:
        import rclpy  # noqa: F401

        pytest.skip("rclpy is installed here")
    except ImportError:
        pass
    with pytest.raises(RobotError, match="source /opt/ros"):
        ROS2Robot().connect()


def test_launch_file_is_valid_python() -> None:
    from pathlib import Path

    src = (Path(__file__).resolve().parents[2] / "real" / "ros2" / "robosteer_bridge.launch.py").read_text()
    compile(src, "robosteer_bridge.launch.py", "exec")
    assert "robot=ros2" in src and "generate_launch_description" in src
