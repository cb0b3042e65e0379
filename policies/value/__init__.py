"""Offline value learning (IQL, Cal-QL) for value-guided steering (V-GPS): one algorithm per file."""

from robosteer.policies.value.calql import CalQL, CalQLConfig
from robosteer.policies.value.iql import IQL, IQLConfig
from robosteer.policies.value.learner import (
    ALGOS,
    build_learner,
    load_critic,
    normalized_buffer,
    train_value,
    value_transitions,
)

__all__ = [
    "ALGOS",
    "IQL",
    "CalQL",
    "CalQLConfig",
    "IQLConfig",
    "build_learner",
    "load_critic",
    "normalized_buffer",
    "train_value",
    "value_transitions",
]
