"""Datasets: robomimic-layout HDF5 writer/reader, sequence windows for training, normalisation stats.

``SequenceDataset`` (torch) is imported lazily so that the writer, reader and ``robosteer-dataset`` load no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from robosteer.policies.data.errors import DatasetError
from robosteer.policies.data.hdf5 import DatasetWriter, DemoFile, open_dataset, split_names
from robosteer.policies.data.stats import RunningStats, compute_stats

if TYPE_CHECKING:
    from robosteer.policies.data.sequence import SequenceDataset, create_indices

__all__ = [
    "DatasetError",
    "DatasetWriter",
    "DemoFile",
    "RunningStats",
    "SequenceDataset",
    "compute_stats",
    "create_indices",
    "open_dataset",
    "split_names",
]


def __getattr__(name: str) -> Any:
    if name in ("SequenceDataset", "create_indices"):
        from robosteer.policies.data import sequence

        return getattr(sequence, name)
    raise AttributeError(f"module 'robosteer.policies.data' has no attribute {name!r}")
