"""``import robosteer.sim`` must not import the optional GPU backend (it needs .venv-gpu's mujoco-warp)."""

from __future__ import annotations

import subprocess
import sys


def test_import_sim_does_not_import_gpu_backend() -> None:
    code = "import sys, robosteer.sim; print(sorted(m for m in sys.modules if m.startswith('robosteer.sim.gpu') or m == 'warp'))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout
