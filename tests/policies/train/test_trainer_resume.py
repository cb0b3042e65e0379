"""Trainer: exact resume, checkpoints, evaluation/best, metrics, wall-time budget, sampler."""

from __future__ import annotations

import json
import math

import pytest
import torch
from _trainkit import SHAPE_META, TinyDataset, TinyPolicy, params_equal

from robosteer.policies.checkpoint import load_checkpoint, state_dict_hash
from robosteer.policies.train import InfiniteSampler, TrainConfig, Trainer, lr_lambda

torch.set_num_threads(1)

BASE = dict(batch_size=8, lr=3e-3, lr_warmup_steps=3, checkpoint_every=5, log_every=2, progress=False, seed=3)


def _run(out, steps, eval_fn=None, **over):
    torch.manual_seed(0)  # the script seeds before building the policy
    policy = TinyPolicy()
    cfg = TrainConfig.from_dict({**BASE, "steps": steps, **over})
    trainer = Trainer(
        policy, TinyDataset(), cfg, out, policy_name="tiny", shape_meta=SHAPE_META, eval_fn=eval_fn
    )
    return trainer, trainer.fit()


class FakeEval:
    """Success rises then falls, so 'best' must keep the peak; it also draws RNG (as sampling noise does)."""

    def __init__(self):
        self.calls = []

    def __call__(self, policy, step):
        torch.randn(100)
        self.calls.append(step)
        rate = {4: 0.2, 8: 0.6, 12: 0.4}.get(step, 0.1)
        return {"success_rate": rate, "episodes": 10, "env_steps": 500 + step}


def test_resume_is_bit_identical(tmp_path):
    full, m_full = _run(tmp_path / "full", 12, eval_fn=FakeEval(), eval_every=4)
    # 12 steps as 7 + resume + 5 (7: not a multiple of checkpoint_every, so the end-of-run save is exercised).
    half, _ = _run(tmp_path / "split", 12, eval_fn=FakeEval(), eval_every=4, stop_at_step=7)
    assert half.step == 7
    resumed, m_res = _run(tmp_path / "split", 12, eval_fn=FakeEval(), eval_every=4, resume=True)
    assert resumed.step == 12 and m_res["resumed_from_step"] == 7
    assert params_equal(full.policy, resumed.policy)
    assert params_equal(full.ema.averaged_model, resumed.ema.averaged_model)
    for a, b in zip(
        full.optimizer.state_dict()["state"].values(), resumed.optimizer.state_dict()["state"].values()
    ):
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert full.optimizer.param_groups[0]["lr"] == resumed.optimizer.param_groups[0]["lr"]
    assert m_full["final_loss"] == m_res["final_loss"]
    # ... and the data / RNG really matter: another seed diverges.
    other, _ = _run(tmp_path / "other", 12, seed=4)
    assert not params_equal(full.policy, other.policy)


def test_resume_without_restoring_rng_diverges(tmp_path, monkeypatch):
    """Proves the resume test can fail: dropping the RNG restore breaks bit-identity."""
    full, _ = _run(tmp_path / "full", 8)
    _run(tmp_path / "split", 8, stop_at_step=4)
    import robosteer.policies.train.trainer as tr

    monkeypatch.setattr(tr, "set_rng_state", lambda state: None)
    resumed, _ = _run(tmp_path / "split", 8, resume=True)
    assert not params_equal(full.policy, resumed.policy)


def test_run_outputs_best_and_metrics(tmp_path):
    ev = FakeEval()
    trainer, metrics = _run(tmp_path / "run", 14, eval_fn=ev, eval_every=4)
    assert ev.calls == [4, 8, 12, 14]  # periodic + final
    run = tmp_path / "run"
    saved = json.loads((run / "metrics.json").read_text())
    assert saved == metrics
    assert saved["steps"] == 14 and math.isfinite(saved["final_loss"]) and saved["samples_per_s"] > 0
    assert saved["success_rate"] == 0.1 and saved["episodes"] == 10 and saved["env_steps"] == 514
    assert saved["best_success_rate"] == 0.6 and saved["best_step"] == 8
    best = load_checkpoint(run / "checkpoints" / "best")
    assert best.config["step"] == 8 and best.config["eval"]["success_rate"] == 0.6
    assert set(best.modules) == {"model", "ema"}
    latest = load_checkpoint(run / "checkpoints" / "latest")
    assert latest.config["step"] == 14 and latest.config["policy"] == {
        "name": "tiny",
        "config": trainer.policy_config,
    }
    assert latest.config["shape_meta"] == SHAPE_META and latest.config["inference_module"] == "ema"
    assert set(latest.modules) == {"model", "ema", "optimizer", "lr_scheduler"}
    assert state_dict_hash(latest.modules["ema"]) == state_dict_hash(trainer.ema.averaged_model)
    assert list((run / "tb").glob("events.out.tfevents.*"))


def test_existing_run_needs_resume_and_budget_stops_with_checkpoint(tmp_path):
    _run(tmp_path / "run", 3)
    with pytest.raises(FileExistsError, match="resume=true"):
        _run(tmp_path / "run", 3)
    trainer, metrics = _run(tmp_path / "budget", 10_000, max_minutes=1e-9, checkpoint_every=0)
    assert metrics["stopped_early"] and metrics["steps"] < 10_000
    assert load_checkpoint(tmp_path / "budget" / "checkpoints" / "latest").extra["step"] == trainer.step


def test_resume_refuses_a_run_of_another_policy(tmp_path):
    """resume=true with another policy (or shape) would load the old weights into it and overwrite latest."""
    from robosteer.policies.checkpoint import CheckpointError

    _run(tmp_path / "run", 3, stop_at_step=2)
    before = state_dict_hash(load_checkpoint(tmp_path / "run" / "checkpoints" / "latest").modules["model"])
    torch.manual_seed(0)
    cfg = TrainConfig.from_dict({**BASE, "steps": 3, "resume": True})
    other = Trainer(
        TinyPolicy(), TinyDataset(), cfg, tmp_path / "run", policy_name="flow", shape_meta=SHAPE_META
    )
    with pytest.raises(CheckpointError, match="continues a tiny run, but the command builds policy=flow"):
        other.fit()
    resized = Trainer(
        TinyPolicy(), TinyDataset(), cfg, tmp_path / "run", policy_name="tiny", shape_meta=SHAPE_META,
        policy_config={"hidden": 999},
    )  # fmt: skip
    with pytest.raises(CheckpointError, match=r"policy\.hidden"):
        resized.fit()
    after = state_dict_hash(load_checkpoint(tmp_path / "run" / "checkpoints" / "latest").modules["model"])
    assert after == before  # nothing overwritten


def test_sampler_ranks_disjoint_and_resumable():
    full = InfiniteSampler(10, seed=1)
    it = iter(full)
    stream = [next(it) for _ in range(25)]
    assert sorted(stream[:10]) == list(range(10)) and stream[:10] != stream[10:20]
    it = iter(InfiniteSampler(10, seed=1, start=13))
    assert [next(it) for _ in range(12)] == stream[13:25]
    r0, r1 = (
        iter(InfiniteSampler(10, seed=1, rank=0, world_size=2)),
        iter(InfiniteSampler(10, seed=1, rank=1, world_size=2)),
    )
    a, b = [next(r0) for _ in range(5)], [next(r1) for _ in range(5)]
    assert sorted(a + b) == list(range(10))


def test_lr_schedule_warmup_then_cosine():
    f = lr_lambda("cosine", 10, 110)
    assert f(0) == 0.0 and f(5) == 0.5 and f(10) == 1.0
    assert f(60) == pytest.approx(0.5) and f(110) == pytest.approx(0.0)
    assert lr_lambda("constant", 0, 10)(7) == 1.0
    with pytest.raises(ValueError, match="cosine"):
        lr_lambda("cosin", 1, 2)
    with pytest.raises(ValueError, match="unknown TrainConfig keys"):
        TrainConfig.from_dict({"stpes": 3})


class CtrlCInLoss(TinyPolicy):
    """Presses Ctrl-C (SIGINT to this process) in the middle of its ``at``-th loss, as a user would."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.calls = at, 0

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict]:
        self.calls += 1
        if self.calls == self.at:
            import os
            import signal
            import time

            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs in the main thread between bytecodes
        return super().loss(batch)


def test_ctrl_c_finishes_the_step_saves_latest_and_resume_is_exact(tmp_path):
    """Ctrl-C is a flag the engine polls between steps (an exception can be lost in a weakref callback, or
    cut a step in half): the step in flight finishes, checkpoints/latest holds it, KeyboardInterrupt reaches
    the caller, and a resume ends bit-identical to a run never interrupted."""
    import signal

    def run(out, policy, **over):
        torch.manual_seed(0)
        cfg = TrainConfig.from_dict({**BASE, "steps": 12, **over})
        trainer = Trainer(policy, TinyDataset(), cfg, out, policy_name="tiny", shape_meta=SHAPE_META)
        return trainer, trainer.fit()

    outer = signal.signal(
        signal.SIGINT, signal.default_int_handler
    )  # a background job starts with it ignored
    try:
        torch.manual_seed(0)
        with pytest.raises(KeyboardInterrupt):
            run(tmp_path / "cut", CtrlCInLoss(at=7))
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the engine put it back
    finally:
        signal.signal(signal.SIGINT, outer)
    assert load_checkpoint(tmp_path / "cut" / "checkpoints" / "latest").extra["step"] == 7  # step 7 finished
    torch.manual_seed(0)
    resumed, _ = run(tmp_path / "cut", CtrlCInLoss(at=-1), resume=True)
    torch.manual_seed(0)
    full, _ = run(tmp_path / "full", CtrlCInLoss(at=-1))
    assert resumed.step == 12 and params_equal(full.policy, resumed.policy)
