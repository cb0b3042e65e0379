"""SDP's training levels, loss targets and buffer update pinned against values computed by hand.

Pinned: the chunk index c(i) = clamp(⌊(i − (To−1))/Ta⌋, 0, h−1) and the levels k(c) = ⌊N(c+1)/h⌋ − 1 for
inference (N_inf) and training (N_train) on three layouts; the training sampler's two regimes (chunk-wise
k(c(i)) − j with j ~ U{0 .. N/h − 1}, one constant level ~ U{0 .. N−1}) and their mixture probability; the
loss for every prediction type under each regime (x_t = √ᾱ_t x0 + √(1−ᾱ_t) ε per position, target ε, x0 or
√ᾱ ε − √(1−ᾱ) x0, plain MSE); and a streaming call's buffer update (shift by Ta, fresh noise appended, the
first To−1 positions re-noised to chunk 0's level with the kept result).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from policy_testkit import ACTION_DIM, STATE_DIM, TINY, obs_window, randomize

from robosteer.policies import make_policy

torch.set_num_threads(1)
LO, HI = -2.0, 2.0  # action stats: normalised x0 = 2 (a − LO) / (HI − LO) − 1 = a / 2


def _stats() -> dict:
    def s(d: int, lo: float, hi: float) -> dict:
        return {"min": np.full(d, lo), "max": np.full(d, hi), "mean": np.zeros(d), "std": np.ones(d)}

    return {"state": s(STATE_DIM, -1.0, 2.0), "action": s(ACTION_DIM, LO, HI)}


def _sdp(shape_meta: dict, **cfg):
    return make_policy("streaming", shape_meta, _stats(), **{**TINY, **cfg})


def _hand_levels(tp: int, to: int, ta: int, n: int) -> tuple[list[int], list[int]]:
    """(c(i), k(c(i))) for every position, in plain integer arithmetic."""
    h = (tp - (to - 1)) // ta
    chunks = [min(max((i - (to - 1)) // ta, 0), h - 1) for i in range(tp)]
    return chunks, [n * (c + 1) // h - 1 for c in chunks]


@pytest.mark.parametrize(
    "tp,to,ta,n_train,n_inf",
    [(20, 2, 8, 100, 10), (16, 2, 5, 120, 12), (14, 3, 4, 120, 6)],
)
def test_chunk_index_and_levels_by_hand(shape_meta: dict, tp, to, ta, n_train, n_inf) -> None:
    """c(i) and k(c) = ⌊N(c+1)/h⌋ − 1 at inference (N_inf) and in training (N_train)."""
    p = _sdp(
        shape_meta,
        horizon=tp,
        n_obs_steps=to,
        n_action_steps=ta,
        num_train_timesteps=n_train,
        num_inference_steps=n_inf,
    )
    chunks, k_inf = _hand_levels(tp, to, ta, n_inf)
    _, k_train = _hand_levels(tp, to, ta, n_train)
    assert p.h == (tp - (to - 1)) // ta and p.nfe_per_call == n_inf // p.h
    assert p.chunk_index.tolist() == chunks
    assert p.init_levels.tolist() == k_inf
    assert p.train_chunk_levels.tolist() == k_train
    assert p.keep == (to - 1) + ta * (p.h - 1) and p.exec_pos == (to - 1) + ta - 1


def test_training_levels_chunkwise_constant_and_their_mixture(shape_meta: dict) -> None:
    """p_chunkwise = 1: every row is k_train(c(i)) − j, j covering exactly {0 .. N/h − 1}; p = 0: one level per
    row covering exactly {0 .. N−1}; the default 0.8: the chunk-wise share of 4000 rows is 0.8 ± 0.03."""
    n, b = 100, 4000
    _, k_train = _hand_levels(20, 2, 8, n)
    base = torch.tensor(k_train)
    torch.manual_seed(0)
    cw = _sdp(shape_meta, p_chunkwise=1.0).sample_train_levels(b)
    j = base[None] - cw  # (B, Tp): constant along each row
    assert torch.equal(j, j[:, :1].expand_as(j))
    assert set(j[:, 0].tolist()) == set(range(n // 2))
    const = _sdp(shape_meta, p_chunkwise=0.0).sample_train_levels(b)
    assert torch.equal(const, const[:, :1].expand_as(const))
    assert set(const[:, 0].tolist()) == set(range(n))
    mixed = _sdp(shape_meta).sample_train_levels(b)
    assert _sdp(shape_meta).config.p_chunkwise == 0.8
    is_cw = (mixed != mixed[:, :1]).any(dim=1)  # chunk-wise rows are never constant (chunks differ by N/h)
    assert abs(is_cw.float().mean().item() - 0.8) < 0.03


class PlantedDenoiser(torch.nn.Module):
    """pred = 0.3·x + 0.002·t per position (depends on each position's own level); records its inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        self.seen.append((x.detach().clone(), t.clone()))
        return 0.3 * x + 0.002 * t.unsqueeze(-1).float()


@pytest.mark.parametrize("prediction_type", ["epsilon", "sample", "v_prediction"])
@pytest.mark.parametrize("p_chunkwise", [1.0, 0.0])
def test_loss_by_hand(shape_meta: dict, prediction_type: str, p_chunkwise: float) -> None:
    """loss = mean over (B, Tp, Da) of (model(x_t, t) − target)², x_t noised position by position to the levels
    the sampler drew (chunk-wise or constant), target ε / x0 / √ᾱ ε − √(1−ᾱ) x0 of the normalised action."""
    p = _sdp(shape_meta, prediction_type=prediction_type, p_chunkwise=p_chunkwise)
    p.model = PlantedDenoiser()
    drawn: list[torch.Tensor] = []
    sampler = p.sample_train_levels
    p.sample_train_levels = lambda b, device=None: drawn.append(sampler(b, device)) or drawn[-1]
    b = 6
    action = torch.rand(b, 20, ACTION_DIM, generator=torch.Generator().manual_seed(1)) * 3.6 - 1.8
    torch.manual_seed(4)
    loss, stats = p.loss({"obs": obs_window(b), "action": action})
    torch.manual_seed(4)
    eps = torch.randn(b, 20, ACTION_DIM)  # the loss's first draw

    t = drawn[0]  # (B, Tp) train timesteps
    _, k_train = _hand_levels(20, 2, 8, 100)
    if p_chunkwise == 1.0:
        assert torch.equal(
            torch.tensor(k_train)[None] - t, (torch.tensor(k_train)[None] - t)[:, :1].expand(b, 20)
        )
        assert (t != t[:, :1]).any()
    else:
        assert torch.equal(t, t[:, :1].expand(b, 20))
    x0 = 2 * (action - LO) / (HI - LO) - 1
    abar = p.noise_scheduler.alphas_cumprod[t].unsqueeze(-1)  # (B, Tp, 1)
    xt = abar.sqrt() * x0 + (1 - abar).sqrt() * eps
    pred = 0.3 * xt + 0.002 * t.unsqueeze(-1).float()
    target = {"epsilon": eps, "sample": x0, "v_prediction": abar.sqrt() * eps - (1 - abar).sqrt() * x0}
    want = ((pred - target[prediction_type]) ** 2).mean()
    x_seen, t_seen = p.model.seen[0]
    torch.testing.assert_close(x_seen, xt, rtol=1e-5, atol=1e-6)
    assert torch.equal(t_seen, t)
    assert loss.item() == pytest.approx(want.item(), rel=1e-5) and stats["loss"] == pytest.approx(
        want.item(), rel=1e-5
    )


def test_streaming_call_shifts_appends_and_renoises_the_buffer_by_hand(shape_meta: dict) -> None:
    """After a call returning chunk x (normalised): buffer[:, To−1 : keep] = x[:, Ta+To−1 : Ta+keep] (shifted by Ta),
    buffer[:, keep:] = the fresh N(0, I) draw, buffer[:, :To−1] = √ᾱ x[:, Ta : Ta+To−1] + √(1−ᾱ) ε', ᾱ at chunk 0's
    train timestep k(0)·N_train/N_inf = 4·10. Levels stay at init_levels."""
    p = make_policy("streaming", shape_meta, _stats(), **TINY)
    randomize(p, scale=0.1)
    b, to1, ta, keep = 3, 1, 8, 9
    assert (p.keep, p.config.n_action_steps, p.config.n_obs_steps - 1) == (keep, ta, to1)
    noise = torch.randn(b, 20, ACTION_DIM, generator=torch.Generator().manual_seed(2))
    for call in range(2):  # the first call initialises the buffer from the given noise, the second reuses it
        torch.manual_seed(10 + call)
        chunk = p.stream_step(obs_window(b), init_noise=noise)
        torch.manual_seed(10 + call)
        fresh = torch.randn(b, 20 - keep, ACTION_DIM)
        head_noise = torch.randn(b, to1, ACTION_DIM)
        x = 2 * (chunk - LO) / (HI - LO) - 1  # the normalised chunk
        abar = p.noise_scheduler.alphas_cumprod[(10 * 1 // 2 - 1) * (100 // 10)]
        buf = p._buffer
        torch.testing.assert_close(buf[:, to1:keep], x[:, ta + to1 : ta + keep], rtol=1e-5, atol=1e-6)
        assert torch.equal(buf[:, keep:], fresh)
        torch.testing.assert_close(
            buf[:, :to1],
            abar.sqrt() * x[:, ta : ta + to1] + (1 - abar).sqrt() * head_noise,
            rtol=1e-5,
            atol=1e-6,
        )
        assert torch.equal(p._levels, p.init_levels.expand(b, -1))
