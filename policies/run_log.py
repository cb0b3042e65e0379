"""The run's metric stream: the one place a TensorBoard writer is built (and where other loggers plug in).

Training, value learning and online steering each log scalars against their own step counter (gradient
steps or env steps). A resumed run purges the events written after its checkpoint, so the curves of an
interrupted and resumed run read like those of one uninterrupted run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class RunLog:
    """TensorBoard events under ``<run_dir>/tb``; ``resume_step`` > 0 drops events logged after it."""

    def __init__(self, run_dir: str | Path, resume_step: int = 0) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(str(Path(run_dir) / "tb"), purge_step=resume_step or None)

    def scalar(self, name: str, value: Any, step: int) -> None:
        """One point of curve ``name`` (e.g. ``train/loss``) at ``step``."""
        self._writer.add_scalar(name, value, step)

    def close(self) -> None:
        self._writer.close()
