"""scripts.common helpers the benchmark grids share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.common import log_beside, read_results


def test_log_beside_keeps_dotted_run_names_apart():
    """with_suffix would turn both into base_dp_noise0.log / cell_t0.log; each run keeps its own log."""
    assert log_beside(Path("runs/base_dp_noise0.3_3000")) == Path("runs/base_dp_noise0.3_3000.log")
    assert log_beside(Path("runs/base_dp_noise0.5_3000"), ".train.log") == Path(
        "runs/base_dp_noise0.5_3000.train.log"
    )
    assert log_beside(Path("evals/cell_t0.5")) != log_beside(Path("evals/cell_t0"))


def test_read_results_fills_key_fields_that_old_rows_lack(tmp_path: Path):
    """A grid re-keyed by a new field (dsrl_steering: `which`) still reads the rows written before it."""
    path = tmp_path / "results.jsonl"
    rows = [{"seed": 0, "success_rate": 0.5}, {"seed": 0, "which": "best", "success_rate": 0.9}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    done = read_results(path, ("seed", "which"), defaults={"which": "latest"})
    assert {k: r["success_rate"] for k, r in done.items()} == {(0, "latest"): 0.5, (0, "best"): 0.9}
    assert read_results(tmp_path / "missing.jsonl", ("seed",)) == {}


def test_ctrl_c_sets_the_stop_flag_and_a_second_one_raises():
    """A first Ctrl-C is a flag (an exception could be swallowed by a weakref callback and lost); a second
    one raises at once; the previous handler comes back afterwards."""
    import os
    import signal
    import time

    from scripts.common import stop_on_ctrl_c

    # A shell's background job (`make test &`, some CI runners) starts with SIGINT ignored, which the helper
    # rightly leaves alone: give this process Python's own Ctrl-C handler for the test.
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with stop_on_ctrl_c() as stop:
            assert not stop.is_set()
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs in the main thread between bytecodes
            assert stop.is_set()
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back as it was
    finally:
        signal.signal(signal.SIGINT, outer)


def test_ctrl_c_stays_ignored_where_it_was_ignored():
    """A background job ignores SIGINT: the collector must not make it interruptible behind its back."""
    import signal

    from scripts.common import stop_on_ctrl_c

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with stop_on_ctrl_c() as stop:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert not stop.is_set()
    finally:
        signal.signal(signal.SIGINT, previous)
