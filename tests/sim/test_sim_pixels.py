"""obs=pixels: proprio (what a real arm measures) plus cameras, never the privileged state."""

from __future__ import annotations

import numpy as np
import pytest

from robosteer import sim
from robosteer.sim.errors import InvalidChoiceError


def test_pixels_observations_hold_proprio_and_cameras_only() -> None:
    with sim.make_env(
        "push-v3", num_envs=1, obs="state+pixels", cameras=("corner", "gripperPOV"), image_size=32
    ) as env:
        assert set(env.single_observation_space.spaces) == {
            "state",
            "proprio",
            "image/corner",
            "image/gripperPOV",
        }
        obs = env.reset(seed=[3])
        for _ in range(3):
            np.testing.assert_array_equal(obs["proprio"], obs["state"][:, :4])  # hand xyz + gripper opening
            obs, *_ = env.step(np.array([[0.5, -0.5, 0.2, 1.0]]))
    with sim.make_env("push-v3", num_envs=1, obs="pixels", image_size=32, cameras=("corner",)) as env:
        obs = env.reset(seed=[3])
        assert set(obs) == {"proprio", "image/corner"}  # no state anywhere
        assert obs["proprio"].shape == (1, 4) and obs["image/corner"].dtype == np.uint8


def test_obs_keys_map_to_the_mode_that_produces_them() -> None:
    assert sim.obs_mode_for_keys(["state"]) == ("state", ())
    assert sim.obs_mode_for_keys(["proprio", "image/corner"]) == ("pixels", ("corner",))
    assert sim.obs_mode_for_keys(["state", "proprio", "image/a", "image/b"]) == ("state+pixels", ("a", "b"))
    assert sim.obs_mode_for_keys(["image/corner2"]) == ("image", ("corner2",))
    assert sim.obs_mode_for_keys(["state", "image/corner2"]) == ("state+image", ("corner2",))
    with pytest.raises(ValueError, match="'object_pose' is not one Meta-World provides"):
        sim.obs_mode_for_keys(["object_pose"])
    with pytest.raises(ValueError, match="proprio comes with camera images"):
        sim.obs_mode_for_keys(["proprio"])


def test_a_camera_the_task_lacks_lists_its_cameras() -> None:
    with pytest.raises(InvalidChoiceError) as err:
        sim.MetaWorldEnv("push-v3", obs="pixels", cameras=("wrist",))
    assert "unknown camera 'wrist'" in str(err.value) and "gripperPOV" in str(err.value)


def test_rendering_only_the_steps_a_chunked_policy_reads_changes_no_window() -> None:
    """render="policy_steps": the windows (To=2) a chunked policy reads, time-outs included, are the every-step
    ones, with a fraction of the renders."""
    from unittest import mock

    from robosteer.sim.render import CameraRenderer

    rng = np.random.default_rng(0)
    chunks = rng.uniform(-1, 1, (6, 1, 8, 4)).astype(np.float32)  # 6 chunks of 8: 48 > the 20-step limit
    windows, renders = {}, {}
    for mode in ("every_step", "policy_steps"):
        kw = dict(obs="pixels", cameras=("corner",), image_size=24, action_chunk=8, obs_history=2)
        with (
            sim.make_env("push-v3", max_episode_steps=20, render=mode, **kw) as env,
            mock.patch.object(
                CameraRenderer, "render", autospec=True, side_effect=CameraRenderer.render
            ) as spy,
        ):
            out = [env.reset(seed=[7])["image/corner"]]
            for chunk in chunks:
                obs, _, terminated, truncated, info = env.step(chunk)
                assert not terminated[0]  # random pushes: no success, so every window is one the policy reads
                out.append(info["final_obs"]["image/corner"] if truncated[0] else obs["image/corner"])
            windows[mode], renders[mode] = np.stack(out), spy.call_count
    np.testing.assert_array_equal(windows["policy_steps"], windows["every_step"])  # (7, 1, 2, 24, 24, 3)
    assert renders["policy_steps"] < renders["every_step"] / 2, renders
