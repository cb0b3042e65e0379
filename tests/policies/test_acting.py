"""The action queue by hand with a recording planner: rows whose observations differ, each row's own window
and chunk, re-planning only the rows whose queue ran out or were reset, history restarts, batch-size changes,
numpy/torch in and out; and ChunkPolicy's wiring to its base and planner."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from robosteer.policies.acting import ActionQueue, ChunkPolicy


class Planner:
    """Chunk row t of obs row j: [100·(current obs of j) + 10·(call number) + t, −t]; records every call."""

    def __init__(self, tp: int = 4) -> None:
        self.tp = tp
        self.calls: list[tuple[torch.Tensor, list[int] | None]] = []
        self.resets: list[list[int] | None] = []
        self.evals = 0

    def plan(self, obs: dict, rows: torch.Tensor | None) -> torch.Tensor:
        self.calls.append((obs["state"].clone(), None if rows is None else rows.tolist()))
        last = obs["state"][:, -1, 0]
        t = torch.arange(self.tp, dtype=torch.float32)
        first = 100 * last[:, None] + 10 * len(self.calls) + t[None]
        return torch.stack([first, -t[None].expand_as(first)], -1)  # (n, Tp, 2)

    def reset_rows(self, rows: torch.Tensor | None) -> None:
        self.resets.append(None if rows is None else rows.tolist())

    def eval(self) -> None:
        self.evals += 1


def _obs(step: int, b: int = 3, numpy: bool = False):
    x = np.array([[10.0 * i + step] for i in range(b)], np.float32)  # row i, step s: 10 i + s
    return {"state": x if numpy else torch.as_tensor(x)}


def test_rows_get_their_own_windows_and_chunks_and_only_empty_rows_replan() -> None:
    planner = Planner()
    q = ActionQueue(planner, n_obs_steps=2, n_action_steps=2)
    got = [q.act(_obs(s))[:, 0].tolist() for s in range(3)]
    # chunk rows 1 and 2 (from To − 1) of plan 1 (obs 10 i), then row 1 of plan 2 (obs 10 i + 2)
    assert got == [[11.0, 1011.0, 2011.0], [12.0, 1012.0, 2012.0], [221.0, 1221.0, 2221.0]]
    (w1, rows1), (w2, rows2) = planner.calls
    assert rows1 is None and w1[:, :, 0].tolist() == [[0, 0], [10, 10], [20, 20]]  # start padded
    assert rows2 is None and w2[:, :, 0].tolist() == [[1, 2], [11, 12], [21, 22]]  # oldest first
    q.reset([1])  # row 1's episode ends: its queue and history restart; the others keep theirs
    assert planner.resets[-1] == [1]
    a = q.act(_obs(3))
    assert a[:, 0].tolist() == [222.0, 100 * 13 + 30 + 1, 2222.0]
    w3, rows3 = planner.calls[2]
    assert rows3 == [1] and w3[:, :, 0].tolist() == [[13.0, 13.0]]  # only row 1, its window restarted
    a = q.act(_obs(4))  # rows 0 and 2 re-plan together; row 1 executes its second action
    assert a[:, 0].tolist() == [100 * 4 + 40 + 1, 1332.0, 100 * 24 + 40 + 1]
    w4, rows4 = planner.calls[3]
    assert rows4 == [0, 2] and w4[:, :, 0].tolist() == [[3, 4], [23, 24]]
    assert a[:, 1].tolist() == [-1.0, -2.0, -1.0]


def test_numpy_in_numpy_out_and_a_batch_size_change_starts_afresh() -> None:
    planner = Planner()
    q = ActionQueue(planner, n_obs_steps=1, n_action_steps=3)
    a = q.act(_obs(0, numpy=True))
    assert isinstance(a, np.ndarray) and a[:, 0].tolist() == [10.0, 1010.0, 2010.0]  # To = 1: from row 0
    assert isinstance(q.act(_obs(1)), torch.Tensor)
    assert planner.resets == [None]
    a = q.act(_obs(2, b=2))  # two rows now: everything restarts
    assert planner.resets == [None, None] and a[:, 0].tolist() == [220.0, 1220.0]
    assert planner.calls[-1][1] is None and q.batch == 2


def test_single_row_returns_a_copy_not_a_view_of_the_queue() -> None:
    q = ActionQueue(Planner(), n_obs_steps=1, n_action_steps=2)
    a = q.act(_obs(0, b=1))
    a += 5.0
    assert q.act(_obs(1, b=1))[0, 0].item() == 11.0
    assert q.queue[0, 0, 0].item() == 10.0


def test_reset_before_acting_or_of_all_rows_clears_everything() -> None:
    planner = Planner()
    q = ActionQueue(planner, 2, 2)
    q.reset([0])  # nothing acted yet: a full clear
    assert planner.resets == [None] and q.hist is None
    q.act(_obs(0))
    q.reset([])  # no rows: nothing to do
    assert planner.resets == [None, None] and q.hist is not None
    q.reset()
    assert planner.resets[-1] is None and q.hist is None and q.queue is None and q.batch == 0
    twin = q.fork(Planner())
    assert (twin.n_obs_steps, twin.n_action_steps, twin.device, twin.hist) == (2, 2, None, None)


def test_refusals() -> None:
    for to, ta in ((0, 1), (1, 0)):
        with pytest.raises(ValueError, match="must be >= 1"):
            ActionQueue(Planner(), to, ta)
    q = ActionQueue(Planner(tp=3), n_obs_steps=2, n_action_steps=3)
    with pytest.raises(ValueError, match=r"needs \(n, >= 4, Da\); expected n_action_steps <= 2"):
        q.act(_obs(0))


def test_chunk_policy_takes_to_ta_device_and_names_from_its_base() -> None:
    base = SimpleNamespace(
        config=SimpleNamespace(n_obs_steps=2, n_action_steps=3),
        device=torch.device("cpu"),
        shape_meta={"obs": {}},
        task="reach-v3",
        evals=0,
    )
    base.eval = lambda: setattr(base, "evals", base.evals + 1)
    planner = Planner()
    policy = ChunkPolicy(planner, base)
    assert (policy.n_obs_steps, policy.n_action_steps) == (2, 3) and policy.acting.device == base.device
    assert policy.shape_meta is base.shape_meta and policy.task == "reach-v3"
    assert ChunkPolicy(planner, base, n_action_steps=1).n_action_steps == 1
    window = {"state": np.array([[[1.0], [2.0]]], np.float32)}
    chunk = policy.sample(window)
    assert chunk[0, :, 0].tolist() == [210.0, 211.0, 212.0, 213.0] and planner.calls[-1][1] is None
    assert isinstance(planner.calls[-1][0], torch.Tensor)
    assert policy.act(_obs(0))[:, 0].tolist() == [21.0, 1021.0, 2021.0]
    policy.reset([2])
    assert planner.resets[-1] == [2]
    assert policy.eval() is policy and base.evals == 1 and planner.evals == 1


# ------------------------------------------------------------------ mutation survivors (issue 59), by behaviour
def test_two_rows_out_of_phase_each_execute_their_own_step() -> None:
    """Two rows (the single-row shortcut must not apply): after row 1's reset, row 0 executes step 1 of its
    chunk while row 1 executes step 0 of a fresh one."""
    q = ActionQueue(Planner(), n_obs_steps=1, n_action_steps=2)
    assert q.act(_obs(0, b=2))[:, 0].tolist() == [10.0, 1010.0]
    q.reset([1])
    assert q.act(_obs(1, b=2))[:, 0].tolist() == [11.0, 100 * 11 + 20]


def test_a_partial_replan_of_float64_chunks_fills_the_float32_queue() -> None:
    class Float64(Planner):
        def plan(self, obs: dict, rows: torch.Tensor | None) -> torch.Tensor:
            return super().plan(obs, rows).double()

    q = ActionQueue(Float64(), n_obs_steps=1, n_action_steps=2)
    q.act(_obs(0))
    q.reset([1])
    a = q.act(_obs(1))  # only row 1 re-plans, into the rows of the existing queue
    assert a.dtype == torch.float32 and a[:, 0].tolist() == [11.0, 100 * 11 + 20, 2011.0]


def test_a_plan_without_a_time_axis_is_refused_by_shape() -> None:
    class Flat(Planner):
        def plan(self, obs: dict, rows: torch.Tensor | None) -> torch.Tensor:
            return super().plan(obs, rows)[:, 0]  # (n, Da): no Tp axis

    with pytest.raises(ValueError, match=r"planned chunks of shape \(3, 2\).*expected n_action_steps <= 0"):
        ActionQueue(Flat(), n_obs_steps=1, n_action_steps=1).act(_obs(0))


def test_a_fork_plans_with_its_own_planner_on_the_same_device() -> None:
    first, second = Planner(), Planner()
    twin = ActionQueue(first, 1, 2, device="cpu").fork(second)
    assert twin.device == torch.device("cpu") and twin.planner is second
    twin.act(_obs(0))
    assert len(second.calls) == 1 and first.calls == []


def test_a_chunk_policy_over_a_base_without_a_task_has_none() -> None:
    base = SimpleNamespace(
        config=SimpleNamespace(n_obs_steps=1, n_action_steps=1), device=torch.device("cpu"), shape_meta={}
    )
    assert ChunkPolicy(Planner(), base).task is None
