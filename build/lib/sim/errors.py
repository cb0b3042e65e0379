"""Errors raised by ``sim`` for bad user choices (task names, observation modes, cameras).

Every message names the bad value, what was expected and the nearest valid choice, so a typo in a
config override (``task=push-v2``) is fixed from the message alone.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class InvalidChoiceError(ValueError):
    """A value is not one of a fixed set of valid choices (obs mode, camera, reward, vectorization)."""

    def __init__(self, kind: str, value: object, choices: Iterable[str]) -> None:
        self.kind = kind
        self.value = value
        self.choices = sorted(str(c) for c in choices)
        self.suggestions = difflib.get_close_matches(str(value), self.choices, n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(repr(s) for s in self.suggestions)}?" if self.suggestions else ""
        listing = ", ".join(self.choices) if len(self.choices) <= 12 else f"{len(self.choices)} choices"
        self.message = f"unknown {kind} {value!r}: expected one of [{listing}]{hint}"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class TaskNotFoundError(InvalidChoiceError, KeyError):
    """An unknown task name; a KeyError (it is a registry lookup) and a ValueError (it is a bad argument)."""

    def __init__(self, value: object, choices: Iterable[str]) -> None:
        super().__init__("task", value, choices)
        if not self.suggestions:
            self.message += " (see sim.list_tasks())"

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return self.message


def check_choice(kind: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise InvalidChoiceError naming the nearest one."""
    choices = list(choices)
    if value not in choices:
        raise InvalidChoiceError(kind, value, choices)
    return str(value)
