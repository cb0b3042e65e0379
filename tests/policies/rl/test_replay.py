"""The replay buffer and RLPD's mixed sampling, pinned where mutation testing found them unpinned: the offline
share's exact split and the generator it draws from, an absent or empty offline buffer, the capacity bound,
each field's dtype and device, and sampling without a generator or under another default device."""

from __future__ import annotations

import pytest
import torch

from robosteer.policies.rl import ReplayBuffer, sample_mixed

torch.set_num_threads(1)


def _filled(values: torch.Tensor, capacity: int = 64) -> ReplayBuffer:
    """A buffer whose rows are told apart by ``x`` (one distinct value each)."""
    buf = ReplayBuffer(capacity, {"x": ((), torch.float32)})
    if len(values):
        buf.add(x=values)
    return buf


@pytest.mark.parametrize(("batch_size", "ratio", "n_off"), [(4, 0.25, 1), (8, 0.5, 4)])
def test_mixed_batch_is_offline_rows_then_online_rows_from_the_callers_generator(
    batch_size: int, ratio: float, n_off: int
) -> None:
    """round(B · ratio) offline rows first, then the online rest, each drawn with the generator handed in
    (online first): the same seed gives the same batch as sampling the two buffers by hand."""
    off, on = _filled(torch.arange(100.0, 140.0)), _filled(torch.arange(0.0, 40.0))
    batch = sample_mixed(off, on, batch_size, ratio, torch.Generator().manual_seed(7))["x"]
    g = torch.Generator().manual_seed(7)
    want_on = on.sample(batch_size - n_off, g)["x"]
    want_off = off.sample(n_off, g)["x"]
    assert batch.tolist() == [*want_off.tolist(), *want_on.tolist()]
    assert (batch[:n_off] >= 100).all() and (batch[n_off:] < 100).all()


@pytest.mark.parametrize("offline", [None, "empty"])
def test_mixed_batch_without_offline_rows_is_all_online(offline: str | None) -> None:
    """No offline buffer, or an empty one: the whole batch comes from online, whatever the ratio."""
    off = _filled(torch.empty(0)) if offline else None
    on = _filled(torch.arange(0.0, 40.0))
    batch = sample_mixed(off, on, 6, 0.5, torch.Generator().manual_seed(1))["x"]
    assert batch.tolist() == on.sample(6, torch.Generator().manual_seed(1))["x"].tolist()


def test_capacity_must_be_positive_and_one_is_enough() -> None:
    with pytest.raises(ValueError, match="positive"):
        ReplayBuffer(0, {"x": ((), torch.float32)})
    buf = ReplayBuffer(1, {"x": ((), torch.float32)})
    buf.add(x=torch.tensor([5.0]))
    buf.add(x=torch.tensor([6.0]))
    assert buf.sample(3)["x"].tolist() == [6.0, 6.0, 6.0]  # one row filled: sampling is allowed


def test_fields_keep_their_dtype_and_inputs_are_cast_to_it() -> None:
    """An int64 field holds 2**40 exactly (float32 could not); float64 and int inputs are cast on the way in."""
    buf = ReplayBuffer(4, {"step": ((), torch.int64), "r": ((), torch.float32), "done": ((), torch.bool)})
    buf.add(
        step=torch.tensor([2**40 + 1]),
        r=torch.tensor([0.5], dtype=torch.float64),
        done=torch.tensor([1]),
    )
    assert {k: v.dtype for k, v in buf.data.items()} == {
        "step": torch.int64,
        "r": torch.float32,
        "done": torch.bool,
    }
    got = buf.sample(2, torch.Generator().manual_seed(0))
    assert got["step"].tolist() == [2**40 + 1] * 2 and got["step"].dtype == torch.int64
    assert got["r"].dtype == torch.float32 and got["done"].tolist() == [True, True]


def test_buffer_lives_on_its_device() -> None:
    """Storage, added rows and samples all live on the buffer's device ("meta": a device that is not the CPU)."""
    buf = ReplayBuffer(4, {"x": ((2,), torch.float32)}, device="meta")
    assert buf.device == torch.device("meta") and buf.data["x"].device.type == "meta"
    buf.add(x=torch.ones(3, 2))
    assert len(buf) == 3 and buf.sample(5)["x"].device.type == "meta"


def test_sampling_without_a_generator_ignores_the_default_device() -> None:
    """No generator: indices come from the CPU, not from torch's default device (set here to "meta")."""
    buf = _filled(torch.arange(10.0, 13.0))
    with torch.device("meta"):
        drawn = buf.sample(50)["x"]
    assert drawn.device.type == "cpu" and set(drawn.tolist()) <= {10.0, 11.0, 12.0}
    with torch.device("meta"):
        drawn = buf.sample(50, torch.Generator().manual_seed(0))["x"]
    assert drawn.device.type == "cpu" and set(drawn.tolist()) == {10.0, 11.0, 12.0}
