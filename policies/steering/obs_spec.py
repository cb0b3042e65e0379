"""What DSRL's actor and critics read, decided once.

Why an object: the pixel options (``actor_obs``, ``critic_obs``, a base that reads cameras) decide four things
together — the keys the actor reads, its input size, whether it decodes through the base's embedding and
whether it trains an encoder of its own — and the critics' inputs. They are settled once when a run is built,
recorded in its checkpoint (``DSRL.get_config``), and read back by :meth:`ObsSpec.from_record`, so a load
rebuilds the same learner instead of deriving it again from the keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robosteer.policies.steering.embedding import EMBED_KEY, BaseEmbedding, PixelEncoder


@dataclass(frozen=True)
class ObsSpec:
    """The actor's keys and size, how it sees a pixel base, and the critics' inputs (None: the actor's)."""

    actor_keys: tuple[str, ...]  # low-dim keys, (EMBED_KEY,) for a pixel base's embedding, or raw windows
    obs_dim: int  # To · Σ sizes of actor_keys (the embedding's size for EMBED_KEY)
    pixels: bool = False  # the base reads cameras: the learner decodes through its BaseEmbedding
    own_encoder: bool = (
        False  # actor_obs=encoder: the actor reads the raw windows through a PixelEncoder copy
    )
    critic_keys: tuple[str, ...] | None = None  # critic_obs=state, or the embedding under an own encoder
    critic_obs_dim: int | None = None

    def __post_init__(self) -> None:
        if self.own_encoder and not self.pixels:
            raise ValueError("ObsSpec: an own encoder (actor_obs=encoder) needs a base that reads cameras")
        if (self.critic_keys is None) != (self.critic_obs_dim is None):
            raise ValueError(
                "ObsSpec: critic_keys and critic_obs_dim go together (an asymmetric critic's inputs)"
            )

    @classmethod
    def build(
        cls,
        actor_keys: tuple[str, ...],
        obs_dim: int,
        embedding: BaseEmbedding | None = None,
        own_encoder: bool = False,
        critic: tuple[tuple[str, ...], int] | None = None,
    ) -> ObsSpec:
        """From what robosteer-steer settled: an own encoder's critics read the base's embedding unless
        ``critic`` (critic_obs=state) says otherwise."""
        if own_encoder and critic is None and embedding is not None:
            critic = ((EMBED_KEY,), embedding.dim)
        keys, dim = critic if critic is not None else (None, None)
        return cls(tuple(actor_keys), int(obs_dim), embedding is not None, own_encoder, keys, dim)

    def learner_inputs(self, base: Any, embedding: BaseEmbedding | None = None) -> dict[str, Any]:
        """DSRL's constructor arguments for these inputs over the raw ``base`` (``embedding``: its
        BaseEmbedding, when the caller holds one already); an own encoder starts as a copy of the base's."""
        if self.pixels:
            embedding = embedding or BaseEmbedding(base)
        return {
            "base": embedding if self.pixels else base,  # pixels: read the embedding, decode from it
            "obs_dim": self.obs_dim,
            "obs_keys": self.actor_keys,
            "critic_keys": self.critic_keys,
            "critic_obs_dim": self.critic_obs_dim,
            "actor_encoder": PixelEncoder(base) if self.own_encoder else None,
        }

    @classmethod
    def from_record(cls, saved: dict[str, Any]) -> ObsSpec:
        """The spec a checkpoint recorded (``DSRL.get_config``). Runs saved before ``pixels`` was recorded
        read a pixel base's embedding (``obs_keys`` is (EMBED_KEY,)) or trained an own encoder (always over
        a pixel base)."""
        keys = tuple(saved["obs_keys"])
        own = saved.get("actor_obs") == "encoder"
        pixels = bool(saved.get("pixels", keys == (EMBED_KEY,) or own))
        critic_keys = tuple(saved["critic_keys"]) if "critic_keys" in saved else None
        critic_dim = int(saved["critic_obs_dim"]) if critic_keys is not None else None
        return cls(keys, int(saved["obs_dim"]), pixels, own, critic_keys, critic_dim)
