"""robomimic's HDF5 demonstration layout: the one writer (:class:`DatasetWriter`) and reader (:func:`open_dataset`).

Layout (robomimic v0.3, what its ``SequenceDataset`` and conversion scripts use)::

    data/                      attrs: env_args (JSON {"env_name", "type", "env_kwargs"}), total (sum of num_samples)
      demo_0/                  attrs: num_samples, plus per-episode attrs (seed, success, ...)
        obs/<key>              (T, ...)  camera image/<cam> at obs/<cam>_image (flat, robomimic's convention)
        next_obs/<key>         (T, ...)
        actions                (T, A)
        rewards                (T,)
        dones                  (T,)
        states                 (T, S)    optional (simulator states, for replay)
        interventions          (T,)      optional uint8 0/1: the action applied after step t was a person's
                                         (teleoperation, HIL-SERL), not the policy's
    mask/train, mask/valid     byte strings of demo names

robosteer names a camera ``image/<camera>``; robomimic's readers and trainer take one dataset per key directly
under ``obs`` (a nested ``obs/image/<camera>`` is a group they cannot read), so the writer stores it at
``obs/<camera>_image`` and the reader maps it back. Files written before that hold ``obs/image/<camera>``
and are read as they are (:attr:`DemoFile.image_layout` says which).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from robosteer.policies.data.errors import DatasetError, hint
from robosteer.policies.data.stats import RunningStats

DEMO_RE = re.compile(r"^demo_(\d+)$")
ACTION_KEY = "action"  # the stats/batch key of the "actions" dataset
PARTIAL_SUFFIX = ".partial"
# The largest magnitude a stored float may have; anything beyond is corruption, not data. Its square (a
# variance, an MSE term) and sums of squares must stay finite in float32 (max ~3.4e38).
MAX_ABS_VALUE = 1e18
FLAGS = ("dones", "interventions")  # per-step 0/1 datasets, stored as uint8
FLAG_RE = re.compile(rf"demo_\d+/({'|'.join(FLAGS)})$")  # where check_values wants 0/1
IMAGE_PREFIX = "image/"  # robosteer's camera keys: image/<camera>
IMAGE_SUFFIX = "_image"  # where robomimic keeps them: obs/<camera>_image
IMAGE_LAYOUTS = {  # DemoFile.image_layout -> what it means
    "flat": "images at obs/<camera>_image (robomimic's layout)",
    "nested": "images at obs/image/<camera> (robosteer's layout before flat keys; robomimic cannot read it)",
    "mixed": "images at both obs/<camera>_image and obs/image/<camera>",
    "none": "no image keys",
}


# --------------------------------------------------------------------------------------------------- helpers
def demo_sort_key(name: str) -> int:
    """robomimic sorts demos by the integer after ``demo_`` (``int(name[5:])``); so do we."""
    m = DEMO_RE.match(name)
    return int(m.group(1)) if m else -1


def is_image(key: str, arr: np.ndarray) -> bool:
    """Image observations: ``image/<camera>`` keys or uint8 (T, H, W, C) arrays (channel-last)."""
    return key.startswith("image") or (arr.dtype == np.uint8 and arr.ndim == 4 and arr.shape[-1] in (1, 3, 4))


def stored_key(key: str) -> str:
    """Where obs key ``key`` is written under ``obs/``: ``image/<camera>`` at ``<camera>_image``; others as is."""
    camera = key.removeprefix(IMAGE_PREFIX)
    return camera + IMAGE_SUFFIX if camera != key and camera and "/" not in camera else key


def obs_key(stored: str) -> str:
    """robosteer's key of dataset ``obs/<stored>``: ``<camera>_image`` -> ``image/<camera>``; others (a nested
    ``image/<camera>`` of an older file included) as they are."""
    camera = stored.removesuffix(IMAGE_SUFFIX)
    return IMAGE_PREFIX + camera if camera != stored and camera and "/" not in camera else stored


def _attr_value(value: Any) -> Any:
    """Make a Python value storable as an HDF5 attribute (dicts, lists of str and None go in as JSON)."""
    if isinstance(value, str | bytes | bool | int | float | np.generic):
        return value
    if isinstance(value, np.ndarray) and value.dtype != object:
        return value
    if isinstance(value, list | tuple) and value and all(isinstance(v, int | float) for v in value):
        return np.asarray(value)
    return json.dumps(value)


def _read_attr(value: Any) -> Any:
    """HDF5 attribute -> plain Python (numpy scalars to Python scalars, bytes to str)."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    return value


def check_values(arr: np.ndarray, where: str) -> None:
    """Raise a :class:`DatasetError` at the first bad value of ``arr`` (``where`` names file, demo and key).

    Floats must be finite with ``|x| <= MAX_ABS_VALUE`` (one NaN action once trained into a NaN checkpoint);
    the flags (``dones``, ``interventions``) must be 0/1; integer and image arrays are not scanned.
    """
    arr = np.asarray(arr)
    if FLAG_RE.search(where):
        bad = ~np.isin(arr, (0, 1))
        expected = "expected 0 or 1"
    elif arr.dtype.kind == "f":
        bad = ~(np.abs(arr) <= MAX_ABS_VALUE)  # NaN compares False: caught with inf and out-of-range values
        expected = f"expected finite values with |x| <= {MAX_ABS_VALUE:.0e}"
    else:
        return
    if not bad.any():
        return
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    value = arr[idx].item()
    kind = "a non-finite" if isinstance(value, float) and not np.isfinite(value) else "an out-of-range"
    raise DatasetError(
        f"{where} holds {kind} value at step {idx[0]}, index [{', '.join(map(str, idx))}] ({value!r}); "
        f"{expected} ({int(bad.sum())} bad values in all)"
    )


def _datasets_under(group: h5py.Group) -> dict[str, h5py.Dataset]:
    """All datasets below ``group`` by relative path (so nested ``image/corner2`` is one key)."""
    names: list[str] = []
    group.visit(names.append)
    return {n: group[n] for n in names if isinstance(group[n], h5py.Dataset)}


def _obs_datasets(group: h5py.Group, path: Path) -> dict[str, h5py.Dataset]:
    """The datasets under an ``obs``/``next_obs`` group by robosteer's key (:func:`obs_key`), either layout."""
    out: dict[str, h5py.Dataset] = {}
    for name, ds in _datasets_under(group).items():
        key = obs_key(name)
        if key in out:
            raise DatasetError(f"{path}: {out[key].name[1:]} and {ds.name[1:]} both hold obs key {key!r}")
        out[key] = ds
    return out


def split_names(names: Sequence[str], valid_fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """Deterministic train/valid split of demo names: ``int(valid_fraction * n)`` valid demos (robomimic's
    ``split_train_val`` count), chosen by a permutation drawn from ``seed``. Both lists are sorted."""
    names = sorted(names, key=demo_sort_key)
    num_valid = int(valid_fraction * len(names))
    perm = np.random.default_rng(seed).permutation(len(names))
    valid_idx = set(perm[:num_valid].tolist())
    train = [n for i, n in enumerate(names) if i not in valid_idx]
    return train, [n for i, n in enumerate(names) if i in valid_idx]


# ---------------------------------------------------------------------------------------------------- writer
def _readable_episodes(path: Path) -> int | str:
    """How many ``data/demo_*`` groups a (possibly half-written) file holds, or "?" when it cannot be read."""
    try:
        with h5py.File(path, "r") as f:
            return sum(1 for k in f.get("data", {}) if k.startswith("demo_"))
    except (OSError, KeyError):
        return "?"


class DatasetWriter:
    """Writes episodes into a robomimic-layout HDF5 file, safely against interruption.

    Collection gets interrupted, so the file is valid on disk after every :meth:`add_episode`: it is written
    to ``path + ".partial"`` (readable by :func:`open_dataset` after a hard kill) and atomically renamed to
    ``path`` on :meth:`close` (also on an exception out of the ``with`` block); a failed episode is removed.

    Args:
        path: the final ``.hdf5`` path (parent directories are created).
        env_args: robomimic env metadata ``{"env_name", "type", "env_kwargs"}``; ``env_name`` is required,
            ``type`` defaults to 2 (robomimic's gym env type), ``env_kwargs`` to ``{}``. Stored as JSON.
        attrs: extra file-level attributes stored on the ``data`` group (dicts/lists go in as JSON).
        valid_fraction: fraction of demos in ``mask/valid`` (``int(valid_fraction * n)``, as robomimic does).
        split_seed: seed of the train/valid permutation; the split depends only on (n, valid_fraction, seed).
        compression: ``"gzip"`` (portable, default), ``"lzf"`` (faster, h5py-only) or None, for image obs.
        overwrite: replace an existing ``path`` on close; if False, refuse to start when it exists.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        env_args: Mapping[str, Any],
        attrs: Mapping[str, Any] | None = None,
        *,
        valid_fraction: float = 0.1,
        split_seed: int = 0,
        compression: str | None = "gzip",
        overwrite: bool = True,
    ) -> None:
        if "env_name" not in env_args:
            raise DatasetError(
                f"{path}: env_args must hold 'env_name' (robomimic's env metadata "
                f"{{'env_name', 'type', 'env_kwargs'}}); got keys {sorted(env_args)}"
            )
        if not 0.0 <= valid_fraction < 1.0:
            raise ValueError(f"valid_fraction must be in [0, 1), got {valid_fraction}")
        if compression not in ("gzip", "lzf", None):
            raise ValueError(f"compression must be 'gzip', 'lzf' or None, got {compression!r}")
        self.path = Path(path)
        if self.path.exists() and not overwrite:
            raise FileExistsError(f"{self.path} exists (pass overwrite=True to replace it)")
        self.partial_path = self.path.with_name(self.path.name + PARTIAL_SUFFIX)
        if self.partial_path.exists():  # what an interrupted run salvaged: never truncate it silently
            raise FileExistsError(
                f"{self.partial_path} holds an interrupted collection ({_readable_episodes(self.partial_path)} "
                f"finished episodes, readable with open_dataset): move or delete it first (nothing was changed)"
            )
        self.valid_fraction = valid_fraction
        self.split_seed = split_seed
        self.compression = compression
        self.env_args = {"env_name": env_args["env_name"], "type": 2, "env_kwargs": {}, **dict(env_args)}
        self.path.parent.mkdir(parents=True, exist_ok=True)

        self._file: h5py.File | None = h5py.File(self.partial_path, "w")
        self._data = self._file.create_group("data")
        self._data.attrs["env_args"] = json.dumps(self.env_args, indent=4)
        for key, value in (attrs or {}).items():
            self._data.attrs[key] = _attr_value(value)
        self._names: list[str] = []
        self.total_steps = 0  # sum of num_samples over the episodes written so far
        self._obs_spec: dict[str, tuple[tuple[int, ...], np.dtype]] | None = None
        self._action_dim: int | None = None
        self._finalize_metadata()

    # -- public ------------------------------------------------------------------------------------------
    @property
    def num_episodes(self) -> int:
        """Episodes written so far."""
        return len(self._names)

    def add_episode(
        self,
        obs: Mapping[str, np.ndarray],
        actions: np.ndarray,
        rewards: np.ndarray,
        dones: np.ndarray,
        next_obs: Mapping[str, np.ndarray] | None = None,
        states: np.ndarray | None = None,
        attrs: Mapping[str, Any] | None = None,
        *,
        interventions: np.ndarray | None = None,
    ) -> str:
        """Append one episode as ``data/demo_N`` and make the file valid on disk; returns the demo name.

        ``obs[key]`` is (T, ...), ``actions`` (T, A), ``rewards`` and ``dones`` (T,), ``states`` (T, S);
        ``attrs`` are per-episode attributes (seed, success, ...). ``next_obs`` defaults to obs shifted by one
        step, the last repeated: pass it (e.g. ``info["final_obs"]``) when exact final transitions matter.
        ``interventions`` (T,) 0/1 or bool: step t's action was a person's (HIL-SERL), stored as uint8 like
        ``dones``; omitted, the episode has none (``episode()`` gives None).
        """
        if self._file is None:
            raise DatasetError(f"{self.path}: add_episode after close()")
        T, arrays = self._check_episode(obs, actions, rewards, dones, next_obs, states, interventions)
        name = f"demo_{len(self._names)}"
        group = self._data.create_group(name)
        try:
            for key, arr in arrays.items():
                self._write(group, key, arr)
            group.attrs["num_samples"] = T
            for key, value in (attrs or {}).items():
                group.attrs[key] = _attr_value(value)
        except BaseException:
            # Interrupted or failed mid-episode: drop the half-written group so the file stays valid.
            del self._data[name]
            self._file.flush()
            raise
        self._names.append(name)
        self.total_steps += T
        self._finalize_metadata()
        return name

    def close(self) -> None:
        """Finalise (total, masks), close and atomically rename ``path.partial`` -> ``path``. Idempotent."""
        if self._file is None:
            return
        try:
            self._finalize_metadata()
        finally:
            self._file.close()
            self._file = None
        os.replace(self.partial_path, self.path)

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------------------
    def _finalize_metadata(self) -> None:
        """Rewrite ``total`` and the masks, then flush: the file on disk is valid after this."""
        assert self._file is not None
        self._data.attrs["total"] = self.total_steps
        train, valid = split_names(self._names, self.valid_fraction, self.split_seed)
        mask = self._file.require_group("mask")
        for split, names in (("train", train), ("valid", valid)):
            if split in mask:
                del mask[split]
            mask.create_dataset(split, data=np.array(names, dtype="S"))
        self._file.flush()

    def _write(self, group: h5py.Group, name: str, arr: np.ndarray) -> None:
        kwargs: dict[str, Any] = {}
        if arr.ndim >= 3 and is_image(obs_key(name.split("/", 1)[-1]), arr) and self.compression is not None:
            kwargs["chunks"] = (min(arr.shape[0], 16), *arr.shape[1:])
            kwargs["compression"] = self.compression
            if self.compression == "gzip":
                kwargs["compression_opts"] = 4
        group.create_dataset(name, data=arr, **kwargs)

    def _check_episode(
        self,
        obs: Mapping[str, np.ndarray],
        actions: np.ndarray,
        rewards: np.ndarray,
        dones: np.ndarray,
        next_obs: Mapping[str, np.ndarray] | None,
        states: np.ndarray | None,
        interventions: np.ndarray | None = None,
    ) -> tuple[int, dict[str, np.ndarray]]:
        """Check shapes against this episode's length and earlier episodes; returns T and the arrays to write
        by their path in the demo group, in writing order."""
        where = f"{self.path} (episode {len(self._names)})"
        actions = np.asarray(actions)
        if actions.ndim != 2 or actions.shape[0] == 0:
            raise DatasetError(f"{where}: actions must be (T, A) with T >= 1, got shape {actions.shape}")
        T, A = actions.shape
        if self._action_dim is not None and self._action_dim != A:
            raise DatasetError(f"{where}: action dim {A} differs from earlier episodes ({self._action_dim})")
        if not obs:
            raise DatasetError(f"{where}: obs is empty; expected a dict of (T, ...) arrays")
        obs_arr = {str(k): np.asarray(v) for k, v in obs.items()}
        for key in obs_arr:
            if obs_key(stored_key(key)) != key:
                raise DatasetError(
                    f"{where}: obs key {key!r} would read back as {obs_key(key)!r} (obs/<camera>_image holds "
                    f"camera image/<camera>): name a camera {obs_key(key)!r}; other keys must not end in '_image'"
                )
        spec = self._obs_spec or {k: (v.shape[1:], v.dtype) for k, v in obs_arr.items()}
        missing = sorted(set(spec) - set(obs_arr))
        extra = sorted(set(obs_arr) - set(spec))
        if missing or extra:
            raise DatasetError(
                f"{where}: obs keys differ from earlier episodes: missing {missing}, unexpected {extra}; "
                f"expected {sorted(spec)}"
            )

        def check(label: str, key: str, arr: np.ndarray) -> np.ndarray:
            shape, dtype = spec[key]
            if arr.ndim == 0 or arr.shape[0] != T or arr.shape[1:] != shape:
                raise DatasetError(
                    f"{where}: {label}/{key} has shape {arr.shape}, expected ({T}, {', '.join(map(str, shape))})"
                    f" (T from actions, per-step shape from the first episode)"
                )
            if arr.dtype != dtype:
                if not np.can_cast(arr.dtype, dtype, casting="same_kind"):
                    raise DatasetError(f"{where}: {label}/{key} has dtype {arr.dtype}, expected {dtype}")
                arr = arr.astype(dtype)
            return arr

        obs_arr = {k: check("obs", k, v) for k, v in obs_arr.items()}
        if next_obs is None:
            nxt = {k: np.concatenate([v[1:], v[-1:]], axis=0) for k, v in obs_arr.items()}
        else:
            nxt = {str(k): np.asarray(v) for k, v in next_obs.items()}
            if set(nxt) != set(obs_arr):
                raise DatasetError(
                    f"{where}: next_obs keys {sorted(nxt)} differ from obs keys {sorted(obs_arr)}"
                )
            nxt = {k: check("next_obs", k, v) for k, v in nxt.items()}
        rewards = np.asarray(rewards, dtype=np.float32).reshape(-1) if np.ndim(rewards) <= 1 else None
        dones_arr = np.asarray(dones).reshape(-1) if np.ndim(dones) <= 1 else None
        if rewards is None or rewards.shape != (T,):
            raise DatasetError(f"{where}: rewards must be ({T},), got shape {np.shape(rewards)}")
        if dones_arr is None or dones_arr.shape != (T,):
            raise DatasetError(f"{where}: dones must be ({T},), got shape {np.shape(dones)}")
        if states is not None:
            states = np.asarray(states)
            if states.ndim != 2 or states.shape[0] != T:
                raise DatasetError(f"{where}: states must be ({T}, S), got shape {states.shape}")
        if interventions is not None:
            flags = np.asarray(interventions)
            if flags.shape != (T,):
                raise DatasetError(f"{where}: interventions must be ({T},), got shape {flags.shape}")
            check_values(flags, f"{where}: data/demo_{len(self._names)}/interventions")
        self._obs_spec = spec
        self._action_dim = A
        arrays = {f"obs/{stored_key(k)}": v for k, v in obs_arr.items()}
        arrays |= {f"next_obs/{stored_key(k)}": v for k, v in nxt.items()}
        arrays["actions"] = actions.astype(np.float32) if actions.dtype.kind == "f" else actions
        arrays["rewards"] = rewards
        arrays["dones"] = dones_arr.astype(np.uint8)
        if states is not None:
            arrays["states"] = states
        if interventions is not None:
            arrays["interventions"] = flags.astype(np.uint8)
        return T, arrays


# ---------------------------------------------------------------------------------------------------- reader
class DemoFile:
    """A validated, read-only robomimic-layout file. Use :func:`open_dataset` to get one.

    Open validates structure, attributes and lengths (no array data), so a broken file fails at once with a
    :class:`DatasetError` naming the file and the path inside it, not deep inside a training loop.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._file = _open_h5(self.path)
        try:
            self._validate()
        except (OSError, KeyError, RuntimeError, TypeError) as err:  # damaged metadata inside the file
            self._file.close()
            raise self._err(
                f"HDF5 structure could not be read; the file is truncated or corrupt ({err})"
            ) from err
        except BaseException:  # DatasetError included
            self._file.close()
            raise

    # -- structure ----------------------------------------------------------------------------------------
    def _err(self, msg: str) -> DatasetError:
        return DatasetError(f"{self.path}: {msg}")

    def _validate(self) -> None:
        f = self._file
        if "data" not in f or not isinstance(f["data"], h5py.Group):
            raise self._err(
                f"missing group 'data' (robomimic layout: data/demo_N/...){hint('data', f.keys())}"
            )
        data = f["data"]
        if "env_args" not in data.attrs:
            raise self._err("data.attrs['env_args'] is missing (expected a JSON string of the env metadata)")
        try:
            env_args = json.loads(_read_attr(data.attrs["env_args"]))
        except (TypeError, ValueError) as err:
            raise self._err(f"data.attrs['env_args'] is not valid JSON: {err}") from err
        if not isinstance(env_args, dict):
            raise self._err(f"data.attrs['env_args'] must be a JSON object, got {type(env_args).__name__}")
        self._env_args: dict[str, Any] = env_args

        names = list(data.keys())
        bad = [n for n in names if not DEMO_RE.match(n) or not isinstance(data[n], h5py.Group)]
        if bad:
            raise self._err(f"data/{bad[0]} is not a demo: expected groups named demo_<int> under 'data'")
        self._names = sorted(names, key=demo_sort_key)

        self._lengths: dict[str, int] = {}
        self._obs_spec: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
        self._obs_paths: dict[str, str] = {}  # obs key -> its dataset's path under obs/ in the first demo
        self.action_dim: int | None = None  # A of the (T, A) actions; None for a file with no demos
        self._with_interventions: list[str] = []  # demos holding data/demo_N/interventions
        first: str | None = None
        for name in self._names:
            g = data[name]
            where = f"data/{name}"
            if "num_samples" not in g.attrs:
                raise self._err(f"{where}.attrs['num_samples'] is missing (expected the episode length T)")
            T = int(g.attrs["num_samples"])
            if "actions" not in g or not isinstance(g["actions"], h5py.Dataset):
                raise self._err(
                    f"{where}/actions is missing (expected a ({T}, A) dataset){hint('actions', g.keys())}"
                )
            act = g["actions"]
            if act.ndim != 2 or act.shape[0] != T:
                raise self._err(
                    f"{where}/actions has shape {act.shape}, expected ({T}, A) with T = num_samples"
                )
            if self.action_dim is None:
                self.action_dim = int(act.shape[1])
            elif act.shape[1] != self.action_dim:
                raise self._err(
                    f"{where}/actions has action dim {act.shape[1]}, expected {self.action_dim} (as in data/{first})"
                )
            if "obs" not in g or not isinstance(g["obs"], h5py.Group):
                raise self._err(
                    f"{where}/obs is missing (expected a group of (T, ...) datasets){hint('obs', g.keys())}"
                )
            obs = _obs_datasets(g["obs"], self.path)
            if first is None:
                first = name
                self._obs_spec = {k: (tuple(d.shape[1:]), d.dtype) for k, d in obs.items()}
                # where each key lies under obs/ (its layout), for messages and image_layout
                self._obs_paths = {k: d.name[len(g["obs"].name) + 1 :] for k, d in obs.items()}
                if not obs:
                    raise self._err(f"{where}/obs holds no datasets (expected at least one obs key)")
            for key, (shape, _dtype) in self._obs_spec.items():
                if key not in obs:
                    raise self._err(
                        f"{where}/obs/{self._obs_paths[key]} is missing (present in data/{first})"
                        f"{hint(key, obs.keys())}"
                    )
                d = obs[key]
                if d.ndim == 0 or d.shape[0] != T or tuple(d.shape[1:]) != shape:
                    raise self._err(
                        f"{d.name[1:]} has shape {d.shape}, expected ({T}, {', '.join(map(str, shape))})"
                        f" (T = num_samples, per-step shape as in data/{first})"
                    )
            extra = sorted(set(obs) - set(self._obs_spec))
            if extra:
                raise self._err(
                    f"{obs[extra[0]].name[1:]} is not in data/{first}/obs (every demo must hold the same obs keys:"
                    f" {sorted(self._obs_spec)})"
                )
            if "next_obs" in g:
                nxt = _obs_datasets(g["next_obs"], self.path)
                for key in self._obs_spec:
                    if key not in nxt:
                        raise self._err(
                            f"{where}/next_obs/{self._obs_paths[key]} is missing (obs/{self._obs_paths[key]} "
                            f"exists){hint(key, nxt.keys())}"
                        )
                    if nxt[key].shape != obs[key].shape:
                        raise self._err(
                            f"{nxt[key].name[1:]} has shape {nxt[key].shape}, expected {obs[key].shape} as "
                            f"{obs[key].name[1:]}"
                        )
            for key in ("rewards", "dones", "states"):
                if key in g and (g[key].ndim == 0 or g[key].shape[0] != T):
                    raise self._err(
                        f"{where}/{key} has shape {g[key].shape}, expected length {T} (num_samples)"
                    )
            if "interventions" in g:
                flags = g["interventions"]
                if not isinstance(flags, h5py.Dataset) or flags.shape != (T,):
                    got = f"has shape {flags.shape}" if isinstance(flags, h5py.Dataset) else "is a group"
                    raise self._err(
                        f"{where}/interventions {got}, expected ({T},) (a 0/1 flag per step, T = num_samples)"
                    )
                self._with_interventions.append(name)
            self._lengths[name] = T

        self.total_steps = total = sum(self._lengths.values())
        if "total" not in data.attrs:
            raise self._err(f"data.attrs['total'] is missing (expected the sum of num_samples, {total})")
        if int(data.attrs["total"]) != total:
            raise self._err(
                f"data.attrs['total'] = {int(data.attrs['total'])}, expected {total} (the sum of num_samples)"
            )
        self._masks: dict[str, list[str]] = {}
        if "mask" in f:
            for split, ds in f["mask"].items():
                if not isinstance(ds, h5py.Dataset):
                    raise self._err(f"mask/{split} is not a dataset (expected byte strings of demo names)")
                demos = [_read_attr(x) for x in ds[()].reshape(-1)]
                for demo in demos:
                    if demo not in self._lengths:
                        raise self._err(
                            f"mask/{split} names {demo!r}, which is not in data{hint(demo, self._names)}"
                        )
                self._masks[split] = sorted(demos, key=demo_sort_key)

    # -- properties ---------------------------------------------------------------------------------------
    @property
    def num_episodes(self) -> int:
        return len(self._names)

    @property
    def demo_names(self) -> list[str]:
        """Demo names in robomimic's order (by integer suffix)."""
        return list(self._names)

    @property
    def env_args(self) -> dict[str, Any]:
        return dict(self._env_args)

    @property
    def obs_keys(self) -> list[str]:
        return sorted(self._obs_spec)

    @property
    def image_layout(self) -> str:
        """Where the images lie: ``"flat"`` (``obs/<camera>_image``, robomimic's), ``"nested"``
        (``obs/image/<camera>``, files written before), ``"mixed"`` or ``"none"`` (see ``IMAGE_LAYOUTS``)."""
        kinds = {
            "nested" if p == k else "flat" for k, p in self._obs_paths.items() if k.startswith(IMAGE_PREFIX)
        }
        return "none" if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"

    @property
    def obs_paths(self) -> dict[str, str]:
        """Where each obs key is stored under ``obs/`` (``{"image/corner2": "corner2_image", ...}``)."""
        return dict(sorted(self._obs_paths.items()))

    @property
    def obs_shapes(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Per-step shape and dtype of each obs key, e.g. ``{"state": ((39,), "float32")}``."""
        return {k: (s, str(d)) for k, (s, d) in sorted(self._obs_spec.items())}

    @property
    def intervention_demos(self) -> list[str]:
        """Demos that record per-step interventions (``data/demo_N/interventions``); the rest have none."""
        return list(self._with_interventions)

    @property
    def lengths(self) -> dict[str, int]:
        """num_samples per demo name."""
        return dict(self._lengths)

    @property
    def attrs(self) -> dict[str, Any]:
        """File-level attributes of ``data`` (env_args decoded, total included)."""
        return {k: _read_attr(v) for k, v in self._file["data"].attrs.items()} | {"env_args": self.env_args}

    # -- access -------------------------------------------------------------------------------------------
    def demo_name(self, index_or_name: int | str) -> str:
        """Resolve an episode index (position in :attr:`demo_names`) or a demo name; errors name the choices."""
        if isinstance(index_or_name, str):
            if index_or_name not in self._lengths:
                raise self._err(f"no demo {index_or_name!r} under data{hint(index_or_name, self._names)}")
            return index_or_name
        i = int(index_or_name)
        if not -len(self._names) <= i < len(self._names):
            raise self._err(f"episode index {i} out of range (the file holds {len(self._names)} episodes)")
        return self._names[i]

    def check_obs_keys(self, keys: Sequence[str]) -> list[str]:
        """Return ``keys`` if all exist, else raise naming the nearest existing keys."""
        for key in keys:
            if key not in self._obs_spec:
                raise self._err(f"obs key {key!r} not found in data/<demo>/obs{hint(key, self._obs_spec)}")
        return list(keys)

    def episode(
        self, index_or_name: int | str, obs_keys: Sequence[str] | None = None, *, check: bool = True
    ) -> dict[str, Any]:
        """One episode as numpy: ``{"name", "obs": {key: (T, ...)}, "next_obs", "actions": (T, A),
        "rewards": (T,), "dones": (T,), "states": (T, S) or None, "interventions": (T,) bool or None,
        "attrs": {...}}``.

        Every array read is deep-checked (:func:`check_values`), so a NaN or corrupt value fails before
        anything trains on it. ``check=False`` skips that (inspection tools only)."""
        name = self.demo_name(index_or_name)
        keys = self.check_obs_keys(obs_keys) if obs_keys is not None else self.obs_keys
        g = self._file["data"][name]
        try:
            obs = _obs_datasets(g["obs"], self.path)
            nxt = _obs_datasets(g["next_obs"], self.path) if "next_obs" in g else None
            out: dict[str, Any] = {
                "name": name,
                "obs": {k: obs[k][()] for k in keys},
                "next_obs": {k: nxt[k][()] for k in keys} if nxt is not None else None,
                "actions": g["actions"][()],
                **{k: g[k][()] if k in g else None for k in ("rewards", "dones", "states", "interventions")},
                "attrs": {k: _read_attr(v) for k, v in g.attrs.items()},
            }
        except (OSError, KeyError) as err:  # corrupt chunks / unreadable data inside a valid structure
            raise self._err(f"data/{name} could not be read ({err}); the file may be corrupt") from err
        if check:
            for group, stored in (("obs", obs), ("next_obs", nxt)):
                for k, arr in (out[group] or {}).items():
                    check_values(arr, f"{self.path}: {stored[k].name[1:]}")
            for key in ("actions", "rewards", "dones", "states", "interventions"):
                if out[key] is not None:
                    check_values(out[key], f"{self.path}: data/{name}/{key}")
        if out["interventions"] is not None:
            out["interventions"] = out["interventions"].astype(bool)
        return out

    def deep_check(self) -> None:
        """Read every array of every demo (``validate``): corrupt chunks and bad values raise DatasetErrors."""
        for name in self._names:
            self.episode(name)

    def episodes(
        self, names: Sequence[str] | None = None, obs_keys: Sequence[str] | None = None
    ) -> Iterator[dict]:
        """Iterate episodes (all, or the given names) in order."""
        for name in names if names is not None else self._names:
            yield self.episode(name, obs_keys)

    def split(self, name: str) -> list[str]:
        """Demo names of a filter key (``mask/<name>``); ``"all"`` is every demo. A file with no ``mask``
        group (hand-made files often lack one) treats every demo as ``"train"`` and none as ``"valid"``."""
        if name == "all":
            return list(self._names)
        if name in self._masks:
            return list(self._masks[name])
        if not self._masks and name in ("train", "valid"):
            return list(self._names) if name == "train" else []
        raise self._err(f"no filter key mask/{name}{hint(name, [*self._masks, 'all'])}")

    def stats(
        self, keys: Sequence[str] | None = None, split: str = "all"
    ) -> dict[str, dict[str, np.ndarray]]:
        """Normalisation stats ``{key: {"min", "max", "mean", "std"}}`` (float32) over ``split``; keys are obs
        keys and ``"action"`` (default: all of them). Streams episode by episode."""
        keys = list(keys) if keys is not None else [*self.obs_keys, ACTION_KEY]
        obs_keys = [k for k in keys if k not in (ACTION_KEY, "actions")]
        self.check_obs_keys(obs_keys)
        acc = {k: RunningStats() for k in keys}
        for ep in self.episodes(self.split(split), obs_keys):
            for k in keys:
                acc[k].update(ep["actions"] if k in (ACTION_KEY, "actions") else ep["obs"][k])
        try:
            return {k: a.result() for k, a in acc.items()}
        except DatasetError as err:
            raise self._err(f"no samples in split {split!r} to compute stats from") from err

    def summary(self) -> dict[str, Any]:
        """Episodes, steps, mean length, success rate (if episodes carry a ``success`` attr), split sizes."""
        data = self._file["data"]
        succ = [bool(_read_attr(data[n].attrs["success"])) for n in self._names if "success" in data[n].attrs]
        lengths = list(self._lengths.values())
        return {
            "episodes": self.num_episodes,
            "steps": self.total_steps,
            "mean_length": float(np.mean(lengths)) if lengths else 0.0,
            "min_length": min(lengths, default=0),
            "max_length": max(lengths, default=0),
            "success_rate": float(np.mean(succ)) if succ and len(succ) == len(self._names) else None,
            "action_dim": self.action_dim,
            "obs": {k: {"shape": list(s), "dtype": d} for k, (s, d) in self.obs_shapes.items()},
            "splits": {m: len(v) for m, v in self._masks.items()},
            "image_layout": self.image_layout,
            "env_args": self.env_args,
        }

    # -- lifetime -----------------------------------------------------------------------------------------
    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> DemoFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DemoFile({str(self.path)!r}, episodes={self.num_episodes}, steps={self.total_steps})"


def _open_h5(path: Path) -> h5py.File:
    """Open read-only, turning every way of failing into a DatasetError that says what to do."""
    if not path.exists():
        partial = path.with_name(path.name + PARTIAL_SUFFIX)
        if partial.exists():
            raise DatasetError(
                f"{path}: no such file, but {partial} exists: an interrupted collection; its finished episodes "
                f"are readable (open_dataset('{partial}')) or rename it"
            )
        siblings = [p.name for p in path.parent.glob("*.hdf5")] if path.parent.is_dir() else []
        suffix = hint(path.name, siblings) if siblings else ""
        raise DatasetError(f"{path}: no such file (expected a robomimic-layout .hdf5){suffix}")
    if path.is_dir():
        raise DatasetError(f"{path}: is a directory, expected an .hdf5 file")
    try:
        if h5py.is_hdf5(path):
            return h5py.File(path, "r")
    except (OSError, ValueError) as err:
        raise DatasetError(
            f"{path}: HDF5 file cannot be opened; it is truncated or corrupt, or open for writing by another "
            f"process ({err})"
        ) from err
    raise DatasetError(f"{path}: not an HDF5 file (no HDF5 signature); expected a robomimic-layout .hdf5")


def open_dataset(path: str | os.PathLike) -> DemoFile:
    """Open and validate a robomimic-layout HDF5 file; raises :class:`DatasetError` on any layout problem."""
    return DemoFile(path)
