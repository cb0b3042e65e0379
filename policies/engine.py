"""One run's lifecycle, shared by every learning loop: imitation, value learning and online steering.

Each loop owns where its batches come from and what one update is; :class:`RunEngine` owns the rest:
refusing to overwrite a run, resuming from ``checkpoints/latest``, the metric stream, progress bar and
wall-time budget, periodic evaluation with every RNG forked and its ``best`` record, Ctrl-C as a graceful
stop, atomic ``latest`` / ``best`` / ``history`` checkpoints and ``metrics.json``.

Why the NaN guard: one NaN in one action of a dataset once trained to the end, exited 0 and wrote (then
deployed) a checkpoint of mostly NaN weights. Losses are checked at every update and weights before every
save, raising :class:`NonFiniteError`, so the checkpoint on disk stays the last good one.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from robosteer.policies.checkpoint import Checkpoint, jsonable, load_checkpoint, save_checkpoint
from robosteer.policies.rng import get_rng_state, seed_everything, set_rng_state
from robosteer.policies.run_log import LogSettings, RunLog

log = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
    """A loss, gradient norm or weight became NaN/inf: the run stopped and wrote no checkpoint after it."""


DEVICES = ("cpu", "cuda", "auto")


def resolve_device(name: str | torch.device) -> torch.device:
    """The device for ``device=cpu | cuda[:N] | auto`` (auto: cuda when available); fails early."""
    text = str(name)
    kind = text.split(":", 1)[0]
    if kind not in DEVICES or (kind != "cuda" and ":" in text):
        raise ValueError(f"device={text!r} is not known: expected one of {DEVICES} (or cuda:N)")
    if kind == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={text!r} needs CUDA, which this torch build / machine does not have: "
            f"expected one of {DEVICES} (device=auto picks cuda only when available)"
        )
    return torch.device(text)


def losses(info: Mapping[str, Any]) -> dict[str, Any]:
    """An update's ``*loss`` entries: those must stay finite (other diagnostics may be NaN by design)."""
    return {k: v for k, v in info.items() if k.endswith("loss")}


def restore_generator(gen: torch.Generator, saved: Any, reseed: int) -> None:
    """Put a checkpoint's generator state back into ``gen``. A state written on another device kind (CPU
    Mersenne Twister vs CUDA Philox) cannot be: ``gen`` is reseeded with ``reseed``, with a warning, and the
    run continues, but not bit for bit."""
    state = torch.as_tensor(saved, dtype=torch.uint8)
    if state.numel() == gen.get_state().numel():
        gen.set_state(state)
        return
    log.warning(
        "resume on device=%s: the checkpoint's generator state is from another device kind; reseeding it "
        "(the run continues, but not bit for bit)",
        gen.device.type,
    )
    gen.manual_seed(reseed)


STOP_SIGNALS = ("SIGINT", "SIGTERM")  # Ctrl-C; what kill, docker stop, systemd and SLURM's preemption send


@contextmanager
def stop_on_interrupt() -> Iterator[threading.Event]:
    """Ctrl-C or SIGTERM as a flag the loop polls between units of work; a second one raises KeyboardInterrupt.

    Why: CPython drops a KeyboardInterrupt that lands in a weakref callback or ``__del__``, and the loop ran
    on; a flag cannot be lost. SIGTERM, whose default kills the run where it stands, stops it the same way, so
    ``kill``, ``docker stop`` or a scheduler's preemption leave ``checkpoints/latest`` at the step in flight (a
    background job started from a script ignores SIGINT: SIGTERM is how it is stopped). Off the main thread
    nothing is installed; a signal already ignored stays ignored.
    """
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {}
    for name in STOP_SIGNALS:
        signum = getattr(signal, name)
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, handle)
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def scalar_value(v: Any) -> float | None:
    """``v`` as a float when it is one number (a Python or numpy scalar, a one-element tensor), else None."""
    if isinstance(v, torch.Tensor) and v.numel() == 1:
        return float(v.detach())
    if isinstance(v, bool | int | float | np.integer | np.floating):
        return float(v)
    return None


@dataclass
class Best:
    """The evaluation that scored best so far: what ``checkpoints/best`` holds."""

    success_rate: float = -1.0
    step: int = -1
    metrics: dict[str, Any] = field(default_factory=dict)

    def state(self) -> dict[str, Any]:
        return {"success_rate": self.success_rate, "step": self.step, "metrics": jsonable(self.metrics)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None) -> Best:
        """Also reads steering checkpoints written before the engine kept ``best`` (``env_steps``, no metrics)."""
        b = dict(state or {})
        step = b.get("step", b.get("env_steps", -1))
        return cls(float(b.get("success_rate", -1.0)), int(step), dict(b.get("metrics", {})))


class RunSettings(Protocol):
    """What a loop's config tells the engine (TrainConfig and OnlineRunConfig have these fields)."""

    progress: bool
    max_minutes: float | None  # wall-time budget: stop with a checkpoint
    keep_every: int  # > 0: keep checkpoints/history/<step> at the first save past each multiple


class RunEngine:
    """The lifecycle of the run in ``out_dir``; ``main=False`` (a DDP rank > 0) writes nothing.

    ``what`` names the run in errors ("training"), ``unit`` what its steps count ("env step"), ``total`` sizes
    the progress bar; without ``settings``: no bar, no wall-time budget, no history.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike,
        *,
        what: str,
        total: int,
        resume: bool = False,
        unit: str = "step",
        desc: str = "train",
        settings: RunSettings | None = None,
        log_settings: LogSettings | None = None,
        main: bool = True,
    ) -> None:
        self.out = Path(out_dir)
        self.ckpt_dir = self.out / "checkpoints"
        self.latest = self.ckpt_dir / "latest"
        self.what, self.unit, self.total, self.desc = what, unit, total, desc
        self.main = main
        self.show_progress = settings.progress if settings is not None else False
        self.max_minutes = settings.max_minutes if settings is not None else None
        self.keep_every = settings.keep_every if settings is not None else 0
        if log_settings is None and settings is not None and hasattr(settings, "logger"):  # the loop's config
            log_settings = LogSettings(settings.logger, settings.wandb_project, settings.wandb_mode)
        self.log_settings = log_settings or LogSettings()
        on_disk = self.latest.exists() or (self.ckpt_dir / ".latest.old").exists()  # .old: a save was cut
        if main and not resume and self.latest.exists():
            raise FileExistsError(
                f"{self.latest} already exists: pass resume=true to continue that run, or choose another out="
            )
        if resume and not on_disk:
            log.warning("resume=true but %s does not exist: starting from scratch", self.latest)
        self.resuming = resume and on_disk
        self.saved_step: int | None = None  # step of checkpoints/latest on disk: the last good state
        self.best = Best()  # a loop that resumes restores it with Best.from_state
        self._ctrl_c = ExitStack()
        self._stop = threading.Event()  # set by Ctrl-C or SIGTERM between start() and close()
        self._log: RunLog | None = None
        self._bar: Any = None
        self._t0 = time.monotonic()

    def restore(self, names: Iterable[str] | None = None) -> Checkpoint | None:
        """``checkpoints/latest`` when resuming (None otherwise); the loop loads its own state from it."""
        if not self.resuming:
            return None
        ck = load_checkpoint(self.latest, names=names)
        log.info("resuming %s", ck.path)
        return ck

    def start(self, step: int) -> None:
        """Open the metric stream (dropping events after ``step`` when resumed) and the progress bar."""
        self._t0 = time.monotonic()
        self._stop = self._ctrl_c.enter_context(stop_on_interrupt())
        if not self.main:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        self._log = RunLog(self.out, resume_step=step, settings=self.log_settings)
        if self.show_progress:
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=self.total,
                initial=step,
                desc=self.desc,
                unit=self.unit.split()[-1],
                dynamic_ncols=True,
                mininterval=1.0,
            )

    # ------------------------------------------------------------------ during the run
    def seconds(self) -> float:
        """Wall time of this session of the run."""
        return time.monotonic() - self._t0

    def over_budget(self) -> bool:
        return self.max_minutes is not None and self.seconds() >= 60.0 * self.max_minutes

    @property
    def interrupted(self) -> bool:
        """Ctrl-C (or SIGTERM) came: the loop saves ``latest`` and raises KeyboardInterrupt (graceful stop)."""
        return self._stop.is_set()

    def should_stop(self) -> bool:
        """The wall-time budget is spent or Ctrl-C / SIGTERM came: the loop ends after this unit of work."""
        return self.over_budget() or self.interrupted

    def scalar(self, name: str, value: Any, step: int) -> None:
        if self._log is not None:
            self._log.scalar(name, value, step)

    def progress(self, n: int, **postfix: str) -> None:
        if self._bar is not None:
            self._bar.update(n)
            if postfix:
                self._bar.set_postfix(**postfix)

    def check(self, values: Mapping[str, Any], step: int) -> None:
        """Raise :class:`NonFiniteError` on any NaN/inf among ``values`` (floats or one-element tensors)."""
        floats = {k: float(v.detach() if isinstance(v, torch.Tensor) else v) for k, v in values.items()}
        bad = ", ".join(f"{k} = {x}" for k, x in floats.items() if not math.isfinite(x))
        if bad:
            raise self.stopped(f"non-finite {bad}", step)

    def stopped(self, fault: str, step: int) -> NonFiniteError:
        """The error for ``fault`` at ``step``, naming where the last good state is."""
        good = "no checkpoint had been written"
        if self.saved_step is not None:
            good = f"{self.latest} holds the last good state ({self.unit} {self.saved_step})"
        return NonFiniteError(f"{self.what}: {fault} at {self.unit} {step}; stopped without saving: {good}")

    # ------------------------------------------------------------------ evaluation
    def due(self, step: int, every: int, last: int) -> bool:
        """Whether a periodic evaluation (or save) falls in ``(last, step]``; steps may jump by several."""
        return every > 0 and step // every > last // every

    def evaluate(
        self,
        eval_fn: Callable[[], Mapping[str, Any]],
        step: int,
        *,
        seed: int,
        best: Callable[[dict[str, Any]], tuple[Mapping[str, Any], Mapping[str, Any]]],
    ) -> dict[str, Any]:
        """Run ``eval_fn()`` with every RNG forked (training draws the same), log ``eval/<name>``; a success
        rate at least the best so far (ties: the later step) writes ``best`` from ``best(metrics)``."""
        saved = get_rng_state()
        seed_everything(seed + 1_000_003 * (1 + step))
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                metrics = dict(eval_fn())
        finally:
            set_rng_state(saved)
        metrics["eval_time_s"] = time.perf_counter() - t0
        scalars = {k: x for k, v in metrics.items() if (x := scalar_value(v)) is not None}
        for name, x in scalars.items():
            self.scalar(f"eval/{name}", x, step)
        metrics["step"] = step
        if self._log is not None:
            for path in metrics.get("videos") or []:  # the evaluation's mp4s (W&B shows them by the curves)
                self._log.video("eval/video", path, step)
        rate = metrics.get("success_rate")
        if rate is not None and float(rate) >= self.best.success_rate:
            self.best = Best(float(rate), step, metrics)
            modules, config = best(metrics)
            if self.main:
                save_checkpoint(self.ckpt_dir / "best", dict(modules), dict(config))
        shown = {k: round(x, 4) for k, x in {**scalars, "step": float(step)}.items()}  # not lists
        log.info("%s %d eval: %s", self.unit, step, shown)
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def mark_saved(self, step: int) -> None:
        """``checkpoints/latest`` holds ``step`` (after a save, or when resumed from it)."""
        self.saved_step = step

    def save_latest(
        self,
        modules: Mapping[str, Any],
        config: Mapping[str, Any],
        extra: Mapping[str, Any] | None,
        step: int,
        params: Iterable[tuple[str, torch.Tensor]] = (),
    ) -> None:
        """Write ``checkpoints/latest`` atomically, refusing NaN/inf ``params`` (a NaN step whose loss was
        finite), and keep a copy in ``history/`` on every ``keep_every``-th step."""
        for name, p in params:
            if p.is_floating_point() and not bool(torch.isfinite(p.detach()).all()):
                raise self.stopped(f"weights {name!r} hold NaN/inf", step)
        if self.main:
            save_checkpoint(
                self.latest, dict(modules), dict(config), dict(extra) if extra is not None else None
            )
            if self.keep_every > 0 and step // self.keep_every > (self.saved_step or 0) // self.keep_every:
                kept = self.ckpt_dir / "history" / f"{step:09d}"
                shutil.rmtree(kept, ignore_errors=True)
                shutil.copytree(self.latest, kept)
        self.saved_step = step

    # ------------------------------------------------------------------ end
    def close(self) -> None:
        self._ctrl_c.close()  # Ctrl-C's previous handler comes back
        for opened in (self._bar, self._log):
            if opened is not None:
                opened.close()
        self._bar = self._log = None

    def finish(self, metrics: Mapping[str, Any] | None = None) -> None:
        """Close the stream and the bar; write ``metrics.json`` atomically when given."""
        self.close()
        if metrics is not None and self.main:
            tmp = self.out / ".metrics.json.tmp"
            tmp.write_text(json.dumps(jsonable(dict(metrics)), indent=2) + "\n")
            os.replace(tmp, self.out / "metrics.json")

    def __enter__(self) -> RunEngine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
