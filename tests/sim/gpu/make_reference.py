"""Record reference rollouts from CPU Meta-World (every task ported to sim.gpu) for the Warp parity tests.

Run from the repository root with the main environment: ``.venv/bin/python
tests/sim/gpu/make_reference.py [--tasks reach-v3 push-v3 pick-place-v3]``. Writes
``tests/sim/gpu/data/<task>_reference.npz`` (e.g. ``reach_v3_reference.npz``): per episode the initial state
after Meta-World's reset (qpos, qvel, mocap_pos, qacc_warmstart, ctrl, goal), the actions, and the
observations, rewards and success flags Meta-World returned; since pick-place-v3 also the state after every
step (``qpos_traj``) and the ``grasp_reward`` / ``in_place_reward`` info terms, so the reward can be checked
from the very same states (the reach/push references were recorded before and lack them). The first
``EXPERT`` episodes follow Meta-World's scripted expert (actions from the CPU observations), the rest uniform
random actions in [-1, 1] (gripper included). The parity test replays them in ``.venv-gpu`` (mujoco-warp).

Articulated tasks (door, drawer, window, button: Meta-World moves a body of the model per episode) also
record that body's position (``root_pos``), the reset frame after kinematics (``frame0``: Meta-World's own
reset observation is stale for drawer-open and the windows, see ``sim/gpu/drawer.py``), and the reward's
per-episode quantities Meta-World keeps on the env (``init_*``), so the reward is checked from the same states.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

import numpy as np

from robosteer.sim.tasks import expert_policy_class, make_metaworld_env

ROOT_BODIES = {  # articulated task -> the body Meta-World moves per episode
    "door-open-v3": "door",
    "drawer-open-v3": "drawer",
    "drawer-close-v3": "drawer",
    "button-press-topdown-v3": "box",
    "window-open-v3": "window",
    "window-close-v3": "window",
    "peg-insert-side-v3": "box",
}
TASKS = ("reach-v3", "push-v3", "pick-place-v3", *ROOT_BODIES)
SEEDS = (0, 1, 2, 3, 4, 5)  # episode seeds (MetaWorldEnv semantics: env.seed(s); env.reset())
EXPERT = 4  # episodes 0..EXPERT-1 follow the scripted expert
STEPS = 100  # control steps per episode (the experts' longest successes: reach 86, push 74, pick-place 62)
LONG_STEPS = 150  # the articulated tasks' (door-open's expert takes up to 126 steps)
STEPS_OF = {"peg-insert-side-v3": 320}  # its expert takes up to 305 steps
INIT_ATTRS = (
    "init_tcp",
    "obj_init_pos",
    "window_handle_pos_init",
    "_obj_to_target_init",
    "peg_head_pos_init",
)  # where present
DATA = Path(__file__).parent / "data"


def reference_path(task: str) -> Path:
    """Where the reference of ``task`` lives (``data/reach_v3_reference.npz`` for reach-v3)."""
    return DATA / f"{task.replace('-', '_')}_reference.npz"


def _fresh_frame(env: Any) -> np.ndarray:
    """(18,) the current frame after kinematics, computed on a copy so the rollout's own data is untouched."""
    import mujoco

    data = env.data
    env.data = copy.copy(data)
    try:
        mujoco.mj_forward(env.model, env.data)
        return np.asarray(env._get_curr_obs_combined_no_goal(), dtype=np.float64)
    finally:
        env.data = data


def record(
    task: str, seeds: tuple[int, ...] = SEEDS, steps: int | None = None, expert: int = EXPERT
) -> dict[str, np.ndarray]:
    """Roll out CPU Meta-World ``task`` from each seed; arrays have a leading (E,) episode axis."""
    steps = steps or STEPS_OF.get(task, LONG_STEPS if task in ROOT_BODIES else STEPS)
    env = make_metaworld_env(task)
    policy = expert_policy_class(task)()
    rng = np.random.default_rng(12345)
    keys = ("qpos", "qvel", "mocap_pos", "qacc_warmstart", "ctrl", "goal", "obs0", "actions", "obs")
    per_step = ("qpos_traj", "reward", "grasp_reward", "in_place_reward")
    out: dict[str, list[np.ndarray]] = {k: [] for k in (*keys, *per_step, "success")}
    if task in ROOT_BODIES:
        out.update(root_pos=[], frame0=[])
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
        if task in ROOT_BODIES:
            out["root_pos"].append(env.model.body(ROOT_BODIES[task]).pos.copy())
            out["frame0"].append(_fresh_frame(env))
            for attr in INIT_ATTRS:
                if getattr(env, attr, None) is not None:
                    key = "meta_" + attr.strip("_")  # e.g. meta_window_handle_pos_init
                    out.setdefault(key, []).append(np.asarray(getattr(env, attr), dtype=np.float64).copy())
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
        print(f"wrote {out} ({out.stat().st_size} bytes): {arrays['actions'].shape[:2]} episodes x steps")


if __name__ == "__main__":
    main()
