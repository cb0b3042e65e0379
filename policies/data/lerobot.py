"""LeRobot dataset format v3.0 in and out: :func:`import_lerobot` (dir -> our HDF5) and :func:`export_lerobot`.

Most public robot datasets ship as LeRobot v3.0 (``meta/info.json``, parquet frames, one mp4 stream per camera);
our training input is robomimic's HDF5 layout (``hdf5.py``). These two functions convert between them through
the one writer (:class:`DatasetWriter`) and reader (:func:`open_dataset`), so nothing here knows HDF5.

Layout (LeRobot ``datasets/utils.py``, see docs/ or shared/reference/interop.md section 1)::

    meta/info.json  meta/stats.json  meta/tasks.parquet  meta/episodes/chunk-000/file-000.parquet
    data/chunk-000/file-000.parquet              # one row per frame, many episodes per file
    videos/<feature>/chunk-000/file-000.mp4      # one stream per camera, episodes back to back

The feature mapping (LeRobot feature <-> our ``obs/<key>``, ``actions``, ``rewards``, ``dones``,
``interventions``) is computed by default, printable as a table and overridable. ``pyarrow`` and ``av`` (PyAV)
are imported inside the functions: ``robosteer-dataset info`` and the training reader do not need them
(``pip install robosteer[lerobot]``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from robosteer.policies.data import lerobot_stats
from robosteer.policies.data.errors import DatasetError, hint
from robosteer.policies.data.hdf5 import DatasetWriter, open_dataset

CODEBASE_VERSION = "v3.0"
CONVERT_V21 = "python -m lerobot.scripts.convert_dataset_v21_to_v30 --repo-id=<id> --root=<dir>"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
# Filled in by LeRobot for every frame (``DEFAULT_FEATURES``): never user features.
AUTO_FEATURES: dict[str, dict[str, Any]] = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
SPECIAL = ("actions", "rewards", "dones", "interventions")  # our non-obs targets; anything else is an obs key
FLAG_TARGETS = ("rewards", "dones", "interventions")  # one value per frame: a shape (1,) feature
DEFAULT_SPECIAL = {
    "action": "actions",
    "next.reward": "rewards",
    "next.done": "dones",
    "complementary_info.is_intervention": "interventions",  # LeRobot's HIL-SERL transition field
}
CAMERA_PREFIX = "observation.images."
# Encoder settings LeRobot 0.6 records in a video feature's info (``video.<field>`` of its VideoEncoderConfig).
VIDEO_GOP, VIDEO_CRF, SVTAV1_PRESET = 2, 30, 12


@dataclass
class Row:
    """One line of the printed mapping: ``source (shape) dtype -> target`` (target None: not converted)."""

    source: str
    shape: tuple[int, ...]
    dtype: str
    target: str | None
    note: str = ""


def format_mapping(rows: list[Row]) -> str:
    """The mapping as an aligned table, e.g. ``observation.state  (6,) float32  -> obs/state``."""
    cells = [
        (
            r.source,
            f"({', '.join(map(str, r.shape))}{',' if len(r.shape) == 1 else ''})" if r.dtype else "",
            r.dtype,
        )
        for r in rows
    ]
    widths = [max((len(c[i]) for c in cells), default=0) for i in range(3)]
    lines = []
    for (src, shape, dtype), r in zip(cells, rows):
        target = r.target if r.target is not None else "(not converted)"
        note = f"  [{r.note}]" if r.note else ""
        lines.append(
            f"  {src.ljust(widths[0])}  {shape.ljust(widths[1])} {dtype.ljust(widths[2])}  -> {target}{note}"
        )
    return "\n".join(lines)


def _obs_target(name: str) -> str:
    """How a mapping value names a target: ``actions``/``rewards``/``dones``/``interventions`` or
    ``obs/<key>`` (prefix optional)."""
    name = str(name)
    return name if name in SPECIAL else f"obs/{name.removeprefix('obs/')}"


# ------------------------------------------------------------------------------------------------ reading
def _need(module: str) -> Any:
    """Import pyarrow / av lazily with an install hint (they are the ``[lerobot]`` extra)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise DatasetError(
            f"LeRobot conversion needs {module.split('.')[0]!r}: pip install 'robosteer[lerobot]' ({err})"
        ) from err


def _read_info(src: Path) -> dict[str, Any]:
    """``meta/info.json`` of a v3.x dataset, with clear errors for a missing dir, another format or v2.1."""
    if not src.exists():
        siblings = [p.name for p in src.parent.iterdir() if p.is_dir()] if src.parent.is_dir() else []
        raise DatasetError(
            f"src={src}: no such directory (expected a LeRobot v3.0 dataset dir holding meta/info.json)"
            + (hint(src.name, siblings) if siblings else "")
        )
    info_path = src / "meta" / "info.json"
    if not info_path.is_file():
        found = (
            "a file" if src.is_file() else f"a directory holding {sorted(p.name for p in src.iterdir())[:8]}"
        )
        raise DatasetError(
            f"src={src}: not a LeRobot dataset: {info_path} is missing; found {found} "
            f"(expected the dataset root with meta/info.json, data/, videos/)"
        )
    try:
        info = json.loads(info_path.read_text())
    except ValueError as err:
        raise DatasetError(f"{info_path}: not valid JSON ({err})") from err
    version = str(info.get("codebase_version", "?"))
    if not version.startswith("v3."):
        convert = f"; convert it with `{CONVERT_V21}`" if version.startswith("v2") else ""
        raise DatasetError(
            f"{info_path}: codebase_version is {version!r}, expected {CODEBASE_VERSION!r} (LeRobot dataset "
            f"format v3){convert}"
        )
    for key in ("fps", "features"):
        if key not in info:
            raise DatasetError(f"{info_path}: key {key!r} is missing (expected it in every v3.0 info.json)")
    return info


def _to_numpy(column: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """A parquet column (scalar, fixed-size list or nested lists) -> (n, *shape) numpy of ``dtype``."""
    import pyarrow as pa

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if isinstance(arr, pa.ExtensionArray):  # HF datasets' ArrayND
        arr = arr.storage
    n = len(arr)
    while (
        pa.types.is_list(arr.type)
        or pa.types.is_fixed_size_list(arr.type)
        or pa.types.is_large_list(arr.type)
    ):
        arr = arr.flatten()
    return np.asarray(arr.to_numpy(zero_copy_only=False)).astype(dtype, copy=False).reshape(n, *shape)


def _read_parquet_dir(folder: Path) -> Any:
    """Every ``chunk-*/file-*.parquet`` under ``folder`` as one pyarrow table (episode metadata)."""
    pa = _need("pyarrow")
    pq = _need("pyarrow.parquet")
    paths = sorted(folder.glob("chunk-*/file-*.parquet"))
    if not paths:
        raise DatasetError(f"{folder}: no chunk-*/file-*.parquet files (expected the per-episode metadata)")
    return pa.concat_tables([pq.read_table(p) for p in paths], promote_options="default")


def _read_tasks(src: Path) -> list[str]:
    """Task strings by task_index from ``meta/tasks.parquet`` (a pandas frame indexed by the task string)."""
    pq = _need("pyarrow.parquet")
    path = src / "meta" / "tasks.parquet"
    if not path.is_file():
        raise DatasetError(f"{path}: missing (expected the task strings with their task_index)")
    table = pq.read_table(path)
    text_cols = [
        n for n in table.column_names if n != "task_index" and "string" in str(table.schema.field(n).type)
    ]
    if "task_index" not in table.column_names or not text_cols:
        raise DatasetError(
            f"{path}: expected a task_index column and the task strings; got {table.column_names}"
        )
    col = "task" if "task" in text_cols else text_cols[0]
    tasks: dict[int, str] = dict(zip(table["task_index"].to_pylist(), table[col].to_pylist()))
    return [tasks[i] for i in sorted(tasks)]


class _VideoReader:
    """Decodes one episode's frames from a (possibly shared) mp4, by time, keeping the last file open."""

    def __init__(self) -> None:
        self._path: Path | None = None
        self._container: Any = None

    def close(self) -> None:
        if self._container is not None:
            self._container.close()
            self._container, self._path = None, None

    def frames(self, path: Path, targets: np.ndarray, fps: float, where: str) -> np.ndarray:
        """Frames at times ``targets`` (s, inside ``path``) as (T, H, W, 3) uint8; each must exist within half a
        frame period, so a file shorter than the episode says is an error, not a silent repeat."""
        av = _need("av")
        if not path.is_file():
            raise DatasetError(
                f"{where}: video file {path} is missing (expected {len(targets)} frames in it)"
            )
        if self._path != path:
            self.close()
            try:
                self._container = av.open(str(path))
            except av.error.FFmpegError as err:
                raise DatasetError(f"{where}: video file {path} cannot be opened ({err})") from err
            self._path = path
        container = self._container
        stream = container.streams.video[0]
        tol = 0.5 / fps
        start, stop = float(targets[0]) - tol, float(targets[-1]) + tol
        container.seek(max(int(start / stream.time_base), 0), stream=stream, backward=True, any_frame=False)
        times: list[float] = []
        images: list[np.ndarray] = []
        for frame in container.decode(stream):
            t = float(frame.time) if frame.time is not None else float("nan")
            if t < start:
                continue
            if t > stop:
                break
            times.append(t)
            images.append(frame.to_ndarray(format="rgb24"))  # (H, W, 3) uint8
        have = np.asarray(times)
        out = []
        for i, t in enumerate(targets):
            j = int(np.argmin(np.abs(have - t))) if len(have) else -1
            if j < 0 or abs(have[j] - t) >= tol:
                span = f"{have.min():.3f}-{have.max():.3f} s" if len(have) else "nothing"
                raise DatasetError(
                    f"{where}: video file {path} has no frame at {t:.3f} s (frame {i} of {len(targets)}); decoded "
                    f"{len(have)} frames in {span}: the video is shorter than the episode's length says"
                )
            out.append(images[j])
        return np.stack(out)


def default_import_target(name: str, feature: Mapping[str, Any]) -> str | None:
    """Our name for a LeRobot feature: ``action`` -> ``actions``, ``next.reward``/``next.done`` -> rewards/dones,
    ``complementary_info.is_intervention`` -> interventions, ``observation.images.<cam>`` ->
    ``obs/image/<cam>``, ``observation.<x>`` -> ``obs/<x>``; else None."""
    if name in DEFAULT_SPECIAL:
        return DEFAULT_SPECIAL[name]
    if feature.get("dtype") == "string" or name in AUTO_FEATURES:
        return None
    if name.startswith(CAMERA_PREFIX):
        return f"obs/image/{name.removeprefix(CAMERA_PREFIX)}"
    if name.startswith("observation."):
        return f"obs/{name.removeprefix('observation.')}"
    return None


def import_mapping(
    src: Path, features: Mapping[str, Mapping[str, Any]], mapping: Mapping[str, str | None] | None
) -> list[Row]:
    """The import mapping rows, defaults overridden by ``mapping`` ({feature: our name or None}); checked."""
    where = src / "meta" / "info.json"
    mapping = dict(mapping or {})
    for name in mapping:
        if name not in features:
            raise DatasetError(
                f"{where}: map names feature {name!r}, which the dataset does not have{hint(name, features)}"
            )
    rows = []
    for name, ft in features.items():
        target = _obs_target(mapping[name]) if mapping.get(name) is not None else None
        if name not in mapping:
            target = default_import_target(name, ft)
        note = ""
        if target is not None and ft.get("dtype") == "string":
            raise DatasetError(
                f"{where}: feature {name!r} is a string; only numeric, image and video features convert"
            )
        if target in FLAG_TARGETS and tuple(ft["shape"]) != (1,):
            raise DatasetError(
                f"{where}: feature {name!r} has shape {tuple(ft['shape'])}; {target} needs shape (1,)"
            )
        if ft.get("dtype") in ("video", "image") and target is not None:
            note = "mp4 frames decoded" if ft["dtype"] == "video" else "PNG frames decoded"
        rows.append(Row(name, tuple(ft["shape"]), str(ft["dtype"]), target, note))
    targets = [r.target for r in rows if r.target is not None]
    dup = sorted({t for t in targets if targets.count(t) > 1})
    if dup:
        srcs = [r.source for r in rows if r.target == dup[0]]
        raise DatasetError(
            f"{where}: features {srcs} all map to {dup[0]!r}; map each to its own name (or null)"
        )
    if "actions" not in targets:
        numeric = [n for n, f in features.items() if f.get("dtype") not in ("video", "image", "string")]
        raise DatasetError(
            f"{where}: no feature maps to 'actions' (LeRobot's is 'action'); map one, e.g. map={{<feature>: actions}}"
            f"{hint('action', numeric)}"
        )
    if not any(t.startswith("obs/") for t in targets):
        raise DatasetError(
            f"{where}: no feature maps to an obs key; map one, e.g. map={{observation.state: state}}"
        )
    return rows


def import_lerobot(
    src: str | os.PathLike,
    out: str | os.PathLike,
    mapping: Mapping[str, str | None] | None = None,
    *,
    overwrite: bool = False,
    echo: Any = None,
) -> dict[str, Any]:
    """Convert a LeRobot v3.0 dataset dir into one robomimic-layout HDF5 file; returns a summary.

    Per episode: mapped state/action features from the parquet rows, camera features decoded from the mp4 at
    ``from_timestamp + timestamp`` (what ``LeRobotDataset`` queries), the episode's task strings as attrs.
    LeRobot has no rewards/dones unless ``next.reward``/``next.done`` exist: then rewards are 0 and dones are 1 at
    each episode's last step (robomimic's convention), and ``data.attrs["filled"]`` says so.
    ``complementary_info.is_intervention`` (bool, or 0/1 numbers as some recorders write it) becomes each
    episode's ``interventions``; without it the file records none. fps, robot_type, tasks, the source and the
    mapping are file attributes. ``echo`` (e.g. ``print``) receives the mapping table.
    """
    pc = _need("pyarrow.compute")
    pq = _need("pyarrow.parquet")
    src, out = Path(src).expanduser(), Path(out).expanduser()
    info = _read_info(src)
    if out.exists() and not overwrite:
        raise DatasetError(f"out={out}: exists; pass overwrite=true to replace it (or choose another out=)")
    if out.is_dir():
        raise DatasetError(f"out={out}: is a directory, expected an .hdf5 file path")
    features: dict[str, dict[str, Any]] = {k: dict(v) for k, v in info["features"].items()}
    rows = import_mapping(src, features, mapping)
    fps = float(info["fps"])
    targets = {r.source: r.target for r in rows if r.target is not None}
    filled = {}
    if "rewards" not in targets.values():
        filled["rewards"] = "0.0 at every step (the dataset has no next.reward feature)"
    if "dones" not in targets.values():
        filled["dones"] = "1 at each episode's last step, else 0 (the dataset has no next.done feature)"
    if echo is not None:
        extra = [Row("(filled)", (), "", k, v) for k, v in filled.items()]
        echo(f"feature mapping ({src} -> {out}):\n{format_mapping(rows + extra)}")

    tasks = _read_tasks(src)
    episodes = _read_parquet_dir(src / "meta" / "episodes").sort_by("episode_index").to_pylist()
    data_path = str(info.get("data_path") or DATA_PATH)
    video_path = str(info.get("video_path") or VIDEO_PATH)
    restored = src / "meta" / "robosteer.json"  # written by export_lerobot: our env_args come back unchanged
    ours = json.loads(restored.read_text()) if restored.is_file() else {}
    env_args = ours.get("env_args") or {
        "env_name": f"lerobot:{src.resolve().name}",
        "type": 2,
        "env_kwargs": {"suite": "lerobot", "fps": info["fps"], "robot_type": info.get("robot_type")},
    }
    attrs = {
        "source": str(src.resolve()),
        "source_format": f"lerobot {info['codebase_version']}",
        "fps": info["fps"],
        "robot_type": info.get("robot_type") or "",
        "tasks": tasks,
        "feature_map": {r.source: r.target for r in rows},
        "filled": filled,
        "lerobot_features": features,
    }
    columns = [n for n, t in targets.items() if features[n]["dtype"] not in ("video",)]
    reader = _VideoReader()
    table_path, table = None, None
    # Written beside ``out`` and renamed at the end: a failed import leaves neither a half file nor a lost old one.
    tmp = out.with_name(out.name + ".importing")
    partial = tmp.with_name(tmp.name + ".partial")
    tmp.unlink(missing_ok=True)
    partial.unlink(missing_ok=True)
    try:
        # LeRobot puts every episode in "train" (splits {"train": "0:N"}): so do we (valid_fraction=0).
        with DatasetWriter(tmp, env_args, attrs, valid_fraction=0.0, overwrite=True) as writer:
            for ep in episodes:
                e = int(ep["episode_index"])
                where = f"{src}: episode {e}"
                path = src / data_path.format(
                    chunk_index=ep["data/chunk_index"], file_index=ep["data/file_index"]
                )
                if path != table_path:
                    if not path.is_file():
                        raise DatasetError(
                            f"{where}: data file {path} is missing (meta/episodes points at it)"
                        )
                    table_path = path
                    table = pq.read_table(
                        path, columns=[*columns, "episode_index", "frame_index", "timestamp"]
                    )
                rows_e = table.filter(pc.equal(table["episode_index"], e)).sort_by("frame_index")
                T = rows_e.num_rows
                if int(ep["length"]) != T or T == 0:
                    raise DatasetError(
                        f"{where}: {path} holds {T} frames of it, meta/episodes says length {ep['length']}"
                    )
                timestamps = _to_numpy(rows_e["timestamp"], (), "float64")  # (T,) s from the episode start
                arrays: dict[str, np.ndarray] = {}
                for name, target in targets.items():
                    ft = features[name]
                    if ft["dtype"] == "video":
                        key = f"videos/{name}"
                        vpath = src / video_path.format(
                            video_key=name,
                            chunk_index=ep[f"{key}/chunk_index"],
                            file_index=ep[f"{key}/file_index"],
                        )
                        ts = float(ep[f"{key}/from_timestamp"]) + timestamps
                        arrays[target] = reader.frames(vpath, ts, fps, f"{where}, feature {name!r}")
                    elif ft["dtype"] == "image":
                        arrays[target] = _decode_pngs(rows_e[name], f"{where}, feature {name!r}")
                    else:
                        arrays[target] = _to_numpy(rows_e[name], tuple(ft["shape"]), ft["dtype"])
                obs = {t.removeprefix("obs/"): a for t, a in arrays.items() if t.startswith("obs/")}
                rewards = arrays["rewards"].reshape(T) if "rewards" in arrays else np.zeros(T, np.float32)
                dones = arrays["dones"].reshape(T) if "dones" in arrays else (np.arange(T) == T - 1)
                interventions = arrays["interventions"].reshape(T) if "interventions" in arrays else None
                ep_tasks = list(ep.get("tasks") or [])
                writer.add_episode(
                    obs,
                    arrays["actions"],
                    rewards,
                    dones.astype(np.uint8),
                    attrs={
                        "task": ep_tasks[0] if ep_tasks else "",
                        "tasks": ep_tasks,
                        "lerobot_episode_index": e,
                    },
                    interventions=interventions,
                )
            summary = {"episodes": writer.num_episodes, "steps": writer.total_steps}
    except BaseException:
        tmp.unlink(missing_ok=True)
        partial.unlink(missing_ok=True)
        raise
    finally:
        reader.close()
    os.replace(tmp, out)
    return {**summary, "out": str(out), "fps": info["fps"], "tasks": tasks, "filled": filled, "mapping": rows}


def _decode_pngs(column: Any, where: str) -> np.ndarray:
    """``dtype: image`` features: HF Image structs with PNG bytes -> (T, H, W, 3) uint8."""
    import io

    import imageio.v2 as imageio

    frames = []
    for cell in column.to_pylist():
        if not cell or not cell.get("bytes"):
            raise DatasetError(
                f"{where}: an image cell holds no embedded bytes (path {cell and cell.get('path')!r})"
            )
        img = np.asarray(imageio.imread(io.BytesIO(cell["bytes"])))
        frames.append(img[..., :3] if img.ndim == 3 else np.repeat(img[..., None], 3, axis=-1))
    return np.stack(frames)  # (T, H, W, 3) uint8


# ------------------------------------------------------------------------------------------------ writing
def default_export_name(target: str) -> str:
    """LeRobot's name for ours: ``obs/state`` -> ``observation.state``, ``obs/image/<cam>`` ->
    ``observation.images.<cam>``, ``actions`` -> ``action``, ``rewards``/``dones`` -> ``next.reward``/``next.done``,
    ``interventions`` -> ``complementary_info.is_intervention``, other ``obs/<a/b>`` -> ``observation.<a.b>``
    (feature names must not contain ``/``)."""
    inverse = {v: k for k, v in DEFAULT_SPECIAL.items()}
    if target in inverse:
        return inverse[target]
    key = target.removeprefix("obs/")
    if key.startswith("image/"):
        return CAMERA_PREFIX + key.removeprefix("image/").replace("/", ".")
    return "observation." + key.replace("/", ".")


def control_rate(
    path: Path, attrs: Mapping[str, Any], env_args: Mapping[str, Any], fps: float | None = None
) -> int:
    """The frames per second an export is labelled with: ``fps`` if given, else the rate the file records.

    Recorded as the ``data`` group's ``fps`` attr (robosteer's collection and LeRobot imports write it) or as
    robomimic's ``env_args["env_kwargs"]["control_freq"]``. LeRobot stores an integer rate. No default: Meta-World
    steps at 80 Hz, robosuite at 20, a real arm at its own rate, and a wrong label plays everything at the wrong
    speed, so a file that records none is refused with the key to pass."""
    kwargs = env_args.get("env_kwargs") or {}
    if fps is not None:
        value, where = fps, "fps"
    elif attrs.get("fps") not in (None, ""):
        value, where = attrs["fps"], f"{path}: data.attrs['fps']"
    elif kwargs.get("control_freq") not in (None, ""):
        value, where = kwargs["control_freq"], f"{path}: env_args['env_kwargs']['control_freq']"
    else:
        known = (
            " (Meta-World steps at 80 Hz: 1 / (frame_skip 5 x timestep 0.0025 s))"
            if (kwargs.get("suite") == "metaworld")
            else ""
        )
        raise DatasetError(
            f"{path}: records no control rate (no data.attrs['fps'], no env_args['env_kwargs']['control_freq']); "
            f"pass fps=<frames per second the data was recorded at>{known}"
        )
    try:
        rate = float(value)
    except (TypeError, ValueError):
        rate = float("nan")
    if not (np.isfinite(rate) and rate > 0 and abs(rate - round(rate)) < 1e-6):
        raise DatasetError(
            f"{where} = {value!r}: expected a positive whole number of frames per second (LeRobot's fps is an int)"
        )
    return round(rate)


def video_info(height: int, width: int, channels: int, fps: int, codec: str) -> dict[str, Any]:
    """A video feature's ``info`` as LeRobot 0.6 writes it (``get_video_info`` with its encoder config): the
    stream's properties, the encoder settings as ``video.<field>``, and ``is_depth_map`` (which replaced the
    legacy ``video.is_depth_map`` that LeRobot now migrates with a warning)."""
    return {
        "video.height": height,
        "video.width": width,
        "video.codec": "av1" if codec == "libsvtav1" else codec,
        "video.pix_fmt": "yuv420p",
        "video.fps": fps,
        "video.channels": channels,
        "has_audio": False,
        "video.g": VIDEO_GOP,
        "video.crf": VIDEO_CRF,
        "video.preset": SVTAV1_PRESET if codec == "libsvtav1" else None,
        "video.fast_decode": 0,
        "video.video_backend": "pyav",
        "video.extra_options": {},
        "is_depth_map": False,
    }


def pick_codec() -> str:
    """AV1 (``libsvtav1``, LeRobot's default) when this PyAV build has it, else h264."""
    av = _need("av")
    return "libsvtav1" if "libsvtav1" in av.codecs_available else "h264"


class _VideoWriter:
    """One mp4 per camera; episodes are appended back to back with pts = global frame number (time base 1/fps)."""

    def __init__(self, path: Path, fps: int, height: int, width: int, codec: str) -> None:
        av = _need("av")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.container = av.open(str(path), "w")
        options = {"g": str(VIDEO_GOP), "crf": str(VIDEO_CRF)}
        options |= {"preset": str(SVTAV1_PRESET)} if codec == "libsvtav1" else {}
        self.stream = self.container.add_stream(codec, rate=fps, options=options)
        self.stream.width, self.stream.height, self.stream.pix_fmt = width, height, "yuv420p"
        self.fps, self.count = fps, 0
        self._av = av

    def add(self, frames: np.ndarray) -> tuple[float, float]:
        """Append (T, H, W, 3) uint8 frames; returns the episode's (from_timestamp, to_timestamp) in seconds."""
        start = self.count
        for img in frames:
            vf = self._av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")
            vf.pts, vf.time_base = self.count, Fraction(1, self.fps)
            for packet in self.stream.encode(vf):
                self.container.mux(packet)
            self.count += 1
        return start / self.fps, self.count / self.fps

    def close(self) -> None:
        for packet in self.stream.encode():
            self.container.mux(packet)
        self.container.close()


def export_mapping(
    path: Path,
    shapes: Mapping[str, tuple[tuple[int, ...], str]],
    mapping: Mapping[str, str | None] | None,
    skip: Mapping[str, str],
) -> list[Row]:
    """Export rows: our ``obs/<key>``/``actions``/``rewards``/``dones``/``interventions`` -> LeRobot feature
    names (None: skipped).
    ``mapping`` keys may omit ``obs/``; ``skip`` holds targets not exported by default, with the reason."""
    mapping = {_obs_target(k): v for k, v in (mapping or {}).items()}
    for name in mapping:
        if name not in shapes:
            raise DatasetError(
                f"{path}: map names {name!r}, which the file does not have{hint(name, shapes)}"
            )
    rows = []
    for name, (shape, dtype) in shapes.items():
        target = mapping[name] if name in mapping else (None if name in skip else default_export_name(name))
        note = skip.get(name, "") if name not in mapping else ""
        if target is not None:
            target = str(target)
            if "/" in target:
                raise DatasetError(
                    f"{path}: map gives {name!r} the feature name {target!r}; LeRobot feature names must not contain "
                    f"'/' (e.g. {target.replace('/', '.')!r})"
                )
            if target in AUTO_FEATURES:
                raise DatasetError(
                    f"{path}: map gives {name!r} the name {target!r}, which LeRobot fills in itself"
                )
            if name.startswith("obs/") and len(shape) == 3:
                note = "mp4 frames encoded"
                if dtype != "uint8" or shape[-1] != 3:
                    raise DatasetError(
                        f"{path}: {name} is ({', '.join(map(str, shape))}) {dtype}; a video feature needs uint8 "
                        f"(H, W, 3) frames; skip it with map={{{name}: null}}"
                    )
                if shape[0] % 2 or shape[1] % 2:
                    raise DatasetError(
                        f"{path}: {name} frames are {shape[0]}x{shape[1]}; yuv420p video needs even sizes; skip it "
                        f"with map={{{name}: null}}"
                    )
            elif len(shape) > 1:
                raise DatasetError(
                    f"{path}: {name} has per-step shape {shape}; only vectors and (H, W, 3) images export; skip it "
                    f"with map={{{name}: null}}"
                )
        rows.append(Row(name, shape, dtype, target, note))
    targets = [r.target for r in rows if r.target is not None]
    dup = sorted({t for t in targets if targets.count(t) > 1})
    if dup:
        raise DatasetError(
            f"{path}: several keys map to the feature {dup[0]!r}; give each its own name (or null)"
        )
    if not any(r.source == "actions" and r.target for r in rows):
        raise DatasetError(
            f"{path}: actions are not exported (map={{actions: null}}); LeRobot policies need them"
        )
    return rows


def export_lerobot(
    src: str | os.PathLike,
    out: str | os.PathLike,
    mapping: Mapping[str, str | None] | None = None,
    *,
    fps: int | None = None,
    overwrite: bool = False,
    codec: str | None = None,
    echo: Any = None,
) -> dict[str, Any]:
    """Write our HDF5 file as a LeRobot v3.0 dataset dir (one data/episodes/video file each); returns a summary.

    Image obs become ``dtype: video`` features (mp4, ``codec`` default :func:`pick_codec`), vectors become
    parquet columns; rewards/dones become ``next.reward``/``next.done`` unless they were filled in on import.
    When any episode records interventions they become the bool feature ``complementary_info.is_intervention``
    (shape [1], LeRobot's HIL-SERL name; ``map={interventions: ...}`` renames or drops it); the steps of
    episodes that record none are exported as False (a person never took over), so they re-import as all-False
    arrays.
    Each episode's task is its ``task`` attr (files from :func:`import_lerobot`) or ``env_args["env_name"]``.
    ``fps``: the data's control rate, see :func:`control_rate` (a file that records none is refused unless it
    is given: a guessed rate makes LeRobot play videos and timestamps at the wrong speed). ``meta/episodes``
    carries LeRobot's per-episode ``stats/<feature>/<stat>`` columns for every feature (see ``lerobot_stats``),
    which its dataset tools aggregate after a delete / split / merge. ``meta/robosteer.json`` keeps our env_args,
    so a re-import restores them. Written to ``<out>.partial`` and renamed, so a failed export leaves nothing.
    """
    pa = _need("pyarrow")
    pq = _need("pyarrow.parquet")
    out = Path(out).expanduser()
    codec = codec or pick_codec()
    with open_dataset(Path(src).expanduser()) as demos:
        if out.exists():
            lerobot_dir = (out / "meta" / "info.json").is_file() or (out.is_dir() and not any(out.iterdir()))
            if not overwrite:
                raise DatasetError(
                    f"out={out}: exists; pass overwrite=true to replace it (or choose another out=)"
                )
            if not lerobot_dir:
                raise DatasetError(
                    f"out={out}: exists and is not a LeRobot dataset dir (no meta/info.json); not replacing it"
                )
        file_attrs = demos.attrs
        fps = control_rate(demos.path, file_attrs, demos.env_args, fps)
        shapes = {f"obs/{k}": v for k, v in demos.obs_shapes.items()}
        shapes |= {
            "actions": ((int(demos.action_dim or 0),), "float32"),
            "rewards": ((1,), "float32"),
            "dones": ((1,), "bool"),
        }
        if demos.intervention_demos:
            shapes["interventions"] = ((1,), "bool")
        filled = json.loads(file_attrs["filled"]) if isinstance(file_attrs.get("filled"), str) else {}
        skip = {k: "filled on import, not exported" for k in filled}
        rows = export_mapping(demos.path, shapes, mapping, skip)
        if echo is not None:
            echo(f"feature mapping ({demos.path} -> {out}):\n{format_mapping(rows)}")
        known = (
            json.loads(file_attrs["lerobot_features"])
            if isinstance(file_attrs.get("lerobot_features"), str)
            else {}
        )
        named = {r.source: r.target for r in rows if r.target is not None}
        videos = {s: t for s, t in named.items() if s.startswith("obs/") and len(shapes[s][0]) == 3}

        features: dict[str, dict[str, Any]] = {}
        for s, t in named.items():
            shape, dtype = shapes[s]
            prev_names = known.get(t, {}).get("names")
            if s in videos:
                h, w, c = shape
                features[t] = {
                    "dtype": "video",
                    "shape": [h, w, c],
                    "names": ["height", "width", "channels"],
                    "info": video_info(h, w, c, fps, codec),
                }  # fmt: skip
            else:
                names = prev_names if isinstance(prev_names, list) and len(prev_names) == shape[0] else None
                features[t] = {"dtype": dtype, "shape": list(shape), "names": names}
        features |= AUTO_FEATURES

        tmp = out.with_name(out.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        data_file = tmp / DATA_PATH.format(chunk_index=0, file_index=0)
        data_file.parent.mkdir(parents=True)
        schema = _data_schema(pa, features)
        writers = {s: None for s in videos}  # opened at the first frame (its size)
        tasks: dict[str, int] = {}
        episodes: list[dict[str, Any]] = []
        episode_stats: list[dict[str, dict[str, np.ndarray]]] = []
        index = 0
        try:
            with pq.ParquetWriter(data_file, schema, compression="snappy") as pw:
                for e, name in enumerate(demos.demo_names):
                    ep = demos.episode(name, [s.removeprefix("obs/") for s in named if s.startswith("obs/")])
                    T = len(ep["actions"])
                    task = str(ep["attrs"].get("task") or demos.env_args.get("env_name", ""))
                    task_index = tasks.setdefault(task, len(tasks))
                    values = {"actions": ep["actions"], "rewards": ep["rewards"], "dones": ep["dones"]}
                    values["interventions"] = (  # an episode that records none: the policy acted throughout
                        ep["interventions"] if ep["interventions"] is not None else np.zeros(T, bool)
                    )
                    values |= {f"obs/{k}": v for k, v in ep["obs"].items()}
                    cols: dict[str, np.ndarray] = {}
                    for s, t in named.items():
                        if s in videos:
                            continue
                        v = values[s]
                        if v is None:
                            raise DatasetError(
                                f"{demos.path}: data/{name}/{s} is missing; skip it with map={{{s}: null}}"
                            )
                        cols[t] = np.asarray(v).reshape(T, *shapes[s][0]).astype(features[t]["dtype"])
                    cols |= {
                        "timestamp": (np.arange(T) / fps).astype(np.float32),
                        "frame_index": np.arange(T, dtype=np.int64),
                        "episode_index": np.full(T, e, dtype=np.int64),
                        "index": np.arange(index, index + T, dtype=np.int64),
                        "task_index": np.full(T, task_index, dtype=np.int64),
                    }
                    pw.write_table(
                        _to_table(pa, schema, cols, features)
                    )  # one row group per episode, as LeRobot
                    ep_stats = {t: lerobot_stats.vector_stats(v) for t, v in cols.items()}
                    row: dict[str, Any] = {
                        "episode_index": e, "tasks": [task], "length": T, "data/chunk_index": 0, "data/file_index": 0,
                        "dataset_from_index": index, "dataset_to_index": index + T,
                    }  # fmt: skip
                    for s, t in videos.items():
                        frames = values[s]  # (T, H, W, 3) uint8
                        if writers[s] is None:
                            vpath = tmp / VIDEO_PATH.format(video_key=t, chunk_index=0, file_index=0)
                            writers[s] = _VideoWriter(vpath, fps, frames.shape[1], frames.shape[2], codec)
                        t0, t1 = writers[s].add(frames)
                        row |= {f"videos/{t}/chunk_index": 0, f"videos/{t}/file_index": 0}
                        row |= {f"videos/{t}/from_timestamp": t0, f"videos/{t}/to_timestamp": t1}
                        ep_stats[t] = lerobot_stats.image_stats(frames)
                    row |= lerobot_stats.flatten(ep_stats)
                    row |= {"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0}
                    episode_stats.append(ep_stats)
                    episodes.append(row)
                    index += T
        finally:
            for w in writers.values():
                if w is not None:
                    w.close()
        stats = lerobot_stats.to_json(lerobot_stats.aggregate(episode_stats))
        _write_meta(pa, pq, tmp, episodes, tasks, stats)
        info = {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": file_attrs.get("robot_type") or None,
            "total_episodes": len(episodes),
            "total_frames": index,
            "total_tasks": len(tasks),
            "chunks_size": 1000,
            "data_files_size_in_mb": 100,
            "video_files_size_in_mb": 200,
            "fps": fps,
            "splits": {"train": f"0:{len(episodes)}"},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if videos else None,
            "features": features,
        }
        (tmp / "meta" / "info.json").write_text(json.dumps(info, indent=4))
        ours = {"source": str(demos.path.resolve()), "env_args": demos.env_args, "video_codec": codec}
        (tmp / "meta" / "robosteer.json").write_text(json.dumps(ours, indent=4))
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return {"out": str(out), "episodes": len(episodes), "frames": index, "fps": fps, "codec": codec,
            "tasks": list(tasks), "mapping": rows}  # fmt: skip


def _arrow_type(pa: Any, ft: Mapping[str, Any]) -> Any:
    """HF datasets' arrow types: shape (1,) -> scalar, (n,) -> fixed_size_list (what LeRobot writes)."""
    scalar = pa.from_numpy_dtype(np.dtype(ft["dtype"]))
    return scalar if list(ft["shape"]) == [1] else pa.list_(scalar, int(ft["shape"][0]))


def _data_schema(pa: Any, features: Mapping[str, Mapping[str, Any]]) -> Any:
    """The data parquet schema, with the ``huggingface`` metadata HF datasets reads its Features from."""
    fields, hf = [], {}
    for name, ft in features.items():
        if ft["dtype"] == "video":
            continue
        fields.append(pa.field(name, _arrow_type(pa, ft)))
        value = {"dtype": ft["dtype"], "_type": "Value"}
        hf[name] = (
            value
            if list(ft["shape"]) == [1]
            else {"feature": value, "length": ft["shape"][0], "_type": "List"}
        )
    return pa.schema(fields, metadata={"huggingface": json.dumps({"info": {"features": hf}})})


def _to_table(pa: Any, schema: Any, cols: Mapping[str, np.ndarray], features: Mapping[str, Any]) -> Any:
    arrays = []
    for field in schema:
        v = cols[field.name]
        if pa.types.is_fixed_size_list(field.type):
            arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), field.type.list_size))
        else:
            arrays.append(pa.array(v.reshape(-1), type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _write_meta(
    pa: Any,
    pq: Any,
    root: Path,
    episodes: list[dict[str, Any]],
    tasks: Mapping[str, int],
    stats: Mapping[str, Any],
) -> None:
    """meta/episodes/chunk-000/file-000.parquet, meta/tasks.parquet (pandas frame indexed by ``task``), stats.json."""
    path = root / EPISODES_PATH.format(chunk_index=0, file_index=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(episodes), path)
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": None},
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
        ],
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }  # fmt: skip
    table = pa.table(
        {"task_index": pa.array(list(tasks.values()), pa.int64()), "task": pa.array(list(tasks), pa.string())}
    ).replace_schema_metadata({"pandas": json.dumps(pandas_meta)})
    pq.write_table(table, root / "meta" / "tasks.parquet")
    (root / "meta" / "stats.json").write_text(json.dumps(stats, indent=4))
