"""The one exception the dataset layer raises, and the "did you mean" helper its messages use."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class DatasetError(ValueError):
    """A dataset file is missing, unreadable or breaks the robomimic HDF5 layout.

    The message always names the file, the missing or bad key/path, what was expected and, where one
    exists, the nearest valid choice. h5py's own exceptions are chained (``raise ... from err``), never
    leaked.
    """


def nearest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The ``n`` choices closest to ``name`` (difflib ratio), best first; used for "did you mean" hints."""
    choices = list(choices)
    low = name.lower()
    prefix = [c for c in choices if c.lower().startswith(low) or low.startswith(c.lower())]
    close = difflib.get_close_matches(name, choices, n=n, cutoff=0.4)
    ranked = list(dict.fromkeys(sorted(prefix, key=len) + close))
    if ranked:
        return ranked[:n]
    # Nothing similar by spelling: fall back to substring matches, then to the first few choices.
    sub = [c for c in choices if low in c.lower() or c.lower() in low]
    return (sub or choices)[:n]


def hint(name: str, choices: Iterable[str]) -> str:
    """A " (did you mean ...? available: ...)" suffix for error messages."""
    choices = sorted(choices)
    if not choices:
        return " (none available)"
    near = nearest(name, choices)
    shown = ", ".join(repr(c) for c in choices[:12]) + (", ..." if len(choices) > 12 else "")
    return f"; did you mean {' or '.join(repr(c) for c in near)}? available: {shown}"
