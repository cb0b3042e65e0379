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
