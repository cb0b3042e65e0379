"""The run's metric stream: the one place a TensorBoard writer is built, and where Weights & Biases plugs in.

A resumed run purges the events written after its checkpoint, so its curves read like one uninterrupted
run's. ``logger=wandb`` also streams scalars, evaluation videos and the run's config to W&B (TensorBoard is
written either way); ``wandb_mode=offline`` needs no network; ``wandb sync <run_dir>/wandb/offline-run-*``
uploads it later.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOGGERS = ("tensorboard", "wandb")
WANDB_MODES = ("online", "offline", "disabled")


@dataclass(frozen=True)
class LogSettings:
    """Where a run's metrics go besides ``<run_dir>/tb``."""

    logger: str = "tensorboard"  # tensorboard | wandb (W&B beside TensorBoard)
    # null (ours): W&B's own convention decides, WANDB_PROJECT / WANDB_MODE, else robosteer / online
    wandb_project: str | None = None
    wandb_mode: str | None = None  # online | offline (no network; `wandb sync` uploads later) | disabled

    def __post_init__(self) -> None:
        for key, known in (("logger", LOGGERS), ("wandb_mode", WANDB_MODES)):
            if (value := getattr(self, key)) not in known and not (key == "wandb_mode" and value is None):
                raise ValueError(f"{key}={value!r} is not known: expected one of {', '.join(known)}")


class WandbRun:
    """One W&B run per run directory. Its id is kept in ``<run_dir>/wandb_id``, so ``resume=true`` continues
    the same W&B run; every scalar is logged against the run's own step (``step``), not W&B's call counter."""

    def __init__(self, run_dir: Path, settings: LogSettings, resume: bool) -> None:
        try:
            import wandb
        except ImportError:
            raise ValueError(
                "logger=wandb needs the wandb package: pip install wandb==0.31.0 (or logger=tensorboard)"
            ) from None
        self._wandb = wandb
        id_file = run_dir / "wandb_id"
        run_id = id_file.read_text().strip() if resume and id_file.exists() else secrets.token_hex(4)
        id_file.write_text(run_id + "\n")
        config: dict[str, Any] = {"run_dir": str(run_dir.resolve())}
        if (run_dir / "config.yaml").exists():  # written by the command before the run starts
            import yaml

            config.update(yaml.safe_load((run_dir / "config.yaml").read_text()) or {})
        self.run = wandb.init(
            project=settings.wandb_project or os.environ.get("WANDB_PROJECT", "robosteer"),
            name=run_dir.name,
            id=run_id,
            resume="allow",
            dir=os.environ.get("WANDB_DIR") or str(run_dir),
            mode=settings.wandb_mode or os.environ.get("WANDB_MODE", "online"),
            config=config,
            settings=wandb.Settings(silent=True, console="off"),
        )
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")

    def scalar(self, name: str, value: float, step: int) -> None:
        self.run.log({"step": step, name: value})

    def video(self, name: str, path: str | Path, step: int) -> None:
        self.run.log({"step": step, name: self._wandb.Video(str(path))})

    def close(self) -> None:
        self.run.finish()


class RunLog:
    """TensorBoard events under ``<run_dir>/tb`` (+ a W&B run with ``logger=wandb``); ``resume_step`` > 0
    drops TensorBoard events logged after it."""

    def __init__(
        self, run_dir: str | Path, resume_step: int = 0, settings: LogSettings | None = None
    ) -> None:
        from torch.utils.tensorboard import SummaryWriter

        settings = settings or LogSettings()
        wandb = settings.logger == "wandb"
        self._wandb = WandbRun(Path(run_dir), settings, resume_step > 0) if wandb else None  # may refuse
        self._writer = SummaryWriter(str(Path(run_dir) / "tb"), purge_step=resume_step or None)

    def scalar(self, name: str, value: Any, step: int) -> None:
        """One point of curve ``name`` (e.g. ``train/loss``) at ``step``."""
        self._writer.add_scalar(name, value, step)
        if self._wandb is not None:
            self._wandb.scalar(name, float(value), step)

    def video(self, name: str, path: str | Path, step: int) -> None:
        """An evaluation's mp4 at ``step``: W&B only (TensorBoard runs keep its path in ``metrics.json``)."""
        if self._wandb is not None and Path(path).exists():
            self._wandb.video(name, path, step)

    def close(self) -> None:
        self._writer.close()
        if self._wandb is not None:
            self._wandb.close()
            self._wandb = None
