"""What a Meta-World observation holds, by mode: names and slices only, no simulator.

Kept apart from ``metaworld_env`` so that code which only names observation modes (a robot's driver, a
steering run on a real arm) does not import MuJoCo or Meta-World.
"""

from __future__ import annotations

OBS_MODES = ("state", "image", "state+image", "pixels", "state+pixels")
# What a real arm measures of itself: the hand's position (3) and the gripper's opening (1), the first four
# entries of Meta-World's state. The rest (object and goal poses) is privileged: no camera-only robot has it.
PROPRIO_SLICE = slice(0, 4)
REWARD_MODES = ("dense", "sparse")
STATE_DIM = 39


def obs_mode_for_keys(keys: list[str] | tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The observation mode and cameras that produce ``keys`` (``state``, ``proprio``, ``image/<camera>``)."""
    cams = tuple(k.removeprefix("image/") for k in keys if k.startswith("image/"))
    unknown = [k for k in keys if k not in ("state", "proprio") and not k.startswith("image/")]
    if unknown:
        raise ValueError(
            f"obs key {unknown[0]!r} is not one Meta-World provides: expected state, proprio or image/<camera>"
        )
    state, proprio = "state" in keys, "proprio" in keys
    if proprio and not cams:
        raise ValueError(
            f"obs keys {list(keys)}: proprio comes with camera images (obs=pixels); add image/<camera>"
        )
    if not cams:
        return "state", ()
    mode = "pixels" if proprio else "image"
    return (f"state+{mode}" if state else mode), cams


__all__ = ["OBS_MODES", "PROPRIO_SLICE", "REWARD_MODES", "STATE_DIM", "obs_mode_for_keys"]
