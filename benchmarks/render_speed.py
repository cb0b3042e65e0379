"""Images/s of sim's tuned EGL renderer against MuJoCo's default settings, at 84 and 128 px.

Tuned: no shadows, reflections or skybox, no multisampling (``offsamples = 0``) and an offscreen buffer
the size of the image. Default: the model's settings (4x MSAA, shadows, reflections, a 640 px buffer).
Run: ``python benchmarks/render_speed.py [--seconds 1.5]``. Prints a markdown table and appends one row per
cell (with its provenance: command, commit, machine, load) to ``--rows``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
from env_rates import image_env_steps_per_s
from results_tables import append_row

from robosteer import sim
from robosteer.sim.render import CameraRenderer


def images_per_s(task: str, size: int, tuned: bool, seconds: float) -> float:
    """Frames/s of one renderer on a fresh env of ``task`` (camera corner2; model moved between frames)."""
    with sim.make_env(task) as env:
        env.reset(seed=0)
        base = env.unwrapped_envs[0]
        renderer = CameraRenderer(base.model, size, tuned=tuned)
        try:
            renderer.render(base.data, "corner2")  # warm-up (context, textures)
            n, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                base.data.qpos[:7] += 1e-3  # a new pose each frame, as in a rollout
                mujoco.mj_kinematics(base.model, base.data)
                renderer.render(base.data, "corner2")
                n += 1
            return n / (time.perf_counter() - start)
        finally:
            renderer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.5, help="measuring time per cell")
    parser.add_argument("--task", default="push-v3")
    parser.add_argument("--sizes", nargs="+", type=int, default=[84, 128], help="image sizes, px")
    parser.add_argument(
        "--rows", default="docs/results/render_speed.jsonl", help="append rows here ('': don't)"
    )
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs visible; MUJOCO_GL={os.environ['MUJOCO_GL']}"
    )
    rows = []
    for size in args.sizes:
        cells = {}
        for cell, measure, tuned_args in (
            ("tuned images/s", images_per_s, (True,)),
            ("default images/s", images_per_s, (False,)),
            ("env steps/s with image obs", image_env_steps_per_s, ()),
        ):
            cells[cell] = measure(args.task, size, *tuned_args, args.seconds)
            if args.rows:
                row = {"task": args.task, "size": size, "cell": cell, "per_s": cells[cell]}
                append_row(args.rows, {**row, "seconds": args.seconds})
        tuned, default = cells["tuned images/s"], cells["default images/s"]
        env_rate = cells["env steps/s with image obs"]
        rows.append(
            [f"{size}", f"{tuned:,.0f}", f"{default:,.1f}", f"{tuned / default:.1f}x", f"{env_rate:,.0f}"]
        )
    header = ["size px", "tuned images/s", "default images/s", "speed-up", "env steps/s with image obs"]
    print(f"\nRendering {args.task}, camera corner2, one renderer reused:\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
