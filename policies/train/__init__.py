"""Training infrastructure shared by every imitation algorithm: the trainer loop and EMA."""

from policies.train.ema import EMAModel
from policies.train.trainer import (
    InfiniteSampler,
    TrainConfig,
    Trainer,
    get_rng_state,
    lr_lambda,
    seed_everything,
    set_rng_state,
    train,
)

__all__ = [
    "EMAModel",
    "InfiniteSampler",
    "TrainConfig",
    "Trainer",
    "get_rng_state",
    "lr_lambda",
    "seed_everything",
    "set_rng_state",
    "train",
]
