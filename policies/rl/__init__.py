"""RL building blocks shared by every steering method (DSRL, EXPO, V-GPS).

One replay buffer, one critic ensemble, one tanh-Gaussian actor, one temperature: every algorithm file
composes these instead of re-implementing them.
"""

from robosteer.policies.rl.actor import EncodedActor, TanhGaussianActor
from robosteer.policies.rl.critic import CriticEnsemble, NormalizedCritic, polyak_update
from robosteer.policies.rl.nets import EnsembleLinear, mlp
from robosteer.policies.rl.offline import chunk_transitions
from robosteer.policies.rl.replay import ReplayBuffer, sample_mixed
from robosteer.policies.rl.temperature import Temperature

__all__ = [
    "CriticEnsemble",
    "EncodedActor",
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
