"""IQL and Cal-QL on a one-step offline bandit: both rank the right action above the wrong one, Cal-QL's
Monte-Carlo bound binds on some but not all policy samples, and use_calql=False is exactly CQL."""

from __future__ import annotations

import pytest
import torch
from _valuekit import write_bandit

from robosteer.policies.value import build_learner, normalized_buffer, value_transitions
from robosteer.policies.value.calql import CalQLConfig
from robosteer.policies.value.iql import expectile_loss

SMALL = {"hidden": [32, 32]}


def _setup(tmp_path, algo: str, **cfg):
    path = tmp_path / "bandit.hdf5"
    write_bandit(path)
    data, meta, stats, tasks = value_transitions([path], ["state"], 1, 1, discount=0.9)
    learner = build_learner(algo, {**SMALL, "discount": 0.9, **cfg}, meta, 1, 1, len(tasks), stats)
    return learner, normalized_buffer(learner.critic, data)


def _ranking(learner) -> float:
    """Mean Q(s, right sign) − Q(s, wrong sign) over fresh states, through the raw-unit scoring path."""
    s = torch.rand(256, 1, 2) * 2 - 1
    right = (torch.sign(s[:, 0, :1]) * 0.6).unsqueeze(1)  # (B, 1, 1)
    obs = {"state": s}
    return float((learner.critic.score(obs, right) - learner.critic.score(obs, -right)).mean())


@pytest.mark.parametrize("algo", ["iql", "calql"])
def test_learns_to_rank_the_successful_action(tmp_path, algo: str) -> None:
    torch.manual_seed(0)
    warm = {"actor_warmup_steps": 1, "critic_warmup_steps": 0, "cql_alpha": 1.0} if algo == "calql" else {}
    extra = {"tau": 0.05, **warm, **({"warmup_steps": 0} if algo == "iql" else {})}  # 300 steps: no warm-up
    learner, buf = _setup(tmp_path, algo, **extra)
    gen = torch.Generator().manual_seed(0)
    assert abs(_ranking(learner)) < 0.2  # untrained: no preference
    # the reference critics (swish, no LayerNorm; IQL's TD target from the lagged target V) need 600 steps here
    infos = [learner.update(buf.sample(64, gen), gen) for _ in range(600)]
    assert _ranking(learner) > 0.3, infos[-1]  # optimal gap: 1
    if algo == "calql":
        rate = sum(i["calql_bound_rate"] for i in infos[-50:]) / 50
        assert 0.0 < rate < 1.0


def test_calql_without_bound_is_cql(tmp_path) -> None:
    """use_calql=False equals Cal-QL with a bound that never binds (mc_return = −∞), update for update."""
    results = []
    for use, mc in ((False, None), (True, -1e9)):
        torch.manual_seed(0)
        learner, buf = _setup(tmp_path / str(use), "calql", use_calql=use)
        gen = torch.Generator().manual_seed(1)
        for _ in range(5):
            batch = buf.sample(32, gen)
            if mc is not None:
                batch["mc_return"] = torch.full_like(batch["mc_return"], mc)
            info = learner.update(batch, gen)
        results.append((info["critic_loss"], [p.clone() for p in learner.critic.q.parameters()]))
    assert results[0][0] == pytest.approx(results[1][0])
    assert all(torch.allclose(a, b) for a, b in zip(results[0][1], results[1][1], strict=True))


def test_expectile_loss_and_config_errors() -> None:
    d = torch.tensor([1.0, -1.0])
    assert float(expectile_loss(d, 0.5)) == pytest.approx(0.5)
    assert float(expectile_loss(d, 0.9)) == pytest.approx((0.9 + 0.1) / 2)
    assert float(expectile_loss(torch.tensor([1.0]), 0.9)) > float(expectile_loss(torch.tensor([-1.0]), 0.9))
    with pytest.raises(ValueError, match="cql_n_actions"):
        CalQLConfig(cql_n_actions=0)
    with pytest.raises(ValueError, match=r"calql temperature_lr=-0.1 must be >= 0"):
        CalQLConfig(temperature_lr=-0.1)
    with pytest.raises(ValueError, match="unknown calql config keys \\['cql_alpah'\\]"):
        build_learner("calql", {"cql_alpah": 1.0}, {"obs": {}, "action": {"shape": [1]}}, 1, 1, 0)
    with pytest.raises(ValueError, match=r"algo='cql' is not known.*nearest: 'calql'"):
        build_learner("cql", {}, {"obs": {}, "action": {"shape": [1]}}, 1, 1, 0)


def test_ctrl_c_finishes_the_update_in_flight_and_saves_latest(tmp_path) -> None:
    """Ctrl-C during value learning: the update in flight finishes, checkpoints/latest holds it, and the
    caller sees KeyboardInterrupt (the CLI exits 130) instead of a lost signal or a half-done update."""
    import os
    import signal
    import time

    from robosteer.policies.checkpoint import load_checkpoint
    from robosteer.policies.value import train_value

    learner, buf = _setup(tmp_path, "iql")
    presses = iter(range(100))

    class CtrlCAtThird:  # the buffer's sampler, pressing Ctrl-C while it draws the third batch
        device = buf.device  # where the learner's generator lives

        def sample(self, n, gen):
            if next(presses) == 2:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # the handler runs in the main thread between bytecodes
            return buf.sample(n, gen)

    outer = signal.signal(
        signal.SIGINT, signal.default_int_handler
    )  # a background job starts with it ignored
    try:
        with pytest.raises(KeyboardInterrupt):
            train_value(learner, CtrlCAtThird(), tmp_path / "run", algo="iql", steps=50, batch_size=8)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)
    assert load_checkpoint(tmp_path / "run" / "checkpoints" / "latest").extra["step"] == 3
