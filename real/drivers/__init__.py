"""Robot drivers: the sim twin (always available), Universal Robots (ur-rtde extra) and ROS 2 (rclpy).

``make_robot(name, **kwargs)`` imports a driver only when it is asked for, so a missing optional SDK
fails with a clear message at that point and nowhere else.
"""

from __future__ import annotations

import difflib
from typing import Any

ROBOTS = {
    "sim_twin": ("robosteer.real.drivers.sim_twin", "SimTwinRobot"),
    "ur": ("robosteer.real.drivers.ur", "URRobot"),
    "ros2": ("robosteer.real.drivers.ros2", "ROS2Robot"),
}


def make_robot(name: str, **kwargs: Any) -> Any:
    """Build the driver ``name`` (one of ``ROBOTS``) with its keyword arguments."""
    import importlib

    if name not in ROBOTS:
        near = difflib.get_close_matches(str(name), list(ROBOTS), n=1)
        hint = f"; nearest valid choice: {near[0]!r}" if near else ""
        raise ValueError(f"robot={name!r} is not valid: expected one of {list(ROBOTS)}{hint}")
    module, cls = ROBOTS[name]
    return getattr(importlib.import_module(module), cls)(**kwargs)


__all__ = ["ROBOTS", "make_robot"]
