"""Domain randomization and actuation latency: seeded draws, restore-to-nominal, delays, noise, recording."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import yaml

from robosteer import sim
from robosteer.sim.randomization import GRIPPER_OPEN, PARAM_KEYS, RandomizationConfig, Randomizer

ROOT = Path(__file__).resolve().parents[2]
DYNAMICS = {
    "friction": [0.5, 1.5],
    "object_mass": [0.5, 2.0],
    "joint_damping": [0.5, 2.0],
    "actuator_gain": [0.7, 1.3],
    "pose_range_scale": [1.0, 1.3],
    "light_diffuse": [0.5, 1.0],
    "camera_pos_std": 0.02,
    "camera_rot_std": 0.05,
    "light_pos_std": 0.2,
}


def _rollout(env: sim.BatchedEnv, seed: int, steps: int) -> tuple[np.ndarray, dict]:
    """States (steps + 1, B, 39) under a fixed action sequence, and the last step's info."""
    obs = env.reset(seed=seed)
    rng = np.random.default_rng(0)
    states = [obs["state"]]
    info: dict = {}
    for _ in range(steps):
        action = rng.uniform(-1, 1, (env.num_envs, 4)).astype(np.float32)
        obs, _, _, _, info = env.step(action)
        states.append(obs["state"])
    return np.stack(states), info


@pytest.mark.parametrize("name", ["none", "default", "strong"])
def test_hydra_configs_load(name):
    values = yaml.safe_load((ROOT / "configs" / "randomization" / f"{name}.yaml").read_text())
    cfg = RandomizationConfig.from_dict(values)
    assert cfg.enabled == (name != "none")
    assert RandomizationConfig.from_dict(cfg.to_dict()) == cfg


def test_bad_config_names_key_and_nearest_choice():
    with pytest.raises(ValueError, match=r"'frictoin'.*did you mean 'friction'"):
        RandomizationConfig.from_dict({"frictoin": [0.9, 1.1]})
    with pytest.raises(ValueError, match=r"randomization.object_mass=\[2.0, 1.0\].*0 < lo <= hi"):
        RandomizationConfig(object_mass=(2.0, 1.0))
    with pytest.raises(ValueError, match=r"latency_s=-0.1.*>= 0"):
        RandomizationConfig(latency_s=-0.1)
    with pytest.raises(ValueError, match=r"friction=0.5.*\[lo, hi\] pair"):
        RandomizationConfig.from_dict({"friction": 0.5})


def test_nominal_randomization_is_bit_identical_to_none():
    plain = sim.make_env("push-v3", num_envs=2, seed=3)
    nominal = sim.make_env("push-v3", num_envs=2, seed=3, randomization={"latency_s": 0.0})
    with plain, nominal:
        a, info_a = _rollout(plain, 11, 15)
        b, info_b = _rollout(nominal, 11, 15)
    np.testing.assert_array_equal(a, b)
    assert sorted(info_a) == sorted(info_b)
    assert not any(k.startswith("dr_") for k in info_b)


def test_draws_are_seeded_per_episode_and_recorded():
    cfg = RandomizationConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in DYNAMICS.items()})
    with sim.make_env("push-v3", num_envs=2, randomization=cfg) as env:
        a, info_a = _rollout(env, 5, 10)
        b, info_b = _rollout(env, 5, 10)
        _, info_c = _rollout(env, 6, 10)
    np.testing.assert_array_equal(a, b)  # same episode seeds: same dynamics, same trajectory
    assert set(PARAM_KEYS) <= set(info_a)
    for key in PARAM_KEYS:
        np.testing.assert_array_equal(info_a[key], info_b[key])
    assert info_a["dr_friction"][0] != info_a["dr_friction"][1]  # each env's episode draws its own
    assert not np.array_equal(info_a["dr_friction"], info_c["dr_friction"])
    lo, hi = DYNAMICS["object_mass"]
    assert np.all((lo <= info_c["dr_object_mass"]) & (info_c["dr_object_mass"] <= hi))


def test_model_is_randomized_from_nominal_and_restored():
    cfg = RandomizationConfig(friction=(0.5, 1.5), object_mass=(0.5, 2.0), actuator_gain=(0.7, 1.3))
    env = sim.MetaWorldEnv("push-v3", randomization=cfg)
    ref = sim.MetaWorldEnv("push-v3")
    m, r = env.model, ref.model
    obj = m.body("obj").id
    low0 = env._mw._random_reset_space.low.copy()
    for seed in (1, 2, 3):  # several episodes: each one scales the nominal values, never the last draw
        _, info = env.reset(seed=seed)
        np.testing.assert_allclose(m.geom_friction[:, 0], r.geom_friction[:, 0] * info["dr_friction"])
        np.testing.assert_allclose(m.body_mass[obj], r.body_mass[obj] * info["dr_object_mass"])
        hand = m.body("hand").id
        assert m.body_mass[hand] == r.body_mass[hand]  # the robot's bodies keep their mass
        np.testing.assert_allclose(
            m.actuator_gainprm[:, 0], r.actuator_gainprm[:, 0] * info["dr_actuator_gain"]
        )
        np.testing.assert_allclose(
            m.actuator_biasprm[:, 1], r.actuator_biasprm[:, 1] * info["dr_actuator_gain"]
        )
        assert env._mw.action_scale == pytest.approx(ref._mw.action_scale * info["dr_actuator_gain"])
    env._randomizer.restore()
    np.testing.assert_array_equal(m.geom_friction, r.geom_friction)
    np.testing.assert_array_equal(m.body_mass, r.body_mass)
    np.testing.assert_array_equal(m.actuator_gainprm, r.actuator_gainprm)
    np.testing.assert_array_equal(env._mw._random_reset_space.low, low0)
    env.close()
    ref.close()


def test_pose_range_scale_widens_initial_positions():
    cfg = RandomizationConfig(pose_range_scale=(1.5, 1.5))
    env = sim.MetaWorldEnv("push-v3", randomization=cfg)
    ref = sim.MetaWorldEnv("push-v3")
    space, ref_space = env._mw._random_reset_space, ref._mw._random_reset_space
    env.reset(seed=0)
    np.testing.assert_allclose(space.high - space.low, 1.5 * (ref_space.high - ref_space.low))
    np.testing.assert_allclose(space.high + space.low, ref_space.high + ref_space.low)
    xs = [env.reset(seed=s)[0]["state"][4] for s in range(40)]  # object x: nominal range [-0.1, 0.1]
    assert max(np.abs(xs)) > 0.1
    env.close()
    ref.close()


def test_latency_applies_the_command_of_d_steps_ago_and_holds_first():
    cfg = RandomizationConfig(latency_s=0.1)
    env = sim.MetaWorldEnv("reach-v3", randomization=cfg)
    rnd = env._randomizer
    rnd.reset(0)
    delay = round(0.1 / env.dt)
    assert delay == 8
    commands = [np.array([0.1 * t, 0.0, 0.0, 0.5], dtype=np.float64) % 1.0 for t in range(20)]
    applied = [rnd.action(c) for c in commands]
    for t in range(delay):
        np.testing.assert_array_equal(
            applied[t], [0.0, 0.0, 0.0, GRIPPER_OPEN]
        )  # hold: no move, gripper open
    for t in range(delay, 20):
        np.testing.assert_array_equal(applied[t], commands[t - delay])
    env.close()


def test_latency_jitter_stays_in_range_and_never_replays_older_commands():
    rnd = Randomizer(
        RandomizationConfig(latency_s=0.1, latency_jitter_s=0.025), sim.MetaWorldEnv("reach-v3")._mw, 0.0125
    )
    rnd.reset(4)
    commands = [np.array([t / 100.0, 0.0, 0.0, 0.0]) for t in range(100)]
    indices = [round(rnd.action(c)[0] * 100) for c in commands]
    started = [(t, i) for t, i in enumerate(indices) if t >= 10]
    delays = {t - i for t, i in started}
    assert delays <= set(range(6, 11)) and len(delays) > 1  # 8 +- 2 steps, and it does vary
    assert all(b >= a for a, b in itertools.pairwise(indices))


def test_latency_delays_the_hand_in_the_env():
    push = np.array([[1.0, 0.0, 0.0, -1.0]], np.float32)
    hold = np.array([[0.0, 0.0, 0.0, -1.0]], np.float32)

    def hands(env: sim.BatchedEnv, actions: list[np.ndarray]) -> np.ndarray:
        env.reset(seed=0)
        return np.stack([env.step(a)[0]["state"][0, :3] for a in actions])  # (T, 3)

    with (
        sim.make_env("reach-v3", num_envs=1) as plain,
        sim.make_env("reach-v3", num_envs=1, randomization={"latency_s": 0.05}) as late,
    ):
        held = hands(plain, [hold] * 4 + [push] * 2)  # what 50 ms = 4 steps of latency should look like
        delayed = hands(late, [push] * 6)
        direct = hands(plain, [push] * 6)
    np.testing.assert_array_equal(delayed, held)  # exactly: hold for 4 steps, then the commands arrive
    assert np.abs(direct[:4] - held[:4]).max() > 1e-3  # and without latency the hand would have moved


def test_noise_is_seeded_and_changes_obs_and_actions():
    def run(cfg: dict | None) -> tuple[np.ndarray, np.ndarray]:
        with sim.make_env("reach-v3", num_envs=1, randomization=cfg) as env:
            states, _ = _rollout(env, 9, 5)
            return states, env.get_sim_states()  # observed (T + 1, 1, 39), true physics (1, S)

    clean, clean_sim = run(None)
    obs_a, obs_sim = run({"obs_noise_std": 0.01})
    obs_b, _ = run({"obs_noise_std": 0.01})
    act, act_sim = run({"action_noise_std": 0.2})
    np.testing.assert_array_equal(obs_a, obs_b)  # seeded by the episode seed
    assert 0.001 < np.abs(obs_a - clean).max() < 0.1  # observation noise is only observed...
    np.testing.assert_array_equal(obs_sim, clean_sim)  # ...the physics is untouched
    np.testing.assert_array_equal(act[0], clean[0])  # action noise: same first observation,
    assert np.abs(act_sim - clean_sim).max() > 1e-4  # but the noised actions move the robot elsewhere


def test_image_observations_see_randomized_camera_and_light():
    cfg = {"camera_pos_std": 0.05, "light_diffuse": [0.3, 0.6]}
    env = sim.MetaWorldEnv("reach-v3", obs="image", image_size=32, randomization=cfg)
    ref = sim.MetaWorldEnv("reach-v3", obs="image", image_size=32)
    a = env.reset(seed=0)[0]["image/corner2"].astype(int)
    b = ref.reset(seed=0)[0]["image/corner2"].astype(int)
    assert np.abs(a - b).mean() > 1.0
    env.close()
    ref.close()


def test_evaluate_records_params_independent_of_num_envs():
    cfg = {"friction": [0.8, 1.2], "object_mass": [0.5, 1.5], "latency_s": 0.025}
    results = []
    for num_envs in (1, 2):
        with sim.make_env("reach-v3", num_envs=num_envs, max_episode_steps=20, randomization=cfg) as env:
            results.append(
                sim.evaluate(env, sim.ScriptedExpert("reach-v3"), episodes=3, seed=7, progress=False)
            )
    one, two = results
    assert one["episode_params"] == two["episode_params"]
    assert one["returns"] == pytest.approx(two["returns"])
    assert len(one["episode_params"]) == 3 and len({p["dr_friction"] for p in one["episode_params"]}) == 3
    summary = one["randomization"]["params"]["dr_object_mass"]
    assert 0.5 <= summary["min"] <= summary["mean"] <= summary["max"] <= 1.5
    assert one["randomization"]["config"]["latency_s"] == 0.025
