"""Run-directory conventions shared by every robosteer command.

Every command writes one run directory (Hydra's output dir, set with ``out=DIR``) holding the resolved
``config.yaml``, a machine-readable ``metrics.json`` and its logs, checkpoints, videos and plots.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

# Absolute, not "../configs": Hydra resolves a relative path against the module name. A checkout (or an
# editable install) reads the repository's configs/; a wheel installs them under <prefix>/share/robosteer.
_REPO_CONFIGS = Path(__file__).resolve().parents[1] / "configs"
CONFIG_DIR = str(
    _REPO_CONFIGS if _REPO_CONFIGS.is_dir() else Path(sys.prefix) / "share" / "robosteer" / "configs"
)

# PyOpenGL logs an INFO line about its optional accelerator at every start; Hydra would print it.
logging.getLogger("OpenGL").setLevel(logging.WARNING)


def start_run(cfg: DictConfig) -> Path:
    """Create the run directory and write the resolved config into it; return its path."""
    run_dir = Path(str(cfg.out)).expanduser().resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    if "seed" in cfg:
        from robosteer.policies.rng import seed_everything

        seed_everything(int(cfg.seed))
    return run_dir


def console_main(command: str, config_name: str, task: Callable[[DictConfig], None]) -> None:
    """A console script: check its overrides (one-line errors, exit 2), then run ``task`` under Hydra."""
    import hydra

    from robosteer.scripts.cli import check_overrides

    if {"--help", "-h"} & set(sys.argv[1:]):  # robosteer's own screen: the keys of this case, each explained
        from robosteer.scripts.help import render

        try:
            print(render(command, config_name, sys.argv[1:]))
        except ValueError as err:  # a mistake in the case asked about: the same one line as a run
            print(f"{command}: error: {err}", file=sys.stderr)
            raise SystemExit(2) from None
        raise SystemExit(0)
    sys.argv[1:] = check_overrides(command, config_name, sys.argv[1:]) + sys.argv[1:]
    hydra.main(config_path=CONFIG_DIR, config_name=config_name, version_base=None)(task)()


def debug() -> bool:
    """``ROBOSTEER_DEBUG=1``: the user wants tracebacks instead of one-line errors."""
    return os.environ.get("ROBOSTEER_DEBUG", "") not in ("", "0", "false")


def env_backend(cfg: DictConfig, device: Any = None, output: str = "numpy") -> dict[str, Any]:
    """``make_env``'s ``sim=`` and ``device=`` from a command's config: a GPU-batched simulator (warp, Isaac)
    steps on the device the policy runs on, its outputs numpy or (``output="torch"``) tensors left there;
    Meta-World on the CPU, in numpy, whatever ``device`` is ({})."""
    sim = str(cfg.get("sim", "metaworld"))
    if sim == "metaworld":
        return {}
    return {"sim": sim, "device": None if device is None else str(device), "output": output}


def nearest_choice(word: str, choices: Sequence[str]) -> str:
    """``"; nearest valid choice: 'x'"`` for the closest of ``choices`` to a mistyped ``word`` ("" if none is)."""
    near = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.5)
    return f"; nearest valid choice: {near[0]!r}" if near else ""


class UsageError(ValueError):
    """A command-line mistake the user must fix (a refused combination of settings): one line, exit 2."""


def check_policy_inputs(cfg: DictConfig, shape_meta: dict[str, Any], source: str) -> None:
    """With ``obs=`` given (configs/obs/), refuse a policy that reads a key the preset withholds: under
    ``obs=pixels`` a checkpoint that reads the privileged ``state`` is an error (cameras follow the policy)."""
    allowed = cfg.get("obs_keys")
    if allowed is None:
        return
    allowed = list(allowed)
    privileged = [k for k in shape_meta["obs"] if not k.startswith("image/") and k not in allowed]
    if privileged:
        raise UsageError(
            f"{source} reads obs key(s) {privileged}, which this obs= preset withholds (it provides {allowed}): "
            f"use a policy trained with the same obs=, or drop obs="
        )


def dataset_paths(cfg: DictConfig) -> list[str]:
    """``dataset=`` (one HDF5 file or a list) as paths; each must be a file: a clear error names the one that
    is not (a directory holding ``demos.hdf5`` is pointed at it)."""
    ds = cfg.dataset
    paths = [str(p) for p in ds] if OmegaConf.is_list(ds) or isinstance(ds, list | tuple) else [str(ds)]
    for p in paths:
        if Path(p).is_dir():
            inside = Path(p) / "demos.hdf5"
            hint = (
                f": use dataset={inside}"
                if inside.is_file()
                else " (robosteer-collect writes <out>/demos.hdf5)"
            )
            raise UsageError(f"dataset={p!r} is a directory, expected an HDF5 file{hint}")
        if not Path(p).is_file():
            raise UsageError(f"dataset={p!r}: no such file (expected an HDF5 file from robosteer-collect)")
    return paths


@contextmanager
def exit_codes(command: str) -> Iterator[None]:
    """Exit statuses for the project's own errors (2 user, 1 runtime), as one line on stderr without a traceback.

    User errors (a bad dataset or checkpoint, a refused setting, an ``out`` that would overwrite a run, any
    other ``ValueError``/``FileNotFoundError``) exit 2; ``NonFiniteError`` exits 1; Ctrl-C or SIGTERM (a graceful stop) exits 130.
    """
    from robosteer.policies.checkpoint import CheckpointError
    from robosteer.policies.data.errors import DatasetError
    from robosteer.policies.engine import NonFiniteError

    try:
        yield
    except (DatasetError, CheckpointError, UsageError, FileExistsError) as err:
        print(f"{command}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    except (ValueError, FileNotFoundError) as err:  # a setting the code refused: the user's to fix
        if debug():
            raise
        print(f"{command}: error: {err} (ROBOSTEER_DEBUG=1 shows the traceback)", file=sys.stderr)
        raise SystemExit(2) from None
    except NonFiniteError as err:
        print(f"{command}: runtime fault: {err}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:  # the run engine saved checkpoints/latest before raising it
        print(f"{command}: interrupted (Ctrl-C or SIGTERM)", file=sys.stderr)
        raise SystemExit(130) from None


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file + rename, so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_metrics(run_dir: Path, metrics: dict[str, Any]) -> Path:
    """Write ``metrics.json`` atomically (numpy values converted) and return its path."""
    from robosteer.policies.checkpoint import jsonable

    path = Path(run_dir) / "metrics.json"
    atomic_write_text(path, json.dumps(jsonable(metrics), indent=2, sort_keys=True) + "\n")
    return path


def format_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    """Render rows as a GitHub-markdown table (what every command prints at its end)."""
    if not rows:
        return ""
    columns = columns or list(rows[0])

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
        return str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def log_beside(run: Path, suffix: str = ".log") -> Path:
    """The log file next to a run directory: ``<run><suffix>``. Not ``with_suffix``: run names hold dots
    (``noise0.3``, ``t0.5``), which it would cut, so two runs could share one log."""
    return Path(f"{run}{suffix}")


def run_module(args: list[str], log: Path, cwd: Path) -> None:
    """``python -m <args>`` in ``cwd`` with its output in ``log`` (its folder made if new); raises if it fails
    (benchmark grid steps)."""
    import subprocess

    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as f:
        subprocess.run([sys.executable, "-m", *args], cwd=cwd, stdout=f, stderr=subprocess.STDOUT, check=True)


def read_results(
    path: Path, key: tuple[str, ...], defaults: dict[str, Any] | None = None
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """A resumable grid's finished runs: ``{(r[k] for k in key): r}`` from a JSON-lines file (empty if none).

    ``defaults``: values of key fields that rows written before the field existed lack (they get it filled in).
    """
    if not path.exists():
        return {}
    rows = [
        {**(defaults or {}), **json.loads(line)} for line in path.read_text().splitlines() if line.strip()
    ]
    return {tuple(r[k] for k in key): r for r in rows}


def provenance(command: list[str] | str, cwd: Path | None = None) -> dict[str, Any]:
    """What a committed results row needs beside its figures: the command, the commit it ran at, the
    machine and its load (1-minute load average, and the core count it is read against)."""
    import platform
    import shlex
    import subprocess

    where = cwd or Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
        ).stdout.strip()
        commit += "+dirty" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "command": command if isinstance(command, str) else shlex.join(command),
        "commit": commit,
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "load": round(os.getloadavg()[0], 2),
    }
