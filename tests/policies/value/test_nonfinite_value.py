"""Value learning stops at the first NaN/inf loss (and refuses to save NaN weights) with NonFiniteError;
checkpoints/latest stays the last good, finite one."""

from __future__ import annotations

import pytest
import torch
from _valuekit import write_bandit

from robosteer.policies.checkpoint import load_checkpoint
from robosteer.policies.engine import NonFiniteError
from robosteer.policies.value import build_learner, normalized_buffer, train_value, value_transitions


def _setup(tmp_path, algo: str):
    path = tmp_path / "bandit.hdf5"
    write_bandit(path, 40)
    data, meta, stats, tasks = value_transitions([path], ["state"], 1, 1, discount=0.9)
    torch.manual_seed(0)
    extra = {"actor_warmup_steps": 1} if algo == "calql" else {}
    learner = build_learner(algo, {"hidden": [16, 16], **extra}, meta, 1, 1, len(tasks), stats)
    return learner, normalized_buffer(learner.critic, data)


def _assert_latest_is_good(out, step: int) -> None:
    ck = load_checkpoint(out / "checkpoints" / "latest")
    assert ck.extra["step"] == step
    for name in ("critic", "learner"):
        assert all(torch.isfinite(t).all() for t in ck.modules[name].values() if t.is_floating_point())


@pytest.mark.parametrize("algo", ["iql", "calql"])
def test_nan_reward_in_a_batch_stops_at_that_update(tmp_path, monkeypatch, algo):
    learner, buf = _setup(tmp_path, algo)
    sample, calls = buf.sample, []

    def poisoned(n, gen):
        batch = sample(n, gen)
        calls.append(1)
        if len(calls) >= 4:  # from update 4 on, one reward is NaN
            batch["reward"] = batch["reward"].clone()
            batch["reward"][0] = float("nan")
        return batch

    monkeypatch.setattr(buf, "sample", poisoned)
    out = tmp_path / "run"
    with pytest.raises(NonFiniteError) as info:
        train_value(learner, buf, out, algo=algo, steps=10, batch_size=16, checkpoint_every=2, log_every=1)
    msg = str(info.value)
    assert f"value learning ({algo}): non-finite critic_loss = nan" in msg and "at step 4;" in msg, msg
    assert f"{out / 'checkpoints' / 'latest'} holds the last good state (step 2)" in msg, msg
    _assert_latest_is_good(out, 2)


def test_nan_weights_with_finite_losses_are_never_saved(tmp_path, monkeypatch):
    """A NaN gradient step whose reported losses stay finite: the save refuses the weights."""
    learner, buf = _setup(tmp_path, "iql")
    update, calls = learner.update, []

    def update_then_break(batch, gen):
        info = update(batch, gen)
        calls.append(1)
        if len(calls) == 4:  # right before the save at step 4
            with torch.no_grad():
                learner.value[0].weight[0, 0] = float("nan")
        return info

    monkeypatch.setattr(learner, "update", update_then_break)
    out = tmp_path / "run"
    with pytest.raises(NonFiniteError, match=r"weights 'value\.0\.weight' hold NaN/inf at step 4"):
        train_value(learner, buf, out, algo="iql", steps=10, batch_size=16, checkpoint_every=2, log_every=1)
    _assert_latest_is_good(out, 2)
