"""Fast headless rendering of MuJoCo cameras (EGL) for image observations and videos.

Meta-World's defaults (4x MSAA, shadows, reflections, a 640 px offscreen buffer) render ~14 frames/s at
84 px on this CPU's software EGL; switching those off and sizing the buffer to the image gives ~130/s.
One ``CameraRenderer`` owns one GL context, so keep one per env and per image size and reuse it.

The ``corner*`` cameras of Meta-World are mounted upside down (their up axis points at the floor), so
their images are rotated by 180 degrees here: a real camera mounted upside down produces a rotated (not a
mirrored) image, and rotating it back gives the view a person standing there would see.
"""

from __future__ import annotations

import contextlib
import os

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
import numpy as np

from robosteer.sim.errors import check_choice


def camera_names(model: mujoco.MjModel) -> list[str]:
    """Names of the model's cameras, in id order (what ``cameras=`` may name)."""
    return [model.camera(i).name for i in range(model.ncam)]


def upside_down_cameras(model: mujoco.MjModel) -> set[str]:
    """World-fixed cameras whose image up axis points downwards (they need a 180-degree rotation).

    Computed on scratch data: kinematics on the env's own data would undo site positions that
    Meta-World writes into ``data.site_xpos`` (the goal markers).
    """
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)  # computes cam_xmat (mj_kinematics alone does not)
    names = set()
    for i in range(model.ncam):
        fixed = model.cam_bodyid[i] == 0 and model.cam_mode[i] == mujoco.mjtCamLight.mjCAMLIGHT_FIXED
        up_z = data.cam_xmat[i].reshape(3, 3)[2, 1]  # world z of the camera's image-up (y) axis
        if fixed and up_z < 0:
            names.add(model.camera(i).name)
    return names


class CameraRenderer:
    """A tuned ``mujoco.Renderer`` of square ``size`` images for one model; reused for every frame.

    ``tuned=False`` keeps MuJoCo's/the model's default quality settings (for benchmarks only).
    """

    def __init__(self, model: mujoco.MjModel, size: int, tuned: bool = True) -> None:
        if not isinstance(size, int | np.integer) or size < 8:
            raise ValueError(f"image size {size!r} is not valid: expected an int >= 8 (e.g. 84)")
        self.model = model
        self.size = int(size)
        self.tuned = tuned
        self._cameras = camera_names(model)
        self._rotate = upside_down_cameras(model)
        if tuned:
            # The offscreen buffer is allocated from these fields when the GL context is made.
            model.vis.global_.offwidth = self.size
            model.vis.global_.offheight = self.size
            model.vis.quality.offsamples = 0
        else:
            model.vis.global_.offwidth = max(model.vis.global_.offwidth, self.size)
            model.vis.global_.offheight = max(model.vis.global_.offheight, self.size)
        self._renderer: mujoco.Renderer | None = mujoco.Renderer(model, self.size, self.size)
        if tuned:
            flags = self._renderer.scene.flags
            flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
            flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
            flags[mujoco.mjtRndFlag.mjRND_SKYBOX] = False

    def check_camera(self, camera: str) -> str:
        """Return ``camera`` if the model has it, else raise an InvalidChoiceError naming the nearest."""
        return check_choice("camera", camera, self._cameras)

    def render(self, data: mujoco.MjData, camera: str) -> np.ndarray:
        """Render ``camera`` for the current ``data``: (H, W, 3) uint8, a fresh array (safe to keep)."""
        if self._renderer is None:
            raise RuntimeError("CameraRenderer.render called after close()")
        self._renderer.update_scene(data, camera=self.check_camera(camera))
        image = self._renderer.render()  # (H, W, 3) uint8, a new array each call
        if camera in self._rotate:
            image = np.ascontiguousarray(image[::-1, ::-1])
        return image

    def close(self) -> None:
        """Free the GL context now (mujoco.Renderer.__del__ at interpreter exit raises EGL noise)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # GL teardown at interpreter exit: nothing useful to report
            self.close()
