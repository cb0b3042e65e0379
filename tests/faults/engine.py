"""Planted faults in the run engine every learning loop shares (``policies/engine.py``); ``run.py -k engine``."""

ENGINE = "policies/engine.py"
TESTS = [
    "tests/policies/test_engine.py",
    "tests/policies/train/test_trainer_resume.py",
    "tests/policies/train/test_nonfinite_training.py",
]


_FAULTS = [  # (name, old, new) in policies/engine.py
    (
        "engine: a NaN loss passes the guard",
        "        if bad:\n            raise self.stopped",
        "        if False:\n            raise self.stopped",
    ),
    (
        "engine: NaN weights are saved",
        "            if p.is_floating_point() and not bool(torch.isfinite(p.detach()).all()):",
        "            if p.is_floating_point() and bool(torch.isnan(p.detach()).all()):",
    ),
    (
        "engine: an existing run is overwritten without resume=true",
        "        if main and not resume and self.latest.exists():",
        "        if main and not resume and self.latest.exists() and False:",
    ),
    (
        "engine: resume=true ignores checkpoints/latest",
        "        self.resuming = resume and on_disk",
        "        self.resuming = False",
    ),
    (
        "engine: history keeps every save",
        "            if self.keep_every > 0 and step // self.keep_every > (self.saved_step or 0) // self.keep_every:",
        "            if self.keep_every > 0:",
    ),
    (
        "engine: the last good checkpoint is not tracked",
        "        self.saved_step = step\n\n    # ---",
        "        self.saved_step = None\n\n    # ---",
    ),
    (
        "engine: evaluation draws from the training RNG",
        "        finally:\n            set_rng_state(saved)\n",
        "        finally:\n            pass\n",
    ),
    (
        "engine: a tie keeps the earlier best",
        "float(rate) >= self.best.success_rate",
        "float(rate) > self.best.success_rate",
    ),
    (
        "engine: an evaluation period whose step is jumped over is skipped",
        "every > 0 and step // every > last // every",
        "every > 0 and step % every == 0",
    ),
    (
        "engine: SIGTERM still kills the run where it stands (no checkpoints/latest at the step in flight)",
        'STOP_SIGNALS = ("SIGINT", "SIGTERM")',
        'STOP_SIGNALS = ("SIGINT",)',
    ),
    (
        "engine: Ctrl-C is not a flag (an exception cuts the step in flight)",
        "        self._stop = self._ctrl_c.enter_context(stop_on_interrupt())\n",
        "",
    ),
]
FAULTS = [{"name": n, "file": ENGINE, "old": old, "new": new, "tests": TESTS} for n, old, new in _FAULTS]
