"""The batched env protocol: shapes, seeds and determinism, auto-reset, termination, sync == async."""

from __future__ import annotations

import numpy as np
import pytest

from robosteer import sim

# Meta-World's scripted policies warn that their gains saturate; the env clips actions anyway.
pytestmark = pytest.mark.filterwarnings("ignore:Constant\\(s\\) may be too high")


def _rollout(env: sim.BatchedEnv, steps: int, action_seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(action_seed)
    states = []
    for _ in range(steps):
        action = rng.uniform(-1, 1, (env.num_envs, 4)).astype(np.float32)
        obs, *_ = env.step(action)
        states.append(obs["state"].copy())
    return states


def test_spaces_and_observation_layout() -> None:
    with sim.make_env("reach-v3", num_envs=2, obs="state+image", image_size=48) as env:
        assert env.num_envs == 2 and env.max_episode_steps == 200
        assert set(env.single_observation_space.spaces) == {"state", "image/corner2"}
        assert env.single_action_space.shape == (4,)
        obs = env.reset(seed=0)
        assert obs["state"].shape == (2, 39) and obs["state"].dtype == np.float32
        assert obs["image/corner2"].shape == (2, 48, 48, 3) and obs["image/corner2"].dtype == np.uint8
        assert env.episode_seeds.shape == (2,) and env.episode_seeds.dtype == np.int64
        obs, reward, terminated, truncated, info = env.step(np.zeros((2, 4), np.float32))
        assert reward.shape == terminated.shape == truncated.shape == (2,)
        assert info["success"].dtype == bool and info["success"].shape == (2,)
        assert info["episode_seed"].tolist() == env.episode_seeds.tolist()
        assert set(info["final_obs"]) == {"state", "image/corner2"}
        for i in range(2):
            assert env.single_observation_space.contains({k: v[i] for k, v in obs.items()})
        assert env.get_sim_states().shape[0] == 2


def test_same_seed_same_trajectory_and_seed_only_initial_state() -> None:
    with sim.make_env("push-v3", num_envs=2) as a, sim.make_env("push-v3", num_envs=2, seed=5) as b:
        first_a = a.reset(seed=7)["state"]
        traj_a = _rollout(a, 20)
        first_b = b.reset(seed=7)["state"]  # different construction seed, same reset seed
        traj_b = _rollout(b, 20)
        np.testing.assert_array_equal(first_a, first_b)
        for x, y in zip(traj_a, traj_b):
            np.testing.assert_array_equal(x, y)
        assert not np.array_equal(first_a[0], first_a[1])  # env 0 and env 1 get different episode seeds
        # The initial state depends only on the episode seed, not on what ran before in that env.
        again = a.reset(seed=[int(a.episode_seeds[1]), int(a.episode_seeds[0])])["state"]
        np.testing.assert_array_equal(again, first_a[::-1])
        other = a.reset(seed=8)["state"]
        assert not np.allclose(other, first_a)
        np.testing.assert_array_equal(a.reset(seed=[123, 456])["state"], b.reset(seed=[123, 456])["state"])


def test_seedless_resets_follow_the_construction_seed() -> None:
    with (
        sim.make_env("reach-v3", seed=3) as a,
        sim.make_env("reach-v3", seed=3) as b,
        sim.make_env("reach-v3", seed=4) as c,
    ):
        np.testing.assert_array_equal(a.reset()["state"], b.reset()["state"])
        c.reset()
        assert a.episode_seeds.tolist() == b.episode_seeds.tolist()
        assert a.episode_seeds.tolist() != c.episode_seeds.tolist()
        a.reset()  # the next seed-less reset draws a new seed from the same stream
        assert a.episode_seeds.tolist() != b.episode_seeds.tolist()


def test_auto_reset_same_step_with_final_obs_and_new_seed() -> None:
    with sim.make_env("reach-v3", num_envs=2, max_episode_steps=5) as env:
        env.reset(seed=1)
        old_seeds = env.episode_seeds.copy()
        states = _rollout(env, 4)
        action = np.full((2, 4), 0.5, np.float32)
        obs, _, terminated, truncated, info = env.step(action)
        assert truncated.all() and not terminated.any()
        assert info["_final_obs"].all()
        assert info["episode_length"].tolist() == [5, 5]
        assert not np.array_equal(info["final_obs"]["state"], obs["state"])
        assert not np.array_equal(info["final_obs"]["state"], states[-1])
        assert (info["episode_seed"] != old_seeds).all()
        assert info["final_info"]["episode_seed"].tolist() == old_seeds.tolist()
        # The returned obs is the first obs of the episode whose seed info reports.
        with sim.make_env("reach-v3", num_envs=2) as fresh:
            np.testing.assert_array_equal(
                fresh.reset(seed=info["episode_seed"].tolist())["state"], obs["state"]
            )
        obs2, *_, info2 = env.step(action)
        assert info2["episode_length"].tolist() == [1, 1]
        np.testing.assert_array_equal(info2["final_obs"]["state"], obs2["state"])  # nobody finished


def test_terminates_at_first_success_and_sparse_reward() -> None:
    expert = sim.ScriptedExpert("reach-v3")
    with sim.make_env("reach-v3", reward="sparse") as env:
        obs = env.reset(seed=2)
        rewards = []
        for _ in range(env.max_episode_steps):
            obs, reward, terminated, truncated, info = env.step(expert.act(obs))
            rewards.append(float(reward[0]))
            if terminated[0] or truncated[0]:
                break
        assert terminated[0] and not truncated[0] and info["success"][0]
        assert rewards[-1] == 0.0 and set(rewards[:-1]) == {-1.0}
        assert info["episode_length"][0] == len(rewards)
        assert info["episode_return"][0] == -(len(rewards) - 1)


def test_without_terminate_on_success_the_episode_runs_to_the_limit() -> None:
    expert = sim.ScriptedExpert("reach-v3")
    with sim.make_env("reach-v3", terminate_on_success=False, max_episode_steps=150) as env:
        obs = env.reset(seed=2)
        successes = []
        for _ in range(150):
            obs, _, terminated, truncated, info = env.step(expert.act(obs))
            successes.append(bool(info["success"][0]))
            assert not terminated[0]
        assert truncated[0] and any(successes)


def test_bad_actions_and_step_before_reset() -> None:
    with sim.make_env("reach-v3", num_envs=2) as env:
        with pytest.raises(RuntimeError, match="before reset"):
            env.step(np.zeros((2, 4)))
        env.reset(seed=0)
        with pytest.raises(ValueError, match=r"\(2, 4\)"):
            env.step(np.zeros((1, 4)))
        with pytest.raises(ValueError, match=r"envs \[1\]"):
            env.step(np.array([[0, 0, 0, 0], [0, np.nan, 0, 0]], np.float32))
        with pytest.raises(ValueError, match="one per env"):
            env.reset(seed=[1, 2, 3])


def test_async_matches_sync() -> None:
    with (
        sim.make_env("push-v3", num_envs=2, vectorization="async") as a,
        sim.make_env("push-v3", num_envs=2) as s,
    ):
        np.testing.assert_array_equal(a.reset(seed=11)["state"], s.reset(seed=11)["state"])
        for x, y in zip(_rollout(a, 10), _rollout(s, 10)):
            np.testing.assert_array_equal(x, y)
        assert a.render(size=32).shape == (32, 32, 3)
        assert a.get_sim_states().shape == s.get_sim_states().shape
