"""Does Meta-World 3.1.1 reproduce its recorded episodes under mujoco 4.0 (MuJoCo Warp's), or only under 3.3.0?

Meta-World pins mujoco==3.3.0 and MuJoCo Warp needs 4.0, so the two backends live in two environments (.venv,
.venv-gpu). If Meta-World's own episodes replayed bit for bit under 4.0, one environment could hold both. This
replays every episode of robosteer-collect datasets (recorded in .venv, mujoco 3.3.0) from its seed with its
recorded actions, under whatever mujoco this Python has, and compares each step's 39-d state with the recorded
one: bitwise, else the first differing step and the largest difference, and whether success agrees. Run it in
both environments: .venv is the control (it must be bitwise), .venv-gpu the question.

Under mujoco 4.0 Meta-World 3.1.1 fails before its first step: ``SawyerMocapBase.reset_mocap_welds`` writes an
11-vector into ``model.eq_data``, whose rows are 12 wide in 4.0. ``--patch-welds`` writes the same 11 values
into the first 11 slots (what sim/gpu/sawyer.py does for Warp) and nothing else, so the physics can be compared.

    .venv/bin/python experiments/metaworld_mujoco4.py runs/any/demos.hdf5 ... --rows docs/results/metaworld_mujoco4.jsonl
    .venv-gpu/bin/python experiments/metaworld_mujoco4.py runs/any/demos.hdf5 ... --rows docs/results/metaworld_mujoco4.jsonl
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # the shared benchmark libraries

from results_tables import append_row


def patch_welds() -> None:
    """Meta-World's weld reset, fitted to mujoco 4.0's 12-wide ``eq_data`` rows (the trailing slot untouched)."""
    import mujoco
    from metaworld.sawyer_xyz_env import SawyerMocapBase

    weld = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0])

    def reset_mocap_welds(self: Any) -> None:
        if self.model.nmocap > 0 and self.model.eq_data is not None:
            for i in range(self.model.eq_data.shape[0]):
                if self.model.eq_type[i] == mujoco.mjtEq.mjEQ_WELD:
                    self.model.eq_data[i, : len(weld)] = weld

    SawyerMocapBase.reset_mocap_welds = reset_mocap_welds


def replay(path: Path) -> dict[str, Any]:
    """Every episode of ``path`` replayed here: bitwise episodes, first differing step, worst difference."""
    import mujoco

    from robosteer import sim
    from robosteer.policies.data import open_dataset

    with open_dataset(str(path)) as demos:
        task = demos.env_args["env_name"]
        kwargs = demos.env_args.get("env_kwargs", {})
        episodes, bitwise, first_diff, worst, agree, steps, reset_worst = 0, 0, [], 0.0, 0, 0, 0.0
        with sim.make_env(
            task, num_envs=1, obs="state", max_episode_steps=kwargs.get("max_episode_steps")
        ) as env:
            for name in demos.demo_names:
                ep = demos.episode(name)
                recorded = np.asarray(ep["obs"]["state"])  # (T, 39)
                obs = env.reset(seed=[int(ep["attrs"]["seed"])])
                first, success = None, False
                for t, action in enumerate(ep["actions"]):
                    diff = np.abs(obs["state"][0].astype(np.float64) - recorded[t]).max()
                    worst = max(worst, float(diff))
                    reset_worst = max(reset_worst, float(diff)) if t == 0 else reset_worst
                    if first is None and not np.array_equal(obs["state"][0], recorded[t]):
                        first = t
                    obs, _, terminated, truncated, info = env.step(np.asarray(action)[None])
                    steps += 1
                    success = success or bool(info["success"][0])
                    if terminated[0] or truncated[0]:
                        break
                episodes += 1
                bitwise += first is None
                first_diff += [] if first is None else [first]
                agree += success == bool(ep["attrs"].get("success", success))
    return {
        "task": task,
        "dataset": str(path),
        "mujoco": mujoco.__version__,
        "episodes": episodes,
        "env_steps": steps,
        "bitwise_episodes": bitwise,
        "first_differing_step_min": min(first_diff) if first_diff else None,
        "first_differing_step_median": float(np.median(first_diff)) if first_diff else None,
        "max_abs_state_diff": worst,
        "max_abs_reset_state_diff": reset_worst,  # the initial state, before any action
        "success_agrees": agree,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("datasets", nargs="+", type=Path, help="robosteer-collect datasets (recorded in .venv)")
    ap.add_argument("--rows", help="append one row per dataset to this JSON-lines file")
    ap.add_argument("--patch-welds", action="store_true", help="fit the weld reset to mujoco 4.0 (see above)")
    args = ap.parse_args()
    if args.patch_welds:
        patch_welds()
    for path in args.datasets:
        try:
            row = replay(path) | {"patched_welds": args.patch_welds}
        except Exception as err:  # the finding itself: Meta-World cannot build the env under this mujoco
            import mujoco

            row = {"dataset": str(path), "mujoco": mujoco.__version__, "patched_welds": args.patch_welds}
            row |= {"error": f"{type(err).__name__}: {err}"}
        print(row, flush=True)
        if args.rows:
            append_row(args.rows, row)


if __name__ == "__main__":
    main()
