"""robosteer-dataset: inspect, validate, render and convert robomimic-layout demonstration files.

    robosteer-dataset info|validate|video path=FILE [out=DIR] [episode=N] [key=image/corner2]
    robosteer-dataset import src=LEROBOT_DIR out=FILE.hdf5 [map={...}] [overwrite=true]
    robosteer-dataset export src=FILE.hdf5 out=LEROBOT_DIR [map={...}] [fps=N] [overwrite=true]

The first word is the command (``cmd=`` in configs/dataset.yaml); everything else is a Hydra override.
These commands write no run directory (``video`` writes only its mp4 files, import/export only ``out``).
import/export convert LeRobot dataset format v3.0 (``policies/data/lerobot.py``) and print the feature mapping.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from robosteer.policies.data import DatasetError, DemoFile, open_dataset
from robosteer.policies.data.hdf5 import IMAGE_LAYOUTS
from robosteer.scripts.common import console_main

COMMANDS = ("info", "validate", "video", "import", "export")
CONVERT = ("import", "export")


def info_text(demos: DemoFile) -> str:
    """The ``info`` table: sizes, obs keys with shapes/dtypes, action dim, success rate, splits, env_args."""
    s = demos.summary()
    rate = "n/a (no 'success' attr)" if s["success_rate"] is None else f"{s['success_rate']:.1%}"
    rows: list[tuple[str, Any]] = [
        ("file", demos.path),
        ("episodes", s["episodes"]),
        ("steps", s["steps"]),
        ("episode length", f"mean {s['mean_length']:.1f}, min {s['min_length']}, max {s['max_length']}"),
        ("success rate", rate),
        ("action dim", s["action_dim"]),
        ("splits", ", ".join(f"{k}: {v}" for k, v in sorted(s["splits"].items())) or "none (no mask/ group)"),
    ]
    fps = demos.attrs.get("fps")
    rows.append(("control rate", "not recorded (export needs fps=)" if fps is None else f"{fps} Hz"))
    rows.append(("image layout", f"{demos.image_layout}: {IMAGE_LAYOUTS[demos.image_layout]}"))
    for key, (shape, dtype) in demos.obs_shapes.items():
        stored = demos.obs_paths[key]
        read_as = f" (read as {key})" if stored != key else ""
        rows.append((f"obs/{stored}", f"(T, {', '.join(map(str, shape))}) {dtype}{read_as}"))
    rows.append(("env_args", json.dumps(s["env_args"], sort_keys=True)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def render_videos(demos: DemoFile, episode: int | str, out: Path, key: str | None, fps: int) -> list[Path]:
    """Write episode ``episode``'s image obs as mp4 files (one per image key); returns their paths."""
    import imageio.v2 as imageio

    image_keys = [k for k, (shape, dtype) in demos.obs_shapes.items() if dtype == "uint8" and len(shape) == 3]
    if key is not None:
        demos.check_obs_keys([key])
        if key not in image_keys:
            raise DatasetError(
                f"{demos.path}: obs key {key!r} is not an image (uint8 (T, H, W, C)); image keys: {image_keys}"
            )
        image_keys = [key]
    if not image_keys:
        raise DatasetError(
            f"{demos.path}: the dataset has no image obs keys (obs keys: {demos.obs_keys}); nothing to render. "
            f"Collect with obs=image or obs=state+image to record camera frames."
        )
    ep = demos.episode(episode, image_keys, check=False)  # frames only: render even a damaged file
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in image_keys:
        frames = ep["obs"][k]  # (T, H, W, C) uint8
        path = out / f"{ep['name']}_{k.replace('/', '_')}.mp4"
        imageio.mimwrite(path, list(frames), fps=fps, macro_block_size=2)
        paths.append(path)
    return paths


def run(cfg: DictConfig) -> int:
    """Run one command from a composed config; returns the exit status (errors are printed, not raised)."""
    cmd, usage = str(cfg.cmd), None
    if cmd not in COMMANDS:
        usage = f"robosteer-dataset: unknown command {cmd!r}; expected one of {', '.join(COMMANDS)}"
    elif cfg.get("fps") is not None and (
        not isinstance(cfg.fps, int) or isinstance(cfg.fps, bool) or cfg.fps < 1
    ):
        usage = (
            f"robosteer-dataset {cmd}: fps={cfg.fps!r}: expected an integer >= 1 (or null for the default)"
        )
    elif cmd in CONVERT:
        return convert(cfg)
    elif OmegaConf.is_missing(cfg, "path") or cfg.get("path") is None:
        usage = f"robosteer-dataset {cmd}: give the dataset file, e.g. path=runs/demos/demos.hdf5"
    if usage:
        print(usage, file=sys.stderr)
        return 2
    path = Path(str(cfg.path)).expanduser()
    try:
        with open_dataset(path) as demos:
            if cmd == "info":
                print(info_text(demos))
            elif cmd == "validate":
                if cfg.get("deep", True):
                    demos.deep_check()
                print(
                    f"valid: {path} ({demos.num_episodes} episodes, {demos.total_steps} steps; "
                    f"{IMAGE_LAYOUTS[demos.image_layout]})"
                )
            else:
                out = Path(str(cfg.out)) if cfg.get("out") else path.parent / "videos"
                episode = cfg.episode if isinstance(cfg.episode, int) else str(cfg.episode)
                for p in render_videos(demos, episode, out, cfg.get("key"), int(cfg.fps or 20)):
                    print(f"wrote {p}")
    except DatasetError as err:
        label = "INVALID" if cmd == "validate" else "error"
        print(f"robosteer-dataset {cmd}: {label}: {err}", file=sys.stderr)
        return 2  # a bad or missing file is the user's to fix: exit 2
    return 0


def convert(cfg: DictConfig) -> int:
    """``import``/``export``: LeRobot v3.0 <-> our HDF5; prints the mapping and a summary; returns the status."""
    from robosteer.policies.data.lerobot import export_lerobot, import_lerobot

    cmd = str(cfg.cmd)
    example = (
        "src=data/lerobot/pusht out=runs/pusht.hdf5"
        if cmd == "import"
        else "src=runs/demos/demos.hdf5 out=runs/lerobot"
    )
    missing = [k for k in ("src", "out") if not cfg.get(k)]
    if missing:
        print(f"robosteer-dataset {cmd}: give {' and '.join(missing)}, e.g. {example}", file=sys.stderr)
        return 2
    raw = cfg.get("map")
    raw = (
        OmegaConf.to_container(raw, resolve=True) if OmegaConf.is_dict(raw) else ({} if raw is None else raw)
    )
    if not isinstance(raw, dict):
        print(
            f"robosteer-dataset {cmd}: map must be a dict, e.g. map={{observation.state: state}}",
            file=sys.stderr,
        )
        return 2
    mapping = {str(k): None if v is None else str(v) for k, v in raw.items()}
    src, out = Path(str(cfg.src)).expanduser(), Path(str(cfg.out)).expanduser()
    try:
        if cmd == "import":
            s = import_lerobot(src, out, mapping, overwrite=bool(cfg.overwrite), echo=print)
            obs_keys = sorted(
                {r.target.removeprefix("obs/") for r in s["mapping"] if (r.target or "").startswith("obs/")}
            )
            print(
                f"wrote {out}: {s['episodes']} episodes, {s['steps']} steps, fps {s['fps']}, tasks {s['tasks']}"
            )
            print(
                f"train: robosteer-train dataset={out} obs_keys=[{','.join(obs_keys)}]  (leave task= unset: a LeRobot "
                f"dataset has no simulator task, so evaluation stays off)"
            )
        else:
            fps = int(cfg.fps) if cfg.get("fps") else None
            s = export_lerobot(src, out, mapping, fps=fps, overwrite=bool(cfg.overwrite), echo=print)
            print(
                f"wrote {out}: {s['episodes']} episodes, {s['frames']} frames, fps {s['fps']}, video codec {s['codec']}"
            )
    except (DatasetError, FileExistsError) as err:
        print(f"robosteer-dataset {cmd}: error: {err}", file=sys.stderr)
        return 2
    return 0


def _main(cfg: DictConfig) -> None:
    if code := run(cfg):
        raise SystemExit(code)


USAGE = "robosteer-dataset info|validate|video path=FILE | import|export src=... out=... (--help: every key)"


def peel_command(argv: list[str]) -> list[str]:
    """``robosteer-dataset info path=X`` -> ``robosteer-dataset cmd=info path=X`` (Hydra takes key=value only).

    No subcommand, or a word that is none, is a :class:`UsageError` that lists them (nearest first)."""
    import difflib

    from robosteer.scripts.common import UsageError

    first = argv[1] if len(argv) > 1 else ""
    if first in COMMANDS:
        return [argv[0], f"cmd={first}", *argv[2:]]
    if first.startswith("-") or any(a.startswith("cmd=") for a in argv[1:]):
        return argv
    if not first or "=" in first:
        raise UsageError(f"give a subcommand first, one of {', '.join(COMMANDS)}: {USAGE}")
    near = difflib.get_close_matches(first, COMMANDS, n=1, cutoff=0.4)
    hint = f"; nearest valid choice: {near[0]!r}" if near else ""
    raise UsageError(f"{first!r} is not a subcommand: expected one of {', '.join(COMMANDS)}{hint}")


def main() -> None:
    """Console-script entry point."""
    from robosteer.scripts.common import UsageError

    try:
        sys.argv = peel_command(sys.argv)
    except UsageError as err:
        print(f"robosteer-dataset: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    console_main("robosteer-dataset", "dataset", _main)


if __name__ == "__main__":
    main()
