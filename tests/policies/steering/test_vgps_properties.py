"""V-GPS's candidate batching over every shape (property-based, hypothesis).

``VGPSPolicy.sample`` repeats each observation row K times, draws all B·K candidates in one call, scores the
executed rows of each and keeps one per row. A reshape in the wrong order hands row b a candidate drawn for
row b' (the robot executes a chunk planned for another env's observation), and a slice off by one scores
rows the robot never executes. Here the rows differ, the fake policy draws a different chunk per candidate,
and the expected choice is recomputed one row at a time from what the policy returned.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from robosteer.policies.steering.vgps import VGPSPolicy


class DrawingPolicy:
    """Candidate p of a call is a chunk (Tp, Da) that depends on its observation row and on p itself."""

    def __init__(self, to: int, tp: int, ta: int, da: int) -> None:
        self.n_obs_steps, self.n_action_steps, self.tp, self.da = to, ta, tp, da
        self.calls: list[dict[str, torch.Tensor]] = []

    def sample(self, obs: dict, noise: object = None) -> torch.Tensor:
        self.calls.append({k: torch.as_tensor(v).clone() for k, v in obs.items()})
        state = torch.as_tensor(obs["state"])  # (N, To, 2)
        n = state.shape[0]
        p = torch.arange(n, dtype=torch.float32)
        t = torch.arange(self.tp, dtype=torch.float32)
        d = torch.arange(self.da, dtype=torch.float32)
        # a value per (row's observation, candidate, step, dim): sin keeps the scores free of ties
        return torch.sin(
            state[:, -1, 0, None, None] * 1.7 + p[:, None, None] * 0.61 + t[:, None] * 0.37 + d * 0.13
        )


def critic(obs: dict, action: torch.Tensor, task_id: object) -> torch.Tensor:
    """Q of (observation, executed actions): every row of the span and the observation count."""
    n = action.shape[0]
    flat = action.reshape(n, -1)
    weights = torch.arange(1, flat.shape[1] + 1, dtype=torch.float32)
    return torch.cos(flat * weights).sum(dim=1) + 0.3 * obs["state"][:, -1, 0]


shapes = st.integers(1, 6).flatmap(
    lambda tp: st.integers(1, tp).flatmap(
        lambda to: st.tuples(st.just(to), st.just(tp), st.integers(1, tp - to + 1))
    )
)


@given(
    rows=st.integers(1, 5),
    samples=st.integers(1, 6),
    shape=shapes,
    da=st.integers(1, 3),
    score=st.sampled_from(["first", "chunk"]),
)
def test_each_row_gets_the_best_of_its_own_candidates(rows, samples, shape, da, score) -> None:
    to, tp, ta = shape
    policy = DrawingPolicy(to, tp, ta, da)
    vgps = VGPSPolicy(policy, critic, samples=samples, temperature=0.0, score=score)
    state = torch.arange(rows * to * 2, dtype=torch.float32).reshape(rows, to, 2) * 0.1  # rows differ
    chosen = vgps.sample({"state": state})  # (B, Tp, Da)
    assert chosen.shape == (rows, tp, da) and len(policy.calls) == 1
    seen = policy.calls[0]["state"]  # (B·K, To, 2): row b's K copies side by side
    torch.testing.assert_close(seen, state.repeat_interleave(samples, dim=0), rtol=0, atol=0)
    drawn = policy.sample({"state": seen}).reshape(rows, samples, tp, da)  # the same candidates again
    span = slice(to - 1, to if score == "first" else to - 1 + ta)  # the rows the robot executes
    for b in range(rows):
        if samples == 1:
            want = drawn[b, 0]  # K = 1: the policy's chunk, the critic never asked
        else:
            q = critic({"state": state[b : b + 1].expand(samples, to, 2)}, drawn[b, :, span], None)
            want = drawn[b, int(q.argmax())]
        torch.testing.assert_close(chosen[b], want, rtol=0, atol=0)
