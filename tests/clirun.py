"""``run``: ``subprocess.run`` for ``[python, "-m", module, ...]`` commands, forked from a warm process.

Every command-line test used to start a fresh Python that spent about 5 s (8 s on a busy CI machine) importing
torch, Hydra and Meta-World before doing a second of work. A *zygote* (one per pytest worker and set of
import-time variables, started on first use) imports those once and forks a child per command. The child is a
real process, as ``python -m module`` or ``python script.py`` would be: it runs the module or script as
``__main__`` (``runpy``, as the interpreter does) in the command's working directory and environment, with its
standard streams on files, and exits through the interpreter's own shutdown (atexit handlers, thread joins), so
exit codes, output and child processes are those of a fresh process.

Another interpreter falls back to ``subprocess.run``. Tests that signal or kill their command keep
``subprocess.Popen``. The zygote runs no torch operation before it forks (no thread pool exists to be copied
half-locked) and never imports a module a test runs as ``__main__``.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# Read by the interpreter or by a library when it is imported: a fork inherits the zygote's, so a command
# asking for other values gets a fresh process.
IMPORT_TIME_ENV = (
    *("PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONWARNINGS", "LD_LIBRARY_PATH"),
    *("MUJOCO_GL", "PYOPENGL_PLATFORM", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES"),
)
# Imported once by the zygote: the slow, side-effect-free libraries every command needs (never robosteer's
# command modules, which run as __main__).
WARM = (
    *("numpy", "torch", "diffusers", "hydra", "omegaconf", "tqdm", "h5py", "metaworld", "metaworld.policies"),
    *("robosteer.sim", "robosteer.policies.train", "robosteer.policies.steering.dsrl"),
    *("robosteer.policies.steering.expo", "robosteer.policies.value.calql", "robosteer.real.safety"),
    *(
        "robosteer.scripts.common",
        "robosteer.scripts.schemas",
        "robosteer.scripts.cli",
        "robosteer.scripts.guards",
    ),
)


class _Zygote:
    """The pytest worker's side: a warm process that forks one child per command."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.proc = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,  # unbuffered: a reply read ahead into a buffer would be invisible to select()
            env=self.env,
            cwd=Path(__file__).resolve().parent,
        )
        self.lock = threading.Lock()

    def _reply(self, timeout: float | None) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the test zygote exited ({self.proc.poll()})")
        return json.loads(line)

    def run(self, module: str, args: Sequence[str], cwd: str, env: Mapping[str, str], stdin: bytes | None,
            timeout: float | None) -> tuple[int, bytes, bytes]:  # fmt: skip
        with self.lock, tempfile.TemporaryDirectory(prefix="clirun-") as tmp:
            paths = {name: os.path.join(tmp, name) for name in ("stdin", "stdout", "stderr")}
            Path(paths["stdin"]).write_bytes(stdin or b"")
            request = {"module": module, "args": list(args), "cwd": cwd, "env": dict(env), **paths}
            assert self.proc.stdin is not None
            data = memoryview((json.dumps(request) + "\n").encode())
            while data:  # a raw pipe may take part of a long request per write
                data = data[self.proc.stdin.write(data) :]
            pid = self._reply(30)
            if pid is None:
                raise RuntimeError("the test zygote did not fork within 30 s")
            done = self._reply(timeout)
            if done is None:  # as subprocess.run: kill the command, then raise
                os.kill(pid["pid"], signal.SIGKILL)
                self._reply(None)
                raise subprocess.TimeoutExpired([module, *args], timeout or 0)
            return int(done["rc"]), Path(paths["stdout"]).read_bytes(), Path(paths["stderr"]).read_bytes()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


_zygotes: dict[tuple[str | None, ...], _Zygote] = {}  # one per set of import-time variables asked for


def run(cmd: Sequence[str], *, cwd: Any = None, env: Mapping[str, str] | None = None, input: Any = None,
        capture_output: bool = True, text: bool = False, timeout: float | None = None,
        check: bool = False) -> subprocess.CompletedProcess:  # fmt: skip
    """``subprocess.run(cmd, ...)``, output always captured; forked from a zygote where it can be."""
    env = dict(os.environ if env is None else env)
    module = len(cmd) >= 3 and cmd[0] == sys.executable and cmd[1] == "-m" and cmd[2] not in WARM
    script = len(cmd) >= 2 and cmd[0] == sys.executable and cmd[1].endswith(".py")
    if not (module or script):
        return subprocess.run(list(cmd), cwd=cwd, env=env, input=input, capture_output=True, text=text,
                              timeout=timeout, check=check)  # fmt: skip
    key = tuple(env.get(k) for k in IMPORT_TIME_ENV)
    if key not in _zygotes:
        _zygotes[key] = _Zygote(env)
        atexit.register(_zygotes[key].close)
    zygote = _zygotes[key]
    data = input.encode() if isinstance(input, str) else input
    where = str(Path(cwd or os.getcwd()).resolve())
    target = cmd[2] if module else str(Path(where, cmd[1]))  # a module, or a script's absolute path
    rc, out, err = zygote.run(target, cmd[3 if module else 2 :], where, env, data, timeout)
    result = subprocess.CompletedProcess(
        list(cmd), rc, out.decode() if text else out, err.decode() if text else err
    )
    if check:
        result.check_returncode()
    return result


# ------------------------------------------------------------------------------------------ the zygote
def _serve() -> dict[str, Any]:
    """Read requests; fork each; the child returns its request, the parent reports pid and exit code."""
    for name in WARM:
        __import__(name)
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = requests.readline()
        if not line:
            os._exit(0)
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return request
        replies.write((json.dumps({"pid": pid}) + "\n").encode())
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write((json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n").encode())
        replies.flush()


def _become(request: dict[str, Any]) -> None:
    """In the child: the command's streams, directory, environment and argv, then its module as __main__."""
    import runpy

    for fd, (name, flags) in enumerate(
        [("stdin", os.O_RDONLY), ("stdout", os.O_WRONLY | os.O_TRUNC), ("stderr", os.O_WRONLY | os.O_TRUNC)]
    ):
        opened = os.open(request[name], flags | (os.O_CREAT if fd else 0))
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    target = request["module"]
    if target.endswith(".py"):  # `python path/to/script.py`: its folder first on the path
        sys.argv, sys.path[0] = [target, *request["args"]], os.path.dirname(target)
        runpy.run_path(target, run_name="__main__")
    else:  # `python -m module`: the working directory first
        sys.argv, sys.path[0] = [target, *request["args"]], request["cwd"]
        runpy.run_module(target, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _become(_serve())
