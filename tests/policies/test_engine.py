"""The run engine every learning loop shares: refusal to overwrite, resume, history, NaN guard, metrics."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from policies.checkpoint import load_checkpoint
from policies.engine import NonFiniteError, RunEngine


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
