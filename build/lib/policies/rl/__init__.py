"""RL building blocks shared by every steering method (DSRL, EXPO, V-GPS).

One replay buffer, one critic ensemble, one tanh-Gaussian actor, one temperature: every algorithm file
composes these instead of re-implementing them.
"""

from policies.rl.actor import TanhGaussianActor
from policies.rl.critic import CriticEnsemble, NormalizedCritic, polyak_update
from policies.rl.nets import EnsembleLinear, mlp
from policies.rl.offline import chunk_transitions
from policies.rl.replay import ReplayBuffer, sample_mixed
from policies.rl.temperature import Temperature

__all__ = [
    "CriticEnsemble",
    "EnsembleLinear",
    "NormalizedCritic",
    "ReplayBuffer",
    "TanhGaussianActor",
    "Temperature",
    "chunk_transitions",
    "mlp",
    "polyak_update",
    "sample_mixed",
]
