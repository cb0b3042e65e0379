"""Rendering: tuned settings, upright corner cameras, one reused renderer per env, clean close."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from robosteer import sim
from robosteer.sim.render import CameraRenderer, upside_down_cameras


def test_corner_cameras_are_rotated_upright() -> None:
    with sim.make_env("reach-v3", obs="image", cameras=("corner2", "topview"), image_size=64) as env:
        obs = env.reset(seed=0)
        base = env.unwrapped_envs[0]
        assert upside_down_cameras(base.model) == {"corner", "corner2", "corner3", "corner4"}
        base.model.vis.global_.offwidth = base.model.vis.global_.offheight = 64
        raw = mujoco.Renderer(base.model, 64, 64)
        try:
            raw.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
            raw.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
            raw.scene.flags[mujoco.mjtRndFlag.mjRND_SKYBOX] = False
            raw.update_scene(base.data, camera="corner2")
            upside_down = raw.render()
            raw.update_scene(base.data, camera="topview")
            top = raw.render()
        finally:
            raw.close()
        image = obs["image/corner2"][0]
        assert image.std() > 10  # a scene, not a blank frame
        np.testing.assert_array_equal(image, upside_down[::-1, ::-1])
        np.testing.assert_array_equal(obs["image/topview"][0], top)
        # Upright: the empty grey backdrop is at the top of the picture, the floor and table below.
        assert image[:8].std() < image[-32:].std()


def test_tuned_settings_and_close() -> None:
    env = sim.make_env("reach-v3", obs="image", image_size=84)
    base = env.unwrapped_envs[0]
    assert base.model.vis.quality.offsamples == 0
    renderer = base._renderers[84]
    assert renderer._renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] == 0
    env.reset(seed=0)
    frame = env.render(camera="corner3", size=96)
    assert frame.shape == (96, 96, 3) and frame.dtype == np.uint8
    assert set(base._renderers) == {84, 96}  # one renderer per size, reused
    env.close()
    assert renderer._renderer is None and not base._renderers
    env.close()  # closing twice is harmless


def test_renderer_rejects_unknown_camera() -> None:
    with sim.make_env("reach-v3") as env:
        base = env.unwrapped_envs[0]
        renderer = CameraRenderer(base.model, 16)
        try:
            with pytest.raises(sim.InvalidChoiceError, match="'topview'"):
                renderer.render(base.data, "top_view")
        finally:
            renderer.close()
