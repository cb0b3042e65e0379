"""The one checkpoint format of robosteer.

A checkpoint is a directory, written atomically, that holds

- ``config.json``: ``format_version``, ``kind``, the policy name + config, ``shape_meta``, the list of files,
  and whatever the writer adds (step, scores, the resolved run config);
- ``<name>.safetensors`` per saved module. A flat ``{key: tensor}`` state dict (a model) is stored with its
  own keys, so any safetensors reader can open it. Nested states (optimizer, LR scheduler, RNG) are
  flattened: their tensors go to ``<name>.safetensors`` and their non-tensor structure to ``<name>.json``;
- ``extra.json`` (+ ``extra.safetensors`` when it holds tensors) for the writer's free-form state.

``config.json`` records the SHA-256 of every other file (key ``sha256``), checked at load: bytes damaged on
disk or in transfer fail at once with the file's name instead of loading as NaN weights that fail much later.
Checkpoints written before checksums existed (no ``sha256`` key) still load, unchecked.

Nothing is pickled, so loading a checkpoint can never execute code. A save writes into a temporary
directory beside the target, fsyncs every file and the directory, then swaps it in with one atomic
``renameat2(RENAME_EXCHANGE)`` (Linux), or, where that is missing, two renames whose interrupted state
``load_checkpoint`` recovers from. An interrupted save never leaves a half-written checkpoint in place
of a valid one.

A run directory holds ``checkpoints/latest`` (everything needed for an exact resume), ``checkpoints/best``
(the weights that scored best in evaluation) and, per checkpoint, ``model`` (the trained weights) and
``ema`` (their exponential moving average, what evaluation uses) weights.
"""

from __future__ import annotations

import ctypes
import difflib
import errno
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch
from torch import nn

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
EXTRA_NAME = "extra"
_RESERVED = {EXTRA_NAME, "config"}
_WHICH = ("best", "latest", "ema")


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete or incompatible; the message names path, key and expectation."""


@dataclass
class Checkpoint:
    """A loaded checkpoint: its directory, ``config.json``, module states and extra state."""

    path: Path
    config: dict[str, Any]
    modules: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------
# Flattening nested states (optimizer, scheduler, RNG) into tensors + a JSON skeleton, without pickle.


def _flatten(obj: Any, prefix: str, tensors: dict[str, torch.Tensor]) -> Any:
    """Return a JSON-able skeleton of ``obj``; tensors and arrays go to ``tensors`` under dotted keys."""
    if isinstance(obj, torch.Tensor):
        key = prefix or "_"
        tensors[key] = obj.detach().cpu().contiguous().clone()
        return {"__tensor__": key}
    if isinstance(obj, np.ndarray):
        key = prefix or "_"
        tensors[key] = torch.from_numpy(np.ascontiguousarray(obj).copy())
        return {"__ndarray__": key}
    if isinstance(obj, np.generic):
        return _flatten(obj.item(), prefix, tensors)
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, Mapping):
        items = [(k, _flatten(v, f"{prefix}.{k}" if prefix else str(k), tensors)) for k, v in obj.items()]
        if all(isinstance(k, str) and not k.startswith("__") for k, _ in items):
            return dict(items)
        for k, _ in items:
            if not isinstance(k, str | int | bool | float) and k is not None:
                raise TypeError(f"cannot store a state dict key of type {type(k).__name__} (key {k!r})")
        return {"__items__": [[k, v] for k, v in items]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_flatten(v, f"{prefix}.{i}", tensors) for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_flatten(v, f"{prefix}.{i}", tensors) for i, v in enumerate(obj)]
    raise TypeError(
        f"cannot store a value of type {type(obj).__name__} at {prefix!r}: checkpoints hold tensors, "
        "arrays and JSON values only (no pickle)"
    )


def _unflatten(skel: Any, tensors: Mapping[str, torch.Tensor]) -> Any:
    """Inverse of :func:`_flatten`."""
    if isinstance(skel, dict):
        if "__tensor__" in skel:
            return tensors[skel["__tensor__"]]
        if "__ndarray__" in skel:
            return tensors[skel["__ndarray__"]].numpy().copy()
        if "__tuple__" in skel:
            return tuple(_unflatten(v, tensors) for v in skel["__tuple__"])
        if "__items__" in skel:
            return {k: _unflatten(v, tensors) for k, v in skel["__items__"]}
        return {k: _unflatten(v, tensors) for k, v in skel.items()}
    if isinstance(skel, list):
        return [_unflatten(v, tensors) for v in skel]
    return skel


def _as_state(obj: nn.Module | Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.state_dict() if isinstance(obj, nn.Module) else obj


def _is_flat_tensor_dict(state: Mapping[str, Any]) -> bool:
    return all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items())


# --------------------------------------------------------------------------------------------------
# Durable, atomic writes.


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_bytes(path: Path, data: bytes) -> str:
    """Write and fsync ``data``; return its SHA-256 hex digest (recorded in config.json, checked at load)."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return hashlib.sha256(data).hexdigest()


def _write_json(path: Path, obj: Any) -> str:
    return _write_bytes(path, (json.dumps(obj, indent=2, allow_nan=True) + "\n").encode())


def _write_tensors(
    path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None
) -> str:
    # Clone so tied/shared storages (which safetensors refuses) become independent tensors.
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}
    return _write_bytes(path, safetensors.torch.save(tensors, metadata=metadata))


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths (Linux ``renameat2(RENAME_EXCHANGE)``); False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, f"renameat2 exchange failed: {os.strerror(err)}", str(a))


def _backup_path(path: Path) -> Path:
    return path.parent / f".{path.name}.old"


def _clean_stale_temps(path: Path) -> None:
    """Remove temp dirs of earlier saves of ``path`` whose writer process is gone."""
    for tmp in path.parent.glob(f".{path.name}.tmp-*"):
        try:
            pid = int(tmp.name.rsplit("-", 2)[-2])
            os.kill(pid, 0)
        except (ValueError, IndexError, PermissionError):
            continue
        except ProcessLookupError:
            shutil.rmtree(tmp, ignore_errors=True)


def save_checkpoint(
    path: str | os.PathLike,
    modules: Mapping[str, nn.Module | Mapping[str, Any]],
    config: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write a checkpoint directory atomically; return its path.

    ``modules`` maps a name to an ``nn.Module`` or a (possibly nested) state dict: each becomes
    ``<name>.safetensors`` (+ ``<name>.json`` for nested structure). ``config`` (JSON-able) becomes
    ``config.json``; ``format_version`` and ``kind`` (default ``"policy"``) are added when missing.
    ``extra`` is free-form state (tensors, arrays, JSON values) stored as ``extra.json``/``extra.safetensors``.
    """
    path = Path(path).absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale_temps(path)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        files: dict[str, dict[str, Any]] = {}
        digests: dict[str, str] = {}  # file name -> SHA-256 of its bytes
        for name, obj in modules.items():
            if name in _RESERVED or not name or "/" in name or name.startswith("."):
                raise ValueError(f"invalid checkpoint module name {name!r} (reserved: {sorted(_RESERVED)})")
            state = _as_state(obj)
            entry: dict[str, Any] = {"file": f"{name}.safetensors"}
            if _is_flat_tensor_dict(state):
                tensors = dict(state)
            else:
                tensors = {}
                skeleton = _flatten(state, "", tensors)
                entry["structure"] = f"{name}.json"
                digests[entry["structure"]] = _write_json(tmp / entry["structure"], skeleton)
            digests[entry["file"]] = _write_tensors(tmp / entry["file"], tensors)
            entry["num_tensors"] = len(tensors)
            entry["num_elements"] = int(sum(t.numel() for t in tensors.values()))
            files[name] = entry
        cfg = dict(config)
        cfg.setdefault("kind", "policy")
        cfg["format_version"] = FORMAT_VERSION
        cfg["modules"] = files
        cfg.setdefault("created", datetime.now(UTC).isoformat(timespec="seconds"))
        cfg.setdefault("torch_version", torch.__version__)
        if extra is not None:
            tensors = {}
            skeleton = _flatten(dict(extra), "", tensors)
            structure, file = f"{EXTRA_NAME}.json", f"{EXTRA_NAME}.safetensors"
            digests[structure] = _write_json(tmp / structure, skeleton)
            if tensors:
                digests[file] = _write_tensors(tmp / file, tensors)
            cfg["extra"] = {"structure": structure, "tensors": bool(tensors)}
        cfg["sha256"] = digests
        # config.json last: a directory with a config.json lists only files that were fully written.
        _write_json(tmp / CONFIG_FILE, cfg)
        _fsync_path(tmp)

        if not path.exists():
            os.rename(tmp, path)
        elif _exchange(tmp, path):
            pass  # `tmp` now holds the previous checkpoint
        else:
            backup = _backup_path(path)
            shutil.rmtree(backup, ignore_errors=True)
            os.rename(path, backup)  # a crash here leaves the valid old checkpoint at `backup`
            os.rename(tmp, path)
            tmp = backup
        _fsync_path(path.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


# --------------------------------------------------------------------------------------------------
# Loading.


def _verify(path: Path, expected: str | None) -> None:
    """Compare the SHA-256 of ``path`` with the digest recorded in config.json, when one is."""
    if expected is None:  # written before checksums were recorded
        return
    with open(path, "rb") as f:
        actual = hashlib.file_digest(f, "sha256").hexdigest()
    if actual != expected:
        raise CheckpointError(
            f"{path}: checksum mismatch (sha256 {actual[:12]}..., config.json records {expected[:12]}...): "
            "the file is corrupt or was changed after it was saved"
        )


def _read_json(path: Path, what: str, sha256: str | None = None) -> Any:
    if not path.is_file():
        raise CheckpointError(f"{path}: missing {what}")
    _verify(path, sha256)
    try:
        return json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: {what} is not valid JSON ({e})") from None


def _read_tensors(path: Path, what: str, sha256: str | None = None) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise CheckpointError(f"{path}: missing {what} (listed in config.json)")
    _verify(path, sha256)
    try:
        return safetensors.torch.load_file(str(path))
    except Exception as e:  # safetensors raises its own error types for truncated/corrupt files
        raise CheckpointError(f"{path}: cannot read {what}: {e}") from None


def _resolve_dir(path: Path) -> Path:
    if path.is_dir():
        return path
    backup = _backup_path(path)
    if (backup / CONFIG_FILE).is_file():
        log.warning("%s is missing; using %s left by an interrupted save", path, backup)
        return backup
    raise CheckpointError(f"{path}: checkpoint directory does not exist")


def read_checkpoint_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a checkpoint's ``config.json`` (cheap: no tensors are loaded)."""
    path = _resolve_dir(Path(path))
    cfg = _read_json(path / CONFIG_FILE, CONFIG_FILE)
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{path / CONFIG_FILE}: expected a JSON object, got {type(cfg).__name__}")
    version = cfg.get("format_version")
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"{path / CONFIG_FILE}: key 'format_version' is {version!r}, expected {FORMAT_VERSION} "
            "(written by an incompatible robosteer version, or not a robosteer checkpoint)"
        )
    if not isinstance(cfg.get("modules"), dict):
        raise CheckpointError(f"{path / CONFIG_FILE}: key 'modules' is missing or not an object")
    if not isinstance(cfg.get("sha256", {}), dict):
        raise CheckpointError(f"{path / CONFIG_FILE}: key 'sha256' is not an object of file -> digest")
    return cfg


def load_checkpoint(path: str | os.PathLike, names: Iterable[str] | None = None) -> Checkpoint:
    """Load a checkpoint directory: its config, the module states listed in ``names`` (default all), extra."""
    path = _resolve_dir(Path(path))
    cfg = read_checkpoint_config(path)
    available = cfg["modules"]
    sums = cfg.get("sha256", {})  # absent in checkpoints written before checksums: loaded unchecked
    wanted = list(available) if names is None else list(names)
    modules: dict[str, Any] = {}
    for name in wanted:
        if name not in available:
            raise CheckpointError(
                f"{path / CONFIG_FILE}: no module {name!r} in 'modules'; available: {sorted(available)}"
            )
        entry = available[name]
        tensors = _read_tensors(path / entry["file"], f"{name} weights", sums.get(entry["file"]))
        if "structure" in entry:
            skel = _read_json(path / entry["structure"], f"{name} structure", sums.get(entry["structure"]))
            tensors = _unflatten(skel, tensors)
        modules[name] = tensors
    extra: dict[str, Any] = {}
    if "extra" in cfg:
        structure, file = cfg["extra"]["structure"], f"{EXTRA_NAME}.safetensors"
        skeleton = _read_json(path / structure, "extra state", sums.get(structure))
        tensors = {}
        if cfg["extra"]["tensors"]:
            tensors = _read_tensors(path / file, "extra tensors", sums.get(file))
        extra = _unflatten(skeleton, tensors)
    return Checkpoint(path=path, config=cfg, modules=modules, extra=extra)


def find_checkpoint(path: str | os.PathLike, which: str = "best") -> tuple[Path, str]:
    """Resolve a run directory or checkpoint directory to ``(checkpoint dir, module name)``.

    ``which``: ``"best"`` (the best-scoring evaluated weights; falls back to the latest EMA weights when
    the run never evaluated), ``"latest"`` (the latest trained weights) or ``"ema"`` (their moving average).
    On a checkpoint directory itself, ``"latest"`` picks its ``model`` weights and the others its ``ema``
    weights when present.
    """
    if which not in _WHICH:
        near = difflib.get_close_matches(str(which), _WHICH, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise CheckpointError(f"which={which!r} is not one of {list(_WHICH)}{hint}")
    p = Path(path)
    if not p.exists() and not _backup_path(p).exists():
        raise CheckpointError(f"{p}: no such run or checkpoint directory")
    if (p / CONFIG_FILE).is_file() or (not p.exists() and _backup_path(p).exists()):
        ckpt_dir = p
    elif (p / "checkpoints").is_dir():
        base = p / "checkpoints"
        if which == "best" and not ((base / "best").exists() or _backup_path(base / "best").exists()):
            log.warning("%s has no 'best' checkpoint (never evaluated); using the latest EMA weights", p)
            which = "ema"
        name = "best" if which == "best" else "latest"
        ckpt_dir = base / name
        if not ckpt_dir.exists() and not _backup_path(ckpt_dir).exists():
            found = sorted(d.name for d in base.iterdir() if not d.name.startswith("."))
            raise CheckpointError(f"{ckpt_dir}: missing checkpoint '{name}'; found {found}")
    else:
        raise CheckpointError(
            f"{p}: neither a checkpoint directory (no {CONFIG_FILE}) nor a run directory (no checkpoints/)"
        )
    cfg = read_checkpoint_config(ckpt_dir)
    modules = cfg["modules"]
    if which == "latest":
        module = "model"
    else:
        module = cfg.get("inference_module", "ema")
        if module not in modules:
            module = "ema" if "ema" in modules else "model"
    if module not in modules:
        raise CheckpointError(
            f"{ckpt_dir / CONFIG_FILE}: no '{module}' weights; available: {sorted(modules)}"
        )
    return _resolve_dir(ckpt_dir), module


def _known_policies() -> list[str]:
    from robosteer.policies.registry import list_policies  # imported on use: it pulls in the policy classes

    return list_policies()


def load_policy(
    path: str | os.PathLike, which: str = "best", device: str | torch.device = "cpu"
) -> nn.Module:
    """Rebuild a policy from a run or checkpoint directory (see :func:`find_checkpoint` for ``which``).

    The policy is built with ``policies.make_policy(name, shape_meta, stats=None, **config)``; its normaliser
    comes from the state dict. Returned in eval mode, with ``policy.task`` (the training task, or None) and
    ``policy.checkpoint_path`` set.
    """
    from robosteer import policies

    ckpt_dir, module = find_checkpoint(path, which)
    cfg = read_checkpoint_config(ckpt_dir)
    where = ckpt_dir / CONFIG_FILE
    pol = cfg.get("policy")
    known = _known_policies()
    if not isinstance(pol, dict) or not isinstance(pol.get("name"), str):
        raise CheckpointError(f"{where}: key 'policy.name' is missing (expected one of {known})")
    name = pol["name"]
    if name not in known:
        near = difflib.get_close_matches(name, known, n=1)
        hint = f"; nearest valid choice: {near[0]!r}" if near else ""
        raise CheckpointError(f"{where}: key 'policy.name' is {name!r}, expected one of {known}{hint}")
    if "shape_meta" not in cfg:
        raise CheckpointError(f"{where}: key 'shape_meta' is missing")
    policy_cfg = {k: v for k, v in (pol.get("config") or {}).items() if k != "name"}
    try:
        policy = policies.make_policy(name, cfg["shape_meta"], stats=None, **policy_cfg)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{where}: 'policy.config' does not fit policy {name!r}: {e}") from e
    state = load_checkpoint(ckpt_dir, names=[module]).modules[module]
    try:
        policy.load_state_dict(state)
    except RuntimeError as e:
        raise CheckpointError(
            f"{ckpt_dir / (module + '.safetensors')}: weights do not fit {name!r}: {e}"
        ) from e
    policy.task = cfg.get("task")
    policy.checkpoint_path = str(ckpt_dir)
    return policy.to(device).eval()


def state_dict_hash(module: nn.Module | Mapping[str, torch.Tensor]) -> str:
    """SHA-256 over names, dtypes, shapes and bytes of a state dict: proves weights stayed frozen."""
    h = hashlib.sha256()
    for key, value in sorted(_as_state(module).items()):
        if not isinstance(value, torch.Tensor):
            continue
        t = value.detach().cpu().contiguous()
        h.update(f"{key}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def jsonable(x: Any) -> Any:
    """Plain JSON values (numpy scalars, tuples, tensors of one element, paths) for config/metrics files."""
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray | torch.Tensor):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, Path):
        return str(x)
    if x is None or isinstance(x, bool | int | float | str):
        return x
    return str(x)
