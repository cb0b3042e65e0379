"""Pressing Ctrl-C on a console command run as a child process, the way a user at a terminal would."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def ctrl_c_when(
    cmd: list[str],
    ready: Callable[[], bool],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    settle_s: float = 0.0,
    wait_s: float = 240.0,
    signum: int = signal.SIGINT,
    sigint: Any = signal.SIG_DFL,
) -> tuple[int, str]:
    """Run ``cmd``; once ``ready()`` holds (and ``settle_s`` more seconds), send ``signum``; return its exit
    status and stderr. Fails if ``ready()`` never holds within ``wait_s``. ``sigint``: the child's SIGINT
    disposition at start (``signal.SIG_IGN``: as a background job started from a script has it)."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=None if env is None else dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell's background job (`make test &`, some CI runners) inherits SIGINT as *ignored*, and
        # Python then never raises KeyboardInterrupt: give the child the default disposition back.
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
    )
    try:
        deadline = time.time() + wait_s
        while time.time() < deadline and not ready():
            time.sleep(0.2)
        assert ready(), f"{' '.join(cmd[:4])}: not ready within {wait_s:.0f} s"
        time.sleep(settle_s)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, err
