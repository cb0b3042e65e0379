"""Training windows and dataset round trips over every shape (property-based, hypothesis).

``create_indices`` and ``SequenceDataset.get_batch`` are index arithmetic whose bugs live at episode
boundaries: episodes shorter than the window, padding wider than the episode, windows that start before an
episode or end after it. Each is checked against the definition stated one window at a time: the window
starting at step w of an episode of length L holds steps ``clip(w + j, 0, L - 1)``, for w from ``-pad_before``
to ``L - Tp + pad_after``. The dataset is written with DatasetWriter and read back first (the round trip).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from robosteer.policies.data import DatasetWriter, SequenceDataset, open_dataset
from robosteer.policies.data.sequence import create_indices


def windows_by_definition(lengths: list[int], size: int, pad_before: int, pad_after: int) -> list[list[int]]:
    """Buffer index of each position of each window, episode by episode, in order."""
    pad_before, pad_after = min(pad_before, size - 1), min(pad_after, size - 1)
    out, start = [], 0
    for length in lengths:
        for w in range(-pad_before, length - size + pad_after + 1):
            out.append([start + min(max(w + j, 0), length - 1) for j in range(size)])
        start += length
    return out


def windows_from_rows(rows: np.ndarray, size: int) -> list[list[int]]:
    """What diffusion_policy's sample_sequence builds from [buffer_start, buffer_end, sample_start, sample_end]."""
    out = []
    for buffer_start, buffer_end, sample_start, sample_end in rows.tolist():
        assert (
            0 <= sample_start < sample_end <= size and sample_end - sample_start == buffer_end - buffer_start
        )
        middle = list(range(buffer_start, buffer_end))
        out.append([middle[0]] * sample_start + middle + [middle[-1]] * (size - sample_end))
    return out


lengths = st.lists(st.integers(1, 9), min_size=1, max_size=4)


@given(lengths=lengths, size=st.integers(1, 6), pad_before=st.integers(0, 7), pad_after=st.integers(0, 7))
def test_create_indices_windows_match_their_definition(lengths, size, pad_before, pad_after) -> None:
    rows = create_indices(np.cumsum(lengths), size, pad_before=pad_before, pad_after=pad_after)
    assert rows.shape[1] == 4 and rows.dtype == np.int64
    assert windows_from_rows(rows, size) == windows_by_definition(lengths, size, pad_before, pad_after)


@given(
    lengths=lengths,
    action_dim=st.integers(1, 3),
    shape=st.integers(1, 5).flatmap(
        lambda tp: st.tuples(st.integers(1, tp), st.just(tp), st.integers(1, tp))  # (To, Tp, Ta)
    ),
)
def test_written_episodes_read_back_and_batch_into_their_windows(
    synthetic, lengths, action_dim, shape
) -> None:
    """The datasets' own synthetic episodes (conftest: values encode episode and step), of any length."""
    to, tp, ta = shape
    eps = [synthetic(i, n, action_dim=action_dim) for i, n in enumerate(lengths)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "demos.hdf5"
        with DatasetWriter(path, {"env_name": "push-v3"}, valid_fraction=0.0) as writer:
            for ep in eps:
                writer.add_episode(**ep)
        with open_dataset(path) as f:  # the round trip: every field as written, episode by episode
            for ep, back in zip(eps, f.episodes(), strict=True):
                np.testing.assert_array_equal(back["obs"]["state"], ep["obs"]["state"])
                np.testing.assert_array_equal(back["actions"], ep["actions"])
                np.testing.assert_array_equal(back["rewards"], ep["rewards"])
                np.testing.assert_array_equal(back["dones"], ep["dones"])
        data = SequenceDataset(path, ["state"], n_obs_steps=to, horizon=tp, n_action_steps=ta)
        want = windows_by_definition(lengths, tp, to - 1, ta - 1)
        assert len(data) == len(want)
        batch = data.get_batch(np.arange(len(data))[::-1])  # reversed: a batch's rows follow its indices
    states = np.concatenate([ep["obs"]["state"] for ep in eps])
    actions = np.concatenate([ep["actions"] for ep in eps])
    # (N, Tp); N = 0 when every episode is shorter than a window
    idx = np.asarray(want[::-1], dtype=np.int64).reshape(-1, tp)
    np.testing.assert_array_equal(batch["obs"]["state"].numpy(), states[idx[:, :to]])
    np.testing.assert_array_equal(batch["action"].numpy(), actions[idx])
