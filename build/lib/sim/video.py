"""Writing rollout videos (mp4, H.264 via imageio's ffmpeg) for evaluation runs and dataset previews."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

DEFAULT_FPS = 30  # Meta-World runs at 80 control steps/s; 30 fps shows an episode slowly enough to watch


def write_video(frames: np.ndarray | Sequence[np.ndarray], path: str | Path, fps: int = DEFAULT_FPS) -> Path:
    """Write (T, H, W, 3) uint8 frames to ``path`` (an .mp4; parent folders are created); return the path.

    Odd frame sizes are padded by one black row/column, since H.264 needs even sizes.
    """
    import imageio.v2 as imageio

    video = np.asarray(frames)  # (T, H, W, 3)
    if video.ndim != 4 or video.shape[-1] != 3 or len(video) == 0:
        raise ValueError(f"frames of shape {video.shape} are not valid: expected (T, H, W, 3) with T >= 1")
    if video.dtype != np.uint8:
        raise ValueError(f"frames of dtype {video.dtype} are not valid: expected uint8 (0..255)")
    pad_h, pad_w = video.shape[1] % 2, video.shape[2] % 2
    if pad_h or pad_w:
        video = np.pad(video, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # imageio warns about macro-block resizing we have made unneeded
        imageio.mimwrite(path, list(video), fps=fps, codec="libx264", quality=7, macro_block_size=1)
    return path
