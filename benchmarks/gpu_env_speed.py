"""reach-v3 env steps/s: MuJoCo Warp batched worlds (sim.gpu) against CPU Meta-World (sim.make_env).

Run in ``.venv-gpu`` from the repository root: ``PYTHONPATH=. .venv-gpu/bin/python
benchmarks/gpu_env_speed.py [--device cpu|cuda] [--worlds 1 64 1024 4096]``. The CPU Meta-World column is
measured by the main environment (``--cpu-python .venv/bin/python``, sync vector env, the measuring loop of
``benchmarks/env_speed.py``) in a subprocess, since Meta-World needs mujoco 3.3.0. Random actions, auto-resets
included, first steps (kernel compilation) excluded. Prints a markdown table; ``--device cpu`` figures are
warp's CPU device, not a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def warp_steps_per_s(num_worlds: int, device: str, seconds: float) -> float:
    """Total env steps/s (all worlds) of WarpReachEnv under uniform random actions."""
    import torch

    from robosteer.sim.gpu import WarpReachEnv

    env = WarpReachEnv(num_worlds=num_worlds, seed=0, device=device)
    env.reset(seed=0)
    gen = torch.Generator(device=env.device).manual_seed(0)
    actions = torch.rand(8, num_worlds, 4, generator=gen, device=env.device) * 2 - 1  # (K, B, A)
    for k in range(2):  # warm-up: kernel loading, CUDA graph capture
        env.step(actions[k])
    sync = torch.cuda.synchronize if env.device.type == "cuda" else (lambda: None)
    sync()
    n, start = 0, time.perf_counter()
    while n < 3 or time.perf_counter() - start < seconds:
        env.step(actions[n % 8])
        n += 1
    sync()
    return n * num_worlds / (time.perf_counter() - start)


def cpu_reference(envs: list[int], seconds: float) -> dict[str, float]:
    """(Main .venv) sync CPU Meta-World reach-v3 env steps/s per batch size."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from env_rates import env_steps_per_s

    from robosteer import sim

    out = {}
    for b in envs:
        with sim.make_env("reach-v3", num_envs=b, seed=0) as env:
            out[str(b)] = env_steps_per_s(env, seconds)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="warp device for sim.gpu: cpu or cuda[:N]")
    parser.add_argument("--worlds", type=int, nargs="*", default=[1, 64, 1024, 4096])
    parser.add_argument("--cpu-envs", type=int, nargs="*", default=[1, 64], help="CPU Meta-World batch sizes")
    parser.add_argument("--cpu-python", default=str(ROOT / ".venv" / "bin" / "python"))
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per cell")
    parser.add_argument("--cpu-reference", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cpu_reference:
        print(json.dumps(cpu_reference(args.cpu_envs, args.seconds)))
        return

    import torch
    import warp as wp

    torch.set_num_threads(1)
    wp.config.quiet = True
    cpu: dict[str, float] = {}
    if args.cpu_envs:
        cmd = [args.cpu_python, __file__, "--cpu-reference", "--seconds", str(args.seconds), "--cpu-envs"]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
        res = subprocess.run(cmd + [str(b) for b in args.cpu_envs], capture_output=True, text=True, env=env)
        if res.returncode != 0:
            raise RuntimeError(f"CPU reference run with {args.cpu_python} failed:\n{res.stderr[-2000:]}")
        cpu = json.loads(res.stdout.strip().splitlines()[-1])
    label = "GPU" if args.device.startswith("cuda") else "CPU device (no GPU)"
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs visible; warp {wp.config.version}, {label}")
    print(f"| worlds | sim.gpu WarpReachEnv steps/s ({args.device}) | CPU Meta-World sync steps/s |")
    print("|---:|---:|---:|")
    for b in args.worlds:
        warp = warp_steps_per_s(b, args.device, args.seconds)
        ref = f"{cpu[str(b)]:.0f}" if str(b) in cpu else "not run"
        print(f"| {b} | {warp:.0f} | {ref} |", flush=True)


if __name__ == "__main__":
    main()
