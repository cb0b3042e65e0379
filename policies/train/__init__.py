"""Training infrastructure shared by every imitation algorithm: the trainer loop and EMA.

``lr_lambda`` (policies.optim) and the RNG helpers (policies.rng) are re-exported for older imports.
"""

from robosteer.policies.optim import lr_lambda
from robosteer.policies.rng import get_rng_state, seed_everything, set_rng_state
from robosteer.policies.train.ema import EMAModel
from robosteer.policies.train.trainer import InfiniteSampler, TrainConfig, Trainer, train

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
