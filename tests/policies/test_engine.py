"""The run engine every learning loop shares: refusal to overwrite, resume, history, NaN guard, metrics."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from robosteer.policies.checkpoint import load_checkpoint
from robosteer.policies.engine import NonFiniteError, RunEngine


def _save(run: RunEngine, step: int, value: float = 1.0) -> None:
    w = torch.full((3,), value)
    run.save_latest({"m": {"w": w}}, {"kind": "test"}, {"step": step}, step, [("w", w)])


def test_history_keeps_the_first_save_past_each_multiple(tmp_path):
    settings = SimpleNamespace(progress=False, max_minutes=None, keep_every=10)
    run = RunEngine(tmp_path, what="test", total=100, settings=settings)
    run.start(0)
    for step in (4, 8, 12, 16, 20, 24, 31):
        _save(run, step, float(step))
    run.finish({"steps": 31})
    kept = sorted(p.name for p in (tmp_path / "checkpoints" / "history").iterdir())
    assert kept == ["000000012", "000000020", "000000031"]
    assert (
        float(load_checkpoint(tmp_path / "checkpoints" / "history" / "000000020").modules["m"]["w"][0])
        == 20.0
    )
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"steps": 31}


def test_refuses_to_overwrite_and_resumes_where_latest_is(tmp_path):
    run = RunEngine(tmp_path, what="test", total=10)
    _save(run, 5)
    with pytest.raises(FileExistsError, match="resume=true"):
        RunEngine(tmp_path, what="test", total=10)
    again = RunEngine(tmp_path, what="test", total=10, resume=True)
    ck = again.restore()
    assert ck is not None and ck.extra["step"] == 5
    fresh = RunEngine(tmp_path / "other", what="test", total=10, resume=True)
    assert fresh.restore() is None  # resume=true with nothing on disk starts from scratch


def test_non_finite_names_the_last_good_checkpoint_and_is_never_saved(tmp_path):
    run = RunEngine(tmp_path, what="steering (x)", total=10, unit="env step")
    _save(run, 3)
    with pytest.raises(
        NonFiniteError, match=r"steering \(x\): non-finite loss = nan at env step 4.*env step 3"
    ):
        run.check({"loss": float("nan")}, 4)
    with pytest.raises(NonFiniteError, match="weights 'w'"):
        _save(run, 6, float("inf"))
    assert load_checkpoint(tmp_path / "checkpoints" / "latest").extra["step"] == 3


def test_budget(tmp_path):
    over = SimpleNamespace(progress=False, max_minutes=0.0, keep_every=0)
    assert RunEngine(tmp_path, what="t", total=1, settings=over).over_budget()
    assert not RunEngine(tmp_path, what="t", total=1).over_budget()


def test_evaluation_forks_every_rng_keeps_the_later_best_on_ties_and_logs_scalars(tmp_path):
    import random

    import numpy as np

    logged: list[str] = []

    class Recording(RunEngine):
        def scalar(self, name, value, step):
            logged.append(name)

    run = Recording(tmp_path, what="test", total=10)
    run.start(0)
    scores = iter([0.5, 0.7, 0.7, 0.2])
    saved: list[tuple[int, dict]] = []

    def eval_fn() -> dict:  # consumes every RNG the way a rollout does
        torch.rand(5), np.random.rand(5), random.random()
        return {"success_rate": next(scores), "episodes": 4, "per_episode": [1, 0]}

    torch.manual_seed(0), np.random.seed(0), random.seed(0)
    expected = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(0), np.random.seed(0), random.seed(0)
    for step in (10, 20, 30, 40):
        m = run.evaluate(eval_fn, step, seed=0, best=lambda m: ({"m": {"w": torch.ones(1)}}, {"eval": m}))
        assert m["step"] == step and m["eval_time_s"] >= 0
        saved.append((run.best.step, dict(run.best.metrics)))
    got = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(got[0], expected[0]) and np.array_equal(got[1], expected[1]) and got[2] == expected[2]
    assert [s for s, _ in saved] == [10, 20, 30, 30]  # 0.7 again at step 30 moves best there; 0.2 does not
    ck = load_checkpoint(tmp_path / "checkpoints" / "best")
    assert ck.config["eval"]["step"] == 30 and ck.config["eval"]["success_rate"] == 0.7
    run.finish()
    assert {"eval/success_rate", "eval/episodes"} <= set(logged) and "eval/per_episode" not in logged


def test_due_counts_each_multiple_once_for_steps_that_jump():
    run = RunEngine("/nonexistent/x", what="test", total=10, main=False)
    assert [s for s in range(1, 21) if run.due(s, 5, s - 1)] == [5, 10, 15, 20]
    assert run.due(23, 10, 18) and not run.due(19, 10, 11) and not run.due(40, 0, 0)


def test_best_reads_steering_checkpoints_written_before_the_engine_kept_it():
    from robosteer.policies.engine import Best

    old = Best.from_state({"success_rate": 0.6, "env_steps": 4000})
    assert (old.success_rate, old.step, old.metrics) == (0.6, 4000, {})
    assert Best.from_state(Best(0.5, 7, {"a": 1}).state()) == Best(0.5, 7, {"a": 1})


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_sets_the_stop_flag_and_a_second_one_raises(name: str) -> None:
    """A first Ctrl-C (or SIGTERM) is a flag (an exception could be swallowed by a weakref callback and
    lost); a second one raises at once; the previous handlers come back afterwards."""
    import os
    import signal
    import time

    from robosteer.policies.engine import stop_on_interrupt

    signum = getattr(signal, name)
    # A shell's background job (`make test &`, some CI runners) starts with SIGINT ignored, which the helper
    # rightly leaves alone: give this process Python's own Ctrl-C handler for the test.
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    outside: list[int] = []  # signals that reached the handler outside the helper (none may)
    outer_term = signal.signal(signal.SIGTERM, lambda signum, frame: outside.append(signum))
    try:
        with stop_on_interrupt() as stop:
            assert not stop.is_set()
            os.kill(os.getpid(), signum)
            time.sleep(0.05)  # the handler runs in the main thread between bytecodes
            assert stop.is_set()
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signum)
                time.sleep(0.05)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back as it was
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL and not outside
    finally:
        signal.signal(signal.SIGINT, outer)
        signal.signal(signal.SIGTERM, outer_term)


def test_ctrl_c_stays_ignored_where_it_was_ignored_and_sigterm_still_stops() -> None:
    """A background job ignores SIGINT: the helper must not make it interruptible behind its back; SIGTERM,
    how such a job is stopped, still sets the flag."""
    import os
    import signal
    import time

    from robosteer.policies.engine import stop_on_interrupt

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    outside: list[int] = []  # a SIGTERM the helper did not take lands here (not in pytest's death)
    previous_term = signal.signal(signal.SIGTERM, lambda signum, frame: outside.append(signum))
    try:
        with stop_on_interrupt() as stop:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert not stop.is_set()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            assert stop.is_set() and not outside
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
