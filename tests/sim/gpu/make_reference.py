"""Record reference rollouts from CPU Meta-World (reach-v3, push-v3, pick-place-v3) for the Warp parity tests.

Run from the repository root with the main environment: ``.venv/bin/python
tests/sim/gpu/make_reference.py [--tasks reach-v3 push-v3 pick-place-v3]``. Writes
``tests/sim/gpu/data/<task>_reference.npz`` (e.g. ``reach_v3_reference.npz``): per episode the initial state
after Meta-World's reset (qpos, qvel, mocap_pos, qacc_warmstart, ctrl, goal), the actions, and the
observations, rewards and success flags Meta-World returned; since pick-place-v3 also the state after every
step (``qpos_traj``) and the ``grasp_reward`` / ``in_place_reward`` info terms, so the reward can be checked
from the very same states (the reach/push references were recorded before and lack them). The first
``EXPERT`` episodes follow Meta-World's scripted expert (actions from the CPU observations), the rest uniform
random actions in [-1, 1] (gripper included). The parity test replays them in ``.venv-gpu`` (mujoco-warp).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from robosteer.sim.tasks import expert_policy_class, make_metaworld_env

TASKS = ("reach-v3", "push-v3", "pick-place-v3")
SEEDS = (0, 1, 2, 3, 4, 5)  # episode seeds (MetaWorldEnv semantics: env.seed(s); env.reset())
EXPERT = 4  # episodes 0..EXPERT-1 follow the scripted expert
STEPS = 100  # control steps per episode (the experts' longest successes: reach 86, push 74, pick-place 62)
DATA = Path(__file__).parent / "data"


def reference_path(task: str) -> Path:
    """Where the reference of ``task`` lives (``data/reach_v3_reference.npz`` for reach-v3)."""
    return DATA / f"{task.replace('-', '_')}_reference.npz"


def record(
    task: str, seeds: tuple[int, ...] = SEEDS, steps: int = STEPS, expert: int = EXPERT
) -> dict[str, np.ndarray]:
    """Roll out CPU Meta-World ``task`` from each seed; arrays have a leading (E,) episode axis."""
    env = make_metaworld_env(task)
    policy = expert_policy_class(task)()
    rng = np.random.default_rng(12345)
    keys = ("qpos", "qvel", "mocap_pos", "qacc_warmstart", "ctrl", "goal", "obs0", "actions", "obs")
    per_step = ("qpos_traj", "reward", "grasp_reward", "in_place_reward")
    out: dict[str, list[np.ndarray]] = {k: [] for k in (*keys, *per_step, "success")}
    for e, seed in enumerate(seeds):
        env.seed(int(seed))
        obs, _ = env.reset()
        out["qpos"].append(env.data.qpos.copy())
        out["qvel"].append(env.data.qvel.copy())
        out["mocap_pos"].append(env.data.mocap_pos[0].copy())
        out["qacc_warmstart"].append(env.data.qacc_warmstart.copy())
        out["ctrl"].append(env.data.ctrl.copy())
        out["goal"].append(np.asarray(env._target_pos, dtype=np.float64).copy())
        out["obs0"].append(obs.copy())
        episode: dict[str, list] = {k: [] for k in ("actions", "obs", *per_step, "success")}
        for _ in range(steps):
            if e < expert:
                action = np.clip(policy.get_action(obs), -1.0, 1.0)
            else:
                action = rng.uniform(-1.0, 1.0, 4)
            obs, reward, _, _, info = env.step(action)
            episode["actions"].append(action)
            episode["obs"].append(obs.copy())
            episode["qpos_traj"].append(env.data.qpos.copy())
            episode["reward"].append(reward)
            episode["grasp_reward"].append(info["grasp_reward"])
            episode["in_place_reward"].append(info["in_place_reward"])
            episode["success"].append(bool(info["success"]))
        for key, values in episode.items():
            out[key].append(np.asarray(values))
    env.close()
    arrays = {k: np.asarray(v, dtype=np.float32) for k, v in out.items() if k != "success"}
    arrays["success"] = np.asarray(out["success"], dtype=bool)  # (E, T)
    arrays["seeds"] = np.asarray(seeds, dtype=np.int64)
    arrays["expert"] = np.asarray(np.arange(len(seeds)) < expert)  # (E,)
    return arrays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=list(TASKS), choices=TASKS)
    args = parser.parse_args()
    import mujoco

    for task in args.tasks:
        arrays = record(task)
        arrays["mujoco_version"] = np.asarray(mujoco.__version__)
        out = reference_path(task)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, **arrays)
        tmp.replace(out)
        print(f"wrote {out} ({out.stat().st_size} bytes): {len(SEEDS)} episodes x {STEPS} steps")


if __name__ == "__main__":
    main()
