"""Chunks conditioned on their known first actions (``sample(prefix=)``): the real-time chunking path."""

from __future__ import annotations

import pytest
import torch
from policy_testkit import ACTION_DIM, TINY, obs_window, randomize

from robosteer.policies import make_policy

TP = 8


def build(name: str, shape_meta: dict, stats: dict, **kw: object) -> torch.nn.Module:
    torch.manual_seed(0)
    p = make_policy(name, shape_meta, stats=stats, horizon=TP, n_obs_steps=2, n_action_steps=4, **TINY, **kw)
    randomize(p)
    return p.eval()


@pytest.mark.parametrize(
    "name,kw", [("diffusion", {}), ("flow", {}), ("diffusion", {"prefix_train_prob": 0.5})]
)
def test_prefix_is_kept_and_conditions_the_rest(shape_meta: dict, stats: dict, name: str, kw: dict) -> None:
    p = build(name, shape_meta, stats, **kw)
    obs = obs_window(3)
    noise = torch.randn(3, TP, ACTION_DIM, generator=torch.Generator().manual_seed(1))
    prefix = torch.rand(3, 3, ACTION_DIM, generator=torch.Generator().manual_seed(2)) * 1.6 - 0.8
    out = p.sample(obs, noise=noise, prefix=prefix)
    assert out.shape == (3, TP, ACTION_DIM)
    assert torch.allclose(out[:, :3], prefix, atol=1e-5)  # exactly the committed actions
    other = p.sample(obs, noise=noise, prefix=-prefix)
    assert (out[:, 3:] - other[:, 3:]).abs().max() > 1e-3  # the rest depends on them
    assert torch.equal(
        p.sample(obs, noise=noise, prefix=prefix), out
    )  # deterministic in (obs, noise, prefix)
    # an empty prefix is the plain sample
    assert torch.equal(
        p.sample(obs, noise=noise, prefix=torch.zeros(3, 0, ACTION_DIM)), p.sample(obs, noise=noise)
    )


def _record_inputs(p: torch.nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    p.model.register_forward_hook(lambda m, args, out: seen.append((args[0].clone(), args[1].clone())))
    return seen


def test_replacement_inpainting_feeds_the_noised_prefix(shape_meta: dict, stats: dict) -> None:
    p = build("diffusion", shape_meta, stats)
    seen = _record_inputs(p)
    noise = torch.randn(2, TP, ACTION_DIM, generator=torch.Generator().manual_seed(1))
    prefix = torch.full((2, 2, ACTION_DIM), 0.5)
    p.sample(obs_window(2), noise=noise, prefix=prefix)
    pn = p.normalizer.normalize("action", prefix)
    ts, coefs = p.ddim_table().steps(torch.device("cpu"))
    assert len(seen) == len(ts)
    for (x, t), t_ref, (sa, sb, *_) in zip(seen, ts, coefs):
        assert torch.allclose(x[:, :2], sa * pn + sb * noise[:, :2], atol=1e-6)  # q(x_t | prefix)
        assert torch.equal(t, t_ref.expand(2))


def test_prefix_trained_policy_sees_the_prefix_clean_at_level_zero(shape_meta: dict, stats: dict) -> None:
    p = build("diffusion", shape_meta, stats, prefix_train_prob=1.0)
    assert p.prefix_conditioned
    seen = _record_inputs(p)
    prefix = torch.full((2, 3, ACTION_DIM), -0.25)
    p.sample(obs_window(2), prefix=prefix)
    pn = p.normalizer.normalize("action", prefix)
    for x, levels in seen:
        assert levels.shape == (2, TP) and (levels[:, :3] == 0).all()
        assert torch.equal(x[:, :3], pn)
    assert all((levels[:, 3:] == levels[:, 3:4]).all() for _, levels in seen)  # the rest shares step t
    assert {int(levels[0, 3]) for _, levels in seen} == {
        int(t) for t in p.ddim_table().steps(torch.device("cpu"))[0]
    }
    seen.clear()
    p.sample(obs_window(2))  # without a prefix every position shares the level
    assert all(levels.shape == (2, TP) and (levels == levels[:, :1]).all() for _, levels in seen)


def test_prefix_training_leaves_known_positions_out_of_the_loss(shape_meta: dict, stats: dict) -> None:
    p = build("diffusion", shape_meta, stats, prefix_train_prob=1.0)  # prediction_type "sample": target x0
    p.train()
    seen = _record_inputs(p)
    p._train_prefix_lengths = lambda b, device: torch.full((b,), 3)  # type: ignore[method-assign]

    class Zero(torch.nn.Module):
        def forward(self, x, t, cond):
            return torch.zeros_like(x)

    batch = {"obs": obs_window(4), "action": torch.rand(4, TP, ACTION_DIM) * 2 - 1}
    model = p.model
    loss, _ = p.loss(batch)
    x, levels = seen[-1]
    x0 = p.normalizer.normalize("action", batch["action"])
    assert (levels[:, :3] == 0).all() and torch.equal(x[:, :3], x0[:, :3])  # known: clean, level 0
    p.model = Zero()
    loss, _ = p.loss(batch)
    assert torch.allclose(loss, x0[:, 3:].pow(2).mean())  # only the free positions count
    p.model = model


def test_prefix_errors(shape_meta: dict, stats: dict) -> None:
    p = build("diffusion", shape_meta, stats)
    obs = obs_window(2)
    with pytest.raises(ValueError, match="prefix has shape"):
        p.sample(obs, prefix=torch.zeros(2, TP + 1, ACTION_DIM))
    with pytest.raises(ValueError, match="prefix has shape"):
        p.sample(obs, prefix=torch.zeros(2, 2, ACTION_DIM + 1))
    with pytest.raises(ValueError, match="NaN"):
        p.sample(obs, prefix=torch.full((2, 2, ACTION_DIM), float("nan")))
    sdp = make_policy(
        "streaming", shape_meta, stats=stats, horizon=11, n_obs_steps=2, n_action_steps=5, **TINY
    )
    assert not sdp.supports_prefix
    with pytest.raises(ValueError, match="cannot condition on an action prefix"):
        sdp.sample(obs, prefix=torch.zeros(2, 2, ACTION_DIM))
    with pytest.raises(ValueError, match="prefix_train_prob is for diffusion"):
        make_policy("streaming", shape_meta, stats=stats, horizon=11, n_obs_steps=2, n_action_steps=5,
                    prefix_train_prob=0.5, **TINY)  # fmt: skip
    with pytest.raises(ValueError, match="prefix_max"):
        make_policy("diffusion", shape_meta, stats=stats, horizon=TP, n_action_steps=4, prefix_max=TP, **TINY)
