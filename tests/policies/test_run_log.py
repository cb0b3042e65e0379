"""The metric stream: TensorBoard always, and a Weights & Biases run with ``logger=wandb`` (tested offline: no
network, no account) holding the scalars, the evaluation videos and the config, continued on resume."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from robosteer.policies.engine import RunEngine
from robosteer.policies.run_log import LogSettings

OFFLINE = LogSettings(logger="wandb", wandb_mode="offline")


def _wandb_record(run_dir: Path, expect: tuple[bytes, ...] = (), wait_s: float = 30.0) -> tuple[str, bytes]:
    """The W&B run id kept in the run directory and the bytes of its offline run file. W&B's service process
    writes that file on its own: once in a full suite it held only its 7-byte header when ``finish()`` had
    returned, so this waits (up to ``wait_s``) until every ``expect`` is in it, or records follow the header."""
    run_id = (run_dir / "wandb_id").read_text().strip()
    pattern = f"offline-run-*-{run_id}/run-{run_id}.wandb"
    deadline = time.monotonic() + wait_s
    while True:
        files = sorted((run_dir / "wandb").glob(pattern))
        data = b"".join(f.read_bytes() for f in files)
        written = all(t in data for t in expect) if expect else all(f.stat().st_size > 7 for f in files)
        if (files and written) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert files, sorted(p.name for p in (run_dir / "wandb").iterdir())
    return run_id, data


def _save(run: RunEngine, step: int) -> None:
    w = torch.ones(2)
    run.save_latest({"m": {"w": w}}, {"kind": "test"}, {"step": step}, step, [("w", w)])


def test_wandb_offline_run_holds_scalars_eval_video_and_config_and_resume_continues_it(tmp_path):
    pytest.importorskip("wandb")
    import imageio

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("policy:\n  name: diffusion\nsteps: 7\n")
    video = tmp_path / "step_0000002.mp4"
    imageio.mimwrite(video, np.zeros((4, 16, 16, 3), np.uint8), fps=4)
    run = RunEngine(run_dir, what="test", total=7, log_settings=OFFLINE)
    run.start(0)
    run.scalar("train/loss", 0.5, 1)
    run.evaluate(lambda: {"success_rate": 0.25, "videos": [str(video)]}, 2, seed=0, best=lambda m: ({}, {}))
    _save(run, 2)
    run.finish()
    texts = (b"train/loss", b"eval/success_rate", b"eval/video", b"diffusion", str(run_dir).encode())
    run_id, data = _wandb_record(run_dir, texts)
    for text in texts:
        assert text in data, text
    media = list((run_dir / "wandb").glob(f"offline-run-*-{run_id}/files/media/videos/eval/video_*.mp4"))
    assert len(media) == 1
    assert (run_dir / "tb").is_dir()  # TensorBoard's events are written either way

    resumed = RunEngine(run_dir, what="test", total=7, resume=True, log_settings=OFFLINE)
    resumed.start(2)
    resumed.scalar("train/loss", 0.25, 3)
    resumed.finish()
    assert _wandb_record(run_dir)[0] == run_id  # the same W&B run, continued

    fresh = RunEngine(tmp_path / "other", what="test", total=7, log_settings=OFFLINE)
    fresh.start(0)
    fresh.finish()
    assert _wandb_record(tmp_path / "other")[0] != run_id


def test_settings_name_the_valid_choices():
    with pytest.raises(ValueError, match="logger='wandbb' is not known: expected one of tensorboard, wandb"):
        LogSettings(logger="wandbb")
    with pytest.raises(ValueError, match="wandb_mode='ofline' is not known: expected one of online, offline"):
        LogSettings(logger="wandb", wandb_mode="ofline")


def test_wandb_missing_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed
    run = RunEngine(tmp_path, what="test", total=1, log_settings=OFFLINE)
    with pytest.raises(
        ValueError, match=r"logger=wandb needs the wandb package: pip install wandb==0\.31\.0"
    ):
        run.start(0)
    run.close()
