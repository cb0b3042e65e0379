"""EXPO: Expressive Policy Optimization (Dong et al.; official code ``Servo97/EXPO``), plus RLPD.

Three parts, as in ``expo/agents/sac/expo_learner.py``:

- **Base policy** (diffusion/flow): keeps imitating offline + online episode windows, never a Q-gradient;
  an EMA copy acts.
- **Edit policy**: a tanh-Gaussian on (s, a) giving â = a + β·tanh(z), |â − a| ≤ β elementwise.
- **On-the-fly (OTF) policy**: N base samples, M of them edited once, all scored by the min over a random
  subset of target-critic heads, argmax taken; the same operator acts, evaluates and forms the TD target.

Updates (RLPD-style): ``utd`` critic steps on 50/50 offline/online batches (10 LayerNorm heads, random
2-of-10 min target, no backup entropy), then one base BC step and one edit + α step on the last critic
minibatch. β = 0 or M = 0 is best-of-N; ``policy="sac"`` is RLPD's Gaussian actor with the same critics.
The MDP action is the executed chunk (``action="chunk"``, ours) or one env step (``"single"``, the reference).
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from robosteer.policies.acting import ChunkPolicy
from robosteer.policies.bases import load_run
from robosteer.policies.rl import (
    CriticEnsemble,
    ReplayBuffer,
    TanhGaussianActor,
    Temperature,
    polyak_update,
    sample_mixed,
)
from robosteer.policies.rl.nets import optimizer_step
from robosteer.policies.steering.embedding import EMBED_KEY, BaseEmbedding, TrainableEmbedding
from robosteer.policies.steering.loop import (
    Flags,
    Obs,
    OnlineLearner,
    OnlineRunConfig,
    Sampler,
    run_online,
)

POLICIES = ("otf", "sac")
ACTIONS = ("chunk", "single")
BACKUP_BASES = ("online", "ema", "bank")
BC_ONLINE = ("all", "success")


@dataclass
class EXPOConfig:
    """Every EXPO / RLPD hyperparameter, each default written once here and labelled: "reference" is
    ``Servo97/EXPO``'s own value (configs/expo_config.py, scripts/; checked by tests/configs/test_reference_labels.py),
    "ours" differs, with a one-line reason (the runs behind each: docs/experiments/expo.md).
    configs/algo/expo.yaml composes these and sets none."""

    policy: str = "otf"  # reference; otf: EXPO (base + edit + on-the-fly argmax) | sac: RLPD's Gaussian actor
    action: str = "chunk"  # ours: the executed Ta-step chunk is one MDP action | single: one step (reference)
    # N base samples per state, M of them edited once each (0: best-of-N, no edit network); every TD target
    # decodes N base samples (reference scripts: 8 and 8; config default 32)
    num_samples: int = 4  # ours (CPU): reference 8
    num_edits: int = 4  # ours (CPU): reference 8
    # β (robomimic 0.05, pen 0.7; the reference sets it per script); 0: best-of-N
    edit_scale: float = 0.05  # reference (robomimic/mimicgen scripts)
    gamma: float = 0.95  # ours (CPU): per MDP transition, a chunk of Ta=8 steps (reference 0.99 per step)
    tau: float = 0.005  # reference: Polyak rate of the target critic (per critic step)
    base_ema: float = 0.001  # reference (tau_actor): Polyak rate of the EMA base (acting/eval), per base step
    critic_lr: float = 3e-4  # reference
    # the edit actor (RLPD: the SAC actor). The reference decays it on the base's cosine over base_decay_steps
    # = 3M gradient steps (expo_learner.py); a CPU run's tens of thousands stay within 0.1% of 3e-4
    edit_lr: float = 3e-4  # ours: constant (reference 3e-4 on a cosine decay over 3M steps)
    temperature_lr: float = 3e-4  # reference
    base_lr: float = 3e-4  # reference: AdamW with cosine decay over base_decay_steps
    base_decay_steps: int = 3_000_000  # reference
    batch_size: int = 128  # ours (CPU): every TD target decodes N base samples (reference 256)
    hidden: list[int] = field(default_factory=lambda: [256, 256, 256])  # reference: critics and edit actor
    activation: str = "relu"  # of the critics and the edit actor
    num_critics: int = 10  # reference
    num_min_qs: int = 2  # reference: random 2-of-10 min in targets and OTF scores (antmaze: 1)
    init_temperature: float = 1.0  # reference
    target_entropy: float | None = None  # reference: None is −d/2 (d: MDP action size); adjust_target_entropy
    # the reference's switch (off in every script): None's target becomes −d/2 + d·log β, the same per-dim
    # target in ε's coordinates; off, −d/2 lies above the β-box's largest entropy d·log 2β when β < e^-½/2
    adjust_target_entropy: bool = False  # reference
    backup_entropy: bool = False  # reference: EXPO has no entropy in the backup (every script); RLPD: true
    # which base decodes the TD backup's N samples at s': online (reference) | ema | bank: the EMA base's samples
    # decoded once, at storage, so a critic step decodes nothing (ours, for CPUs; docs/experiments/expo.md)
    backup_base: str = "online"  # reference
    bc_offline_ratio: float = 0.5  # share of demonstration windows in each base BC batch
    bc_buffer_size: int = 100_000  # ours: online BC windows kept (the reference imitates the replay itself)
    # which finished online episodes the base imitates: all (reference: its whole replay) | success: only those
    # that ended in success (ours, off by default; like Servo97's later third-party "success buffer")
    bc_online: str = "all"  # reference
    # base steps and edit (+ α) steps per transition, after its critic steps. The reference makes one of each
    # per env step; a chunk transition is Ta env steps, so 1 here is Ta× fewer per env step
    policy_updates: int = 1  # reference: 1 (per env step there, per chunk here)

    def __post_init__(self) -> None:
        for key, value, choices in (
            ("policy", self.policy, POLICIES),
            ("action", self.action, ACTIONS),
            ("backup_base", self.backup_base, BACKUP_BASES),
            ("bc_online", self.bc_online, BC_ONLINE),
        ):
            if value not in choices:
                raise ValueError(f"EXPO {key}={value!r} is not known: expected one of {choices}")
        if self.num_samples < 1 or not 0 <= self.num_edits <= self.num_samples:
            raise ValueError(
                f"EXPO needs num_samples >= 1 and 0 <= num_edits <= num_samples, "
                f"got num_samples={self.num_samples}, num_edits={self.num_edits}"
            )
        if self.edit_scale < 0:
            raise ValueError(f"EXPO edit_scale={self.edit_scale} is not valid: β must be >= 0 (0: best-of-N)")
        Temperature.check_lr("EXPO", self.temperature_lr)
        if self.policy_updates < 1:
            raise ValueError(
                f"EXPO policy_updates={self.policy_updates} is not valid: need >= 1 base and edit steps per "
                "transition (1: one of each per transition; Ta: the reference's one per env step)"
            )
        if not 1 <= self.num_min_qs <= self.num_critics:
            raise ValueError(
                f"EXPO num_min_qs={self.num_min_qs} must lie in [1, num_critics={self.num_critics}]"
            )
        if self.backup_base == "bank" and self.policy != "otf":
            raise ValueError(
                f"EXPO backup_base='bank' keeps base samples for the on-the-fly backup, but policy={self.policy!r} "
                "has none: use backup_base='online' (unused by RLPD), or policy='otf'"
            )
        if self.policy == "otf" and self.backup_entropy:
            raise ValueError(
                "EXPO backup_entropy=true is not defined for policy=otf (the argmax has no log-probability): "
                "use backup_entropy=false, or policy=sac for RLPD"
            )

    @property
    def edits(self) -> bool:
        """Whether the OTF set has edited candidates (β > 0 and M > 0); otherwise it is best-of-N."""
        return self.policy == "otf" and self.num_edits > 0 and self.edit_scale > 0


def expo_target_entropy(cfg: EXPOConfig, action_dim: int) -> float:
    """The α target: ``cfg.target_entropy`` if set, else −d/2, plus d·log β with ``adjust_target_entropy``
    (as ``EXPOLearner.create``). RLPD's actor (policy=sac) and best-of-N have no β to adjust for."""
    if cfg.target_entropy is not None:
        return float(cfg.target_entropy)
    target = -action_dim / 2
    if cfg.adjust_target_entropy and cfg.edits:
        target += action_dim * math.log(cfg.edit_scale)
    return target


def _cosine(step: int, total: int) -> float:
    """optax.cosine_decay_schedule's factor: 0.5·(1 + cos(π·min(step, total)/total))."""
    return 0.5 * (1.0 + math.cos(math.pi * min(step, total) / max(total, 1)))


@dataclass
class EXPORunConfig(OnlineRunConfig):
    """The shared online loop's knobs (``policies.steering.loop``), with EXPO's defaults."""

    offline_ratio: float = 0.5  # reference: RLPD symmetric sampling, half of every critic batch from offline=


class EXPO(OnlineLearner):
    """Base (trained by imitation only) + edit policy + critic ensemble, or the RLPD actor (``policy=sac``).

    ``base``: a generative policy with ``sample(obs, noise)``, ``noise_shape`` and ``loss(batch)`` (EXPO
    trains a deep copy); from pixels, its :class:`TrainableEmbedding` (obs key ``EMBED_KEY``: the learner, the
    replay and the imitation windows hold the base's embedding, and only the denoiser trains).
    ``obs_dim``: size of the flattened observation history. ``bc_offline``: demonstration windows in the base's
    ``loss`` format, see :func:`bc_windows`.
    """

    kind = "expo"

    def __init__(
        self,
        base: nn.Module,
        obs_dim: int,
        config: EXPOConfig | None = None,
        obs_keys: tuple[str, ...] = ("state",),
        bc_offline: dict[str, torch.Tensor] | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__()
        self.config = cfg = config or EXPOConfig()
        self.obs_keys = tuple(obs_keys)
        self.obs_dim = int(obs_dim)
        self.base = copy.deepcopy(base).eval()  # online params: BC updates, TD-backup samples
        self.base.requires_grad_(cfg.policy == "otf")  # RLPD never trains it
        self.base_ema = copy.deepcopy(base).eval().requires_grad_(False)  # acting and evaluation
        to, ta = base.config.n_obs_steps, base.config.n_action_steps
        self.noise_shape = tuple(base.noise_shape)  # (Tp, Da)
        self.exec_steps = ta if cfg.action == "chunk" else 1  # E: env steps per MDP action
        self.exec_slice = slice(to - 1, to - 1 + self.exec_steps)
        self.action_dim = self.exec_steps * self.noise_shape[1]  # d = E·Da
        self.taken_dim = self.action_dim
        self.critic = CriticEnsemble(
            obs_dim, self.action_dim, cfg.hidden, cfg.num_critics, layer_norm=True, act=cfg.activation
        )
        self.critic_target = self.critic.make_target()
        self.actor: TanhGaussianActor | None = None  # edit actor on (s, a) for otf, SAC actor on s for sac
        if cfg.policy == "sac" or cfg.edits:
            sac = cfg.policy == "sac"
            in_dim, scale = (obs_dim, 1.0) if sac else (obs_dim + self.action_dim, cfg.edit_scale)
            self.actor = TanhGaussianActor(
                in_dim, self.action_dim, cfg.hidden, scale=scale, act=cfg.activation, zero_init=False
            )
        self.temperature = Temperature(cfg.init_temperature, expo_target_entropy(cfg, self.action_dim))
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr)
        self.temperature_opt = torch.optim.Adam(self.temperature.parameters(), lr=cfg.temperature_lr)
        self.actor_opt = (
            torch.optim.Adam(self.actor.parameters(), lr=cfg.edit_lr) if self.actor is not None else None
        )
        self.base_opt: torch.optim.AdamW | None = None  # RLPD never trains the base
        if cfg.policy == "otf":  # weight decay: optax's default
            self.base_opt = torch.optim.AdamW(self.base.parameters(), lr=cfg.base_lr, weight_decay=1e-4)
        self.register_buffer("base_steps", torch.zeros((), dtype=torch.long))  # drives the cosine LR
        # BC windows: demonstrations (fixed) and online episodes (grown by ``observe``)
        window = {k: 1 if k == EMBED_KEY else to for k in obs_keys}  # an embedding is of the whole window
        bc_spec = {
            f"obs/{k}": ((window[k], *base.shape_meta["obs"][k]["shape"]), torch.float32) for k in obs_keys
        }
        bc_spec["action"] = (self.noise_shape, torch.float32)
        # The training device: networks, both base copies (in place: optimizers keep their parameters), BC replays.
        self.device = torch.device(device)
        self.to(self.device)
        self.bc_online = ReplayBuffer(cfg.bc_buffer_size, bc_spec, self.device)
        self.bc_offline: ReplayBuffer | None = None
        if bc_offline is not None and len(bc_offline["action"]):
            self.bc_offline = ReplayBuffer(len(bc_offline["action"]), bc_spec, self.device)
            self.bc_offline.add(**{k: bc_offline[k] for k in bc_spec})
        self._episodes: dict[int, tuple[list[dict[str, torch.Tensor]], list[torch.Tensor]]] = {}

    # ------------------------------------------------------------------------------------------- OTF
    @property
    def acting_base(self) -> nn.Module:
        """The EMA base as the generative policy itself (behind its embedding from pixels): its raw inputs."""
        return self.base_ema.base if isinstance(self.base_ema, BaseEmbedding) else self.base_ema

    def embed(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Raw obs windows → what the learner reads: the same windows, or the base's frozen embedding."""
        return self.base.embed(obs) if isinstance(self.base, BaseEmbedding) else obs

    @property
    def label(self) -> str:
        cfg = self.config
        if cfg.policy == "sac":
            return "rlpd"
        return f"expo-{cfg.action}" if cfg.edits else f"best-of-{cfg.num_samples}"

    @torch.no_grad()
    def base_samples(
        self, obs: dict[str, torch.Tensor], base: nn.Module, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """N base samples per state as MDP actions (B, N, d): the executed rows of decoded chunks."""
        b, n = next(iter(obs.values())).shape[0], self.config.num_samples
        rep = {k: obs[k].repeat_interleave(n, dim=0) for k in self.obs_keys}  # (B·N, To, D)
        noise = torch.randn(
            b * n, *self.noise_shape, generator=generator, device=self.device
        )  # (B·N, Tp, Da)
        # ours (EXPO's base sampler): sample() from given noise runs DDIM (eta = 0; a flow base: its ODE); the
        # reference samples its T=10 DDPM ancestrally (ddpm_sampler, x clipped to [-1, 1] at every step)
        chunks = torch.as_tensor(base.sample(rep, noise=noise))  # (B·N, Tp, Da)
        return chunks[:, self.exec_slice].reshape(b, n, self.action_dim)

    @torch.no_grad()
    def candidates(
        self,
        obs: dict[str, torch.Tensor],
        base: nn.Module | None,
        generator: torch.Generator | None = None,
        samples: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The OTF candidate set (B, N + M, d): N base samples, then edits of the first M of them.

        Base noise is drawn before edit noise; edits are sampled, also at evaluation (as the reference).
        ``samples`` (B, N, d): base samples decoded earlier (``backup_base="bank"``), used instead of ``base``.
        """
        cfg = self.config
        if samples is None and base is None:
            raise ValueError("EXPO candidates need a base to decode or banked samples")
        a = samples if samples is not None else self.base_samples(obs, base, generator)  # (B, N, d)
        b = a.shape[0]
        if not cfg.edits:
            return a
        m = cfg.num_edits
        src = a[:, :m].reshape(b * m, self.action_dim)  # (B·M, d)
        s = self.features(obs).repeat_interleave(m, dim=0)  # (B·M, S)
        eps, _ = self.actor(torch.cat([s, src], dim=-1), generator=generator)  # (B·M, d) in ±β
        return torch.cat([a, (src + eps).reshape(b, m, self.action_dim)], dim=1)  # (B, N + M, d)

    @torch.no_grad()
    def select(
        self, obs: dict[str, torch.Tensor], cands: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Argmax over candidates (B, C, d) of the min over a random ``num_min_qs`` of the target heads."""
        b, c, d = cands.shape
        s = self.features(obs).repeat_interleave(c, dim=0)  # (B·C, S)
        q = self.critic_target.subset_min(s, cands.reshape(b * c, d), self.config.num_min_qs, generator)
        idx = q.reshape(b, c).argmax(dim=1)  # (B,)
        return cands[torch.arange(b, device=cands.device), idx], idx

    @torch.no_grad()
    def policy_action(
        self,
        obs: dict[str, torch.Tensor],
        base: nn.Module,
        generator: torch.Generator | None = None,
        deterministic: bool = False,
    ) -> torch.Tensor:
        """The MDP action (B, d): the OTF argmax (otf) or the SAC actor's sample / mean (sac)."""
        if self.config.policy == "sac":
            a, _ = self.actor(self.features(obs), deterministic=deterministic, generator=generator)
            return a
        return self.select(obs, self.candidates(obs, base, generator), generator)[0]

    def to_chunk(self, action: torch.Tensor) -> torch.Tensor:
        """Flat MDP action (B, d) → executed chunk (B, E, Da)."""
        return action.reshape(action.shape[0], self.exec_steps, self.noise_shape[1])

    # ------------------------------------------------------------------------------------- learning
    def td_target(
        self, batch: dict[str, Any], generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(y (B,), a*' (B, d)): y = r + γ·(1 − done)·min_subset Q_targ(s', a*'), a*' = OTF(s') or π(s')."""
        cfg = self.config
        with torch.no_grad():
            s2 = self.features(batch["next_obs"])
            if cfg.policy == "sac":
                a2, logp2 = self.actor(s2, generator=generator)
            elif cfg.backup_base == "bank":  # the samples stored with the transition, fresh edits and scores
                cands = self.candidates(batch["next_obs"], None, generator, samples=batch["next_base"])
                a2 = self.select(batch["next_obs"], cands, generator)[0]
            else:
                base = self.base if cfg.backup_base == "online" else self.base_ema
                a2 = self.policy_action(batch["next_obs"], base, generator)
            q2 = self.critic_target.subset_min(s2, a2, cfg.num_min_qs, generator)  # (B,)
            if cfg.backup_entropy:
                q2 = q2 - self.temperature.alpha * logp2
            y = batch["reward"].float() + (1.0 - batch["done"].float()) * cfg.gamma * q2  # (B,)
        return y, a2

    def critic_loss(self, batch: dict[str, Any], generator: torch.Generator | None = None) -> torch.Tensor:
        """mean over heads and batch of (Q_i(s, a) − y)², a = the replay's executed action."""
        y, _ = self.td_target(batch, generator)
        q = self.critic(self.features(batch["obs"]), batch["taken"].flatten(1))  # (E, B)
        return ((q - y.unsqueeze(0)) ** 2).mean()

    def actor_loss(
        self, batch: dict[str, Any], generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """EXPO edit: α·log π(ε|s, a) − mean_heads Q(s, a + ε), a = the replay action (reference);
        RLPD: α·log π(a|s) − mean_heads Q(s, a). Returns (loss, log π)."""
        s = self.features(batch["obs"])
        if self.config.policy == "sac":
            a, logp = self.actor(s, generator=generator)
        else:
            a0 = batch["taken"].flatten(1)  # (B, d)
            eps, logp = self.actor(torch.cat([s, a0], dim=-1), generator=generator)
            a = a0 + eps
        q = self.critic(s, a).mean(dim=0)  # (B,)
        return (self.temperature.alpha * logp - q).mean(), logp

    def update_critic(
        self, batch: dict[str, Any], generator: torch.Generator | None = None
    ) -> dict[str, float]:
        loss = self.critic_loss(batch, generator)
        optimizer_step(self.critic_opt, loss)
        polyak_update(self.critic_target, self.critic, self.config.tau)
        return {"critic_loss": loss.item()}

    def update_actor(
        self, batch: dict[str, Any], generator: torch.Generator | None = None
    ) -> dict[str, float]:
        """One edit (or RLPD actor) step and one temperature step."""
        if self.actor is None:
            return {}
        loss, logp = self.actor_loss(batch, generator)
        optimizer_step(self.actor_opt, loss)
        self.critic_opt.zero_grad(set_to_none=True)  # the actor step leaves grads on the critics: drop them
        optimizer_step(self.temperature_opt, self.temperature.loss(logp))
        return {
            "actor_loss": loss.item(),
            "alpha": self.temperature.alpha.item(),
            "entropy": -logp.mean().item(),
        }

    def bc_batch(self, batch_size: int, generator: torch.Generator | None = None) -> dict[str, Any] | None:
        """A base-loss batch ``{"obs": {k: (B, To, ...)}, "action": (B, Tp, Da)}``: demos at
        ``bc_offline_ratio``, online episode windows for the rest (all demos until an episode has ended)."""
        if len(self.bc_online) == 0:
            if self.bc_offline is None:
                return None
            flat = self.bc_offline.sample(batch_size, generator)
        else:
            flat = sample_mixed(
                self.bc_offline, self.bc_online, batch_size, self.config.bc_offline_ratio, generator
            )
        return {"obs": {k: flat[f"obs/{k}"] for k in self.obs_keys}, "action": flat["action"]}

    def update_base(self, generator: torch.Generator | None = None) -> dict[str, float]:
        """One imitation step of the online base (its own ``loss``), then the EMA base follows."""
        cfg = self.config
        batch = self.bc_batch(cfg.batch_size, generator) if self.base_opt is not None else None
        if batch is None:
            return {}
        for group in self.base_opt.param_groups:
            group["lr"] = cfg.base_lr * _cosine(int(self.base_steps), cfg.base_decay_steps)
        self.base.train()
        loss, _ = self.base.loss(batch)
        self.base.eval()
        optimizer_step(self.base_opt, loss)
        self.base_steps += 1
        polyak_update(self.base_ema, self.base, cfg.base_ema)
        return {"base_loss": loss.item()}

    # ------------------------------------------------------- the shared loop's learner protocol
    def warmup_action(
        self, obs: dict[str, torch.Tensor], generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Uniform random actions in [−1, 1] (the reference's ``start_training`` steps)."""
        b = next(iter(obs.values())).shape[0]
        a = torch.rand(b, self.action_dim, generator=generator, device=self.device) * 2 - 1  # (B, d)
        return a, self.to_chunk(a)

    def explore(
        self, obs: dict[str, torch.Tensor], generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        a = self.policy_action(obs, self.base_ema, generator)  # (B, d): acting uses the EMA base
        return a, self.to_chunk(a)

    def learn(
        self, n_updates: int, n_transitions: int, sample: Sampler, generator: torch.Generator
    ) -> dict[str, float]:
        """Per transition: its share of the ``n_updates`` critic steps, then ``policy_updates`` base steps and
        edit + α steps, the edit steps on the last ``policy_updates`` critic minibatches (one: the reference's
        ``update``; with fewer minibatches the first is reused)."""
        stats: dict[str, float] = {}
        per, extra = divmod(n_updates, max(n_transitions, 1))
        k = self.config.policy_updates
        for i in range(n_transitions):
            batches: list[dict[str, Any]] = []
            for _ in range(per + (1 if i < extra else 0)):
                batches.append(sample(self.config.batch_size))
                stats.update(self.update_critic(batches[-1], generator))
            for j in range(k):
                stats.update(self.update_base(generator))
                if batches:
                    last_k = batches[max(len(batches) - k + j, 0)]  # ends on the last minibatch
                    stats.update(self.update_actor(last_k, generator))
        return stats

    def observe(self, obs: Obs, chunk: torch.Tensor, steps: Flags, done: Flags, success: Flags) -> None:
        """Record executed steps per env; a finished episode becomes BC windows (one per MDP step), with
        ``bc_online="success"`` only if it ended in success."""
        if self.config.policy != "otf":
            return
        for i in range(chunk.shape[0]):
            starts, actions = self._episodes.setdefault(i, ([], []))
            starts.append({k: obs[k][i] for k in self.obs_keys})
            actions.append(chunk[i, : int(steps[i])])
            if done[i]:
                if self.config.bc_online == "all" or success[i]:
                    self.bc_online.add(
                        **episode_windows(starts, actions, self.exec_slice.start, self.noise_shape[0])
                    )
                del self._episodes[i]

    def observe_recorded_episode(
        self, obs: Obs, taken: torch.Tensor, success: bool, person: torch.Tensor | None
    ) -> None:
        """A robot's recorded episode as BC windows, as :meth:`observe` makes them from a simulator episode
        (``bc_online="success"``: only a successful one); the chunks a person commanded (interventions) are
        imitated whatever ``bc_online`` says. The base on disk never changes: this trains the online copy."""
        if self.config.policy != "otf" or len(taken) == 0:
            return
        starts = [{k: obs[k][j] for k in self.obs_keys} for j in range(len(taken))]
        chunks = [self.to_chunk(a[None])[0] for a in taken]  # (E, Da) each
        windows = episode_windows(starts, chunks, self.exec_slice.start, self.noise_shape[0])
        keep = torch.full((len(taken),), self.config.bc_online == "all" or success, device=taken.device)
        if person is not None:
            keep = keep | person.to(keep.device)
        if bool(keep.any()):
            self.bc_online.add(**{k: v[keep.to(v.device)] for k, v in windows.items()})

    def eval_policy(self) -> OTFPolicy:
        return OTFPolicy(self)

    def transition_fields(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        """``next_base`` (N, d) with ``backup_base="bank"``: the TD backup's base samples at s'."""
        if self.config.backup_base != "bank":
            return {}
        return {"next_base": ((self.config.num_samples, self.action_dim), torch.float32)}

    def transition_extras(
        self, next_obs: dict[str, torch.Tensor], generator: torch.Generator
    ) -> dict[str, torch.Tensor]:
        """The EMA base's N samples at each s' (B, N, d), decoded once when the transition is stored."""
        if self.config.backup_base != "bank":
            return {}
        return {"next_base": self.base_samples(next_obs, self.base_ema, generator)}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        opts = {"critic": self.critic_opt, "temperature": self.temperature_opt}
        opts.update(actor=self.actor_opt, base=self.base_opt)
        return {name: opt for name, opt in opts.items() if opt is not None}

    def extra_state(self) -> dict[str, Any]:
        """The online BC replay and the episodes in flight (their starts and chunks, BC windows once they end)."""
        in_flight = {
            str(i): {"starts": starts, "actions": actions} for i, (starts, actions) in self._episodes.items()
        }
        return {"bc_online": self.bc_online.state_dict(), "bc_in_flight": in_flight}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.bc_online.load_state_dict(state["bc_online"])
        dev = self.device
        self._episodes = {  # absent from a checkpoint written before it was kept: the episodes restart anyway
            int(i): (
                [{k: v.to(dev) for k, v in start.items()} for start in ep["starts"]],
                [a.to(dev) for a in ep["actions"]],
            )
            for i, ep in state.get("bc_in_flight", {}).items()
        }

    def get_config(self) -> dict[str, Any]:
        return {"expo": asdict(self.config), "obs_dim": self.obs_dim, "obs_keys": list(self.obs_keys)}


def episode_windows(
    starts: Sequence[dict[str, torch.Tensor]], actions: Sequence[torch.Tensor], before: int, horizon: int
) -> dict[str, torch.Tensor]:
    """BC windows of one online episode, one per MDP step, in ``SequenceDataset``'s convention.

    ``starts``: the history (To, ...) at each MDP step; ``actions``: the (E_j, Da) steps executed there.
    Window j holds actions t_j − ``before`` ... + Tp − 1, padded with the episode's first/last action.
    """
    acts = torch.cat(list(actions))  # (T, Da)
    t0 = torch.tensor([0] + [len(a) for a in actions[:-1]]).cumsum(0)  # (J,) step index of each MDP step
    idx = (t0[:, None] - before + torch.arange(horizon)[None]).clamp(0, len(acts) - 1)  # (J, Tp)
    out = {f"obs/{k}": torch.stack([s[k] for s in starts]) for k in starts[0]}  # (J, To, ...)
    out["action"] = acts[idx.to(acts.device)]  # (J, Tp, Da)
    return out


def bc_windows(
    path: str | os.PathLike,
    obs_keys: Sequence[str],
    n_obs_steps: int,
    horizon: int,
    n_action_steps: int,
    obs_transform: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None,
) -> dict[str, torch.Tensor]:
    """Every training window of a demonstration file in the base's ``loss`` format, as flat tensors.

    ``obs_transform``: maps the raw windows {key: (N, To, ...)} to what the base's loss reads instead (from
    pixels: ``BaseEmbedding.transform``, the windows' embeddings (N, 1, G)), as ``chunk_transitions``'s."""
    from robosteer.policies.data.sequence import SequenceDataset

    ds = SequenceDataset(path, obs_keys, n_obs_steps, horizon, n_action_steps, split="all")
    batch = ds.get_batch(np.arange(len(ds)))
    obs = batch["obs"]
    if obs_transform is not None:
        mapped = obs_transform({k: v.numpy() for k, v in obs.items()})
        obs = {k: torch.as_tensor(v) for k, v in mapped.items()}
    return {**{f"obs/{k}": v for k, v in obs.items()}, "action": batch["action"]}


class OTFPlanner:
    """EXPO's chunk planner: executed rows chosen by the OTF operator over the EMA base (RLPD: the mean)."""

    def __init__(self, agent: EXPO) -> None:
        self.agent = agent

    def plan(self, obs: dict[str, torch.Tensor], rows: torch.Tensor | None) -> torch.Tensor:
        agent = self.agent
        obs = agent.embed(obs)  # pixels: raw windows -> {EMBED_KEY: (n, 1, G)}
        a = agent.policy_action(obs, agent.base_ema, deterministic=True)  # (n, d)
        plan = torch.zeros(a.shape[0], *agent.noise_shape, device=a.device)  # (n, Tp, Da); executed rows read
        plan[:, agent.exec_slice] = agent.to_chunk(a)
        return plan

    def reset_rows(self, rows: torch.Tensor | None) -> None:
        """Stateless: every chunk depends on the current obs window only."""

    def eval(self) -> OTFPlanner:
        self.agent.eval()
        return self


class OTFPolicy(ChunkPolicy):
    """The EMA base's To and inputs (its raw ones from pixels), acting through :class:`OTFPlanner` under the
    shared action queue."""

    def __init__(self, agent: EXPO) -> None:
        super().__init__(OTFPlanner(agent), agent.acting_base, n_action_steps=agent.exec_steps)
        self.agent = agent


def run_expo(agent: EXPO, env: Any, cfg: Any, out_dir: str, **kwargs: Any) -> dict[str, Any]:
    """Train ``agent`` with the shared chunk-MDP loop (``run_online``'s keywords: ``eval_fn``, ``offline`` demo
    transitions mixed into critic batches at ``offline_ratio`` (RLPD's symmetric 0.5), ``resume``, ...)."""
    return {"variant": agent.label, **run_online(agent, env, cfg, out_dir, **kwargs)}


def load_expo_policy(path: str, which: str = "latest", device: str | torch.device = "cpu") -> OTFPolicy:
    """Rebuild an EXPO / RLPD / best-of-N agent on ``device`` from its run directory (or checkpoint) for
    evaluation: the base's architecture from the recorded base run (:func:`load_run`), its weights from this run."""
    ck, base = load_run(path, which, "expo", ("obs_dim", "obs_keys", "expo"))
    cfg = ck.config
    acting = EXPOConfig(**{**cfg["expo"], "bc_buffer_size": 1})  # acting needs no imitation windows
    keys = tuple(cfg["obs_keys"])
    learner_base = TrainableEmbedding(base) if keys == (EMBED_KEY,) else base
    agent = EXPO(learner_base, int(cfg["obs_dim"]), acting, keys, device=device)
    agent.load_state_dict(ck.modules["agent"])
    policy = OTFPolicy(agent.eval())
    policy.task = cfg.get("task") or getattr(base, "task", None)
    return policy
