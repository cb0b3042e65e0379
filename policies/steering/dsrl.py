"""DSRL: steer a frozen diffusion/flow policy by RL over its initial noise (Wagenmaker et al.).

The base policy is a black box ``sample(obs, noise) -> (B, Tp, Da)`` (DDIM with eta=0 or the flow ODE),
so a latent ``w`` deterministically decodes to an action chunk. Two variants, as in ``ajwagen/dsrl``:

- ``sac``: plain SAC whose action is the latent, ``w = M·tanh(u)``; critic Q(s, w) with a Polyak target.
- ``na`` (noise-aliased): Q^A(s, a) is learned on *executed* action chunks (so offline demonstrations can
  fill the buffer) and distilled into Q^W(s, w) ≈ Q^A(s, π(s, w)) with w ~ N(0, I); the actor trains only
  against Q^W. The latent is bounded by tanh to ±``latent_bound`` (the reference uses the env bound, 1).

The base is never handed to an optimizer, never registered as a sub-module (so it is not in this module's
state dict), and always decoded under ``torch.no_grad()``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from policies.rl import CriticEnsemble, TanhGaussianActor, Temperature, polyak_update

VARIANTS = ("na", "sac")
LATENTS = ("full", "shared")


class NoiseDecoder(Protocol):
    """What DSRL needs of a base policy: a deterministic noise → chunk map."""

    noise_shape: tuple[int, ...]

    def sample(self, obs: dict[str, torch.Tensor], noise: torch.Tensor | None = None) -> torch.Tensor: ...


@dataclass
class DSRLConfig:
    """Every DSRL hyperparameter; defaults follow ``ajwagen/dsrl`` (cfg/robomimic) unless noted."""

    variant: str = "na"  # na | sac
    gamma: float = 0.99  # discount per chunk transition
    tau: float = 0.005  # Polyak rate of the target critic
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    temperature_lr: float = 3e-4
    batch_size: int = 256
    hidden: list[int] = field(default_factory=lambda: [256, 256, 256])  # reference: 3×2048 on GPU
    activation: str = "tanh"  # the reference actor and critics use Tanh + LayerNorm
    num_critics: int = 2
    backup: str = "min"  # min | mean over target heads
    latent_bound: float = 1.0  # NA: the env bound (reference ignores action_magnitude); SAC: action_magnitude
    init_temperature: float = 1.0
    target_entropy: float = 0.0  # the reference configs' target_ent
    noise_critic_steps: int = 10  # NA: Q^W distillation steps per update call
    backup_entropy: bool = True  # subtract α·log π(w'|s') in the TD target (SB3 SAC does)
    # full: one latent per (Tp, Da) noise entry (ajwagen/dsrl) | shared: one Da-vector repeated over the Tp rows
    # (nakamotoo/dsrl_pi0's choice: a far smaller space for the critics to cover; check the base's success
    # with repeated noise first, some bases degrade with it)
    latent: str = "full"

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"DSRL variant {self.variant!r} is not known: expected one of {VARIANTS}")
        if self.backup not in ("min", "mean"):
            raise ValueError(f"DSRL backup {self.backup!r} is not known: expected 'min' or 'mean'")
        if self.latent not in LATENTS:
            raise ValueError(f"DSRL latent={self.latent!r} is not known: expected one of {LATENTS}")


class DSRL(nn.Module):
    """Latent-noise actor and critics over a frozen base policy.

    ``obs_dim``: size of the flattened observation features the actor and critics see (the concatenated
    low-dim observation history). ``exec_slice``: which rows of the decoded (Tp, Da) chunk are executed.
    """

    def __init__(
        self,
        base: NoiseDecoder,
        obs_dim: int,
        exec_slice: slice,
        config: DSRLConfig | None = None,
        obs_keys: tuple[str, ...] = ("state",),
    ) -> None:
        super().__init__()
        self.config = cfg = config or DSRLConfig()
        object.__setattr__(self, "base", base)  # not a sub-module: stays out of state_dict and optimizers
        if isinstance(base, nn.Module):
            base.requires_grad_(False)
            base.eval()
        self.obs_keys = tuple(obs_keys)
        self.obs_dim = int(obs_dim)
        self.exec_slice = exec_slice
        self.noise_shape = tuple(base.noise_shape)  # (Tp, Da): what the base's sampler takes
        self.latent_shape = (1, self.noise_shape[1]) if cfg.latent == "shared" else self.noise_shape
        self.latent_dim = math.prod(self.latent_shape)
        self.exec_dim = len(range(*exec_slice.indices(self.noise_shape[0]))) * self.noise_shape[1]
        kw = {"hidden": cfg.hidden, "num_critics": cfg.num_critics, "layer_norm": True, "act": cfg.activation}
        self.actor = TanhGaussianActor(
            obs_dim,
            self.latent_dim,
            hidden=cfg.hidden,
            scale=cfg.latent_bound,
            act=cfg.activation,
            layer_norm=True,
            zero_init=True,
        )
        self.temperature = Temperature(cfg.init_temperature, cfg.target_entropy)
        if cfg.variant == "na":
            self.critic = CriticEnsemble(obs_dim, self.exec_dim, **kw)  # Q^A(s, a_executed)
            self.noise_critic = CriticEnsemble(obs_dim, self.latent_dim, **kw)  # Q^W(s, w), no target
            self.noise_critic_opt = torch.optim.Adam(self.noise_critic.parameters(), lr=cfg.critic_lr)
        else:
            self.critic = CriticEnsemble(obs_dim, self.latent_dim, **kw)  # Q(s, w)
        self.critic_target = self.critic.make_target()
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.actor_lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr)
        self.temperature_opt = torch.optim.Adam(self.temperature.parameters(), lr=cfg.temperature_lr)

    # ----------------------------------------------------------------------------------------- acting
    def features(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Flattened low-dim observation history: {key: (B, To, D)} → (B, To·ΣD)."""
        return torch.cat([obs[k].flatten(1).float() for k in self.obs_keys], dim=-1)

    def to_noise(self, latent: torch.Tensor) -> torch.Tensor:
        """Latent (B, latent_dim) → the base's initial noise (B, Tp, Da) (rows repeated if ``shared``)."""
        w = latent.reshape(latent.shape[0], *self.latent_shape)
        return w.expand(latent.shape[0], *self.noise_shape).contiguous()

    @torch.no_grad()
    def decode(self, obs: dict[str, torch.Tensor], latent: torch.Tensor) -> torch.Tensor:
        """Executed chunk (B, Ta, Da) of the frozen base for latent (B, latent_dim); no autograd graph."""
        noise = self.to_noise(latent)  # (B, Tp, Da)
        chunk = torch.as_tensor(self.base.sample(obs, noise=noise))  # (B, Tp, Da)
        return chunk[:, self.exec_slice]

    @torch.no_grad()
    def act(
        self,
        obs: dict[str, torch.Tensor],
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(latent (B, Tp·Da), executed chunk (B, Ta, Da)) for the current observation history."""
        latent, _ = self.actor(self.features(obs), deterministic=deterministic, generator=generator)
        return latent, self.decode(obs, latent)

    def random_latent(self, batch: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Warm-up latents: N(0, I), unclipped for NA; clipped to the bound for SAC (as the reference)."""
        w = torch.randn(batch, self.latent_dim, generator=generator)
        return (
            w if self.config.variant == "na" else w.clamp(-self.config.latent_bound, self.config.latent_bound)
        )

    # ---------------------------------------------------------------------------------------- learning
    def update(self, batch: dict[str, Any], generator: torch.Generator | None = None) -> dict[str, float]:
        """One critic + actor + temperature step on a replay batch.

        ``batch``: ``obs``/``next_obs`` dicts of (B, To, D), ``reward`` (B,), ``done`` (B,) (1 only on true
        termination), and ``action`` (B, Ta·Da) executed chunks for NA or ``latent`` (B, Tp·Da) for SAC.
        """
        cfg = self.config
        s, s2 = self.features(batch["obs"]), self.features(batch["next_obs"])
        reward, done = batch["reward"].float(), batch["done"].float()
        alpha = self.temperature.alpha

        with torch.no_grad():
            w2, logp2 = self.actor(s2, generator=generator)
            if cfg.variant == "na":
                a2 = self.decode(batch["next_obs"], w2).flatten(1)  # a' = π_dp(s', w')
                q2 = self.critic_target(s2, a2)
            else:
                q2 = self.critic_target(s2, w2)
            q2 = self.critic_target.reduce(q2, cfg.backup)
            if cfg.backup_entropy:
                q2 = q2 - alpha * logp2
            target = reward + (1.0 - done) * cfg.gamma * q2  # (B,)

        taken = batch["action"].flatten(1) if cfg.variant == "na" else batch["latent"].flatten(1)
        q = self.critic(s, taken)  # (E, B)
        critic_loss = 0.5 * ((q - target.unsqueeze(0)) ** 2).mean(dim=1).sum()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()

        actor_loss, logp = self.actor_loss(s, alpha, generator)
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        self.critic_opt.zero_grad(set_to_none=True)  # the actor step leaves grads on the critics: drop them
        if cfg.variant == "na":
            self.noise_critic_opt.zero_grad(set_to_none=True)

        temp_loss = self.temperature.loss(logp)
        self.temperature_opt.zero_grad(set_to_none=True)
        temp_loss.backward()
        self.temperature_opt.step()
        polyak_update(self.critic_target, self.critic, cfg.tau)
        return {
            "critic_loss": critic_loss.item(),
            "actor_loss": actor_loss.item(),
            "q": q.mean().item(),
            "alpha": alpha.item(),
            "entropy": -logp.detach().mean().item(),
            "target_q": target.mean().item(),
        }

    def actor_loss(
        self, s: torch.Tensor, alpha: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(α·log π(w̃|s) − min Q(s, w̃)).mean() — against Q^W for NA, never Q^A; also returns log π."""
        w, logp = self.actor(s, generator=generator)
        actor_critic = self.noise_critic if self.config.variant == "na" else self.critic
        q_pi = actor_critic.reduce(actor_critic(s, w), "min")
        return (alpha * logp - q_pi).mean(), logp

    def update_noise_critic(
        self, obs: dict[str, torch.Tensor], generator: torch.Generator | None = None
    ) -> dict[str, float]:
        """NA distillation: Q^W_i(s, w) ← Q^A_i(s, π_dp(s, w)), w ~ N(0, I) unclipped, online Q^A."""
        s = self.features(obs)
        w = torch.randn(s.shape[0], self.latent_dim, generator=generator)
        with torch.no_grad():
            target = self.critic(s, self.decode(obs, w).flatten(1))  # (E, B)
        loss = 0.5 * F.mse_loss(self.noise_critic(s, w), target, reduction="none").mean(dim=1).sum()
        self.noise_critic_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.noise_critic_opt.step()
        return {"noise_critic_loss": loss.item()}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Every optimizer, by name (checkpointed for an exact resume of the learner)."""
        opts = {"actor": self.actor_opt, "critic": self.critic_opt, "temperature": self.temperature_opt}
        if self.config.variant == "na":
            opts["noise_critic"] = self.noise_critic_opt
        return opts

    def get_config(self) -> dict[str, Any]:
        return {
            "dsrl": asdict(self.config),
            "obs_dim": self.obs_dim,
            "latent_shape": list(self.latent_shape),
            "exec_slice": [self.exec_slice.start, self.exec_slice.stop],
            "obs_keys": list(self.obs_keys),
        }


# ================================================================================================ running
@dataclass
class DSRLRunConfig:
    """The online loop's knobs (per-chunk MDP; all counts in env steps unless named otherwise)."""

    env_steps: int = 100_000  # budget of executed env steps (chunks × steps executed)
    warmup_chunks: int = 200  # chunk transitions collected with w ~ N(0, I) before learning starts
    utd: float = 1.0  # critic/actor gradient steps per collected chunk transition
    reward: str = "sparse"  # sparse: −1 per chunk, 0 on the chunk that succeeds | dense: summed env reward
    buffer_size: int = 500_000  # chunk transitions
    offline_ratio: float = 0.0  # NA only: share of every batch drawn from the offline demonstrations
    eval_every: int = 10_000
    eval_episodes: int = 50
    checkpoint_every: int = 10_000
    log_every: int = 1_000
    seed: int = 0
    max_minutes: float | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if self.reward not in ("sparse", "dense"):
            raise ValueError(f"reward={self.reward!r} is not known: expected 'sparse' or 'dense'")


class SteeredPolicy:
    """The base policy's own ``act``/``reset`` machinery, with every chunk planned from the actor's latent.

    Lets the evaluation harness (and later the policy server) run base + steering actor exactly like any
    policy: per-step ``act(obs)``, To-step history, Ta-step action queue, per-row resets.
    """

    def __init__(self, base: Any, agent: DSRL, deterministic: bool = True) -> None:
        import copy

        self.agent = agent
        self.deterministic = deterministic
        self.policy = copy.deepcopy(base)
        self.policy._plan = self._plan  # instance attribute: overrides the class's planner for this copy
        self.shape_meta = self.policy.shape_meta
        self.task = getattr(base, "task", None)

    def eval(self) -> SteeredPolicy:
        """Both parts always act in inference mode (the base is frozen, the actor is sampled as configured)."""
        self.policy.eval()
        self.agent.eval()
        return self

    def _plan(self, obs: dict[str, torch.Tensor], rows: torch.Tensor | None) -> torch.Tensor:
        latent, _ = self.agent.actor(self.agent.features(obs), deterministic=self.deterministic)
        return self.policy.sample(obs, noise=self.agent.to_noise(latent))

    def reset(self, env_ids: Any = None) -> None:
        self.policy.reset(env_ids)

    def act(self, obs: dict[str, Any]) -> Any:
        with torch.no_grad():
            return self.policy.act(obs)


def load_steered_policy(path: str, deterministic: bool = True, which: str = "latest") -> SteeredPolicy:
    """Rebuild base + steering actor from a DSRL run directory (or one of its checkpoints).

    ``which``: ``latest`` (the actor at the end of training) or ``best`` (the one that scored best in the
    periodic evaluations; falls back to ``latest`` when the run never evaluated).

    The base is reloaded from the path recorded at training time and checked against the recorded hash of
    its weights, so a retrained or edited base is refused instead of silently steered with a stale actor.
    """
    from pathlib import Path

    from policies.checkpoint import CheckpointError, load_checkpoint, load_policy, state_dict_hash

    p = Path(path)
    if which not in ("best", "latest"):
        raise CheckpointError(f"which={which!r} is not valid for a steering run: expected 'best' or 'latest'")
    ckpt_dir = p
    if (p / "checkpoints").is_dir():
        ckpt_dir = p / "checkpoints" / (which if (p / "checkpoints" / which).exists() else "latest")
    ck = load_checkpoint(ckpt_dir, names=["agent"])
    cfg = ck.config
    where = ck.path / "config.json"
    if cfg.get("kind") != "dsrl":
        raise CheckpointError(f"{where}: key 'kind' is {cfg.get('kind')!r}, expected 'dsrl'")
    for key in ("base", "base_which", "obs_dim", "exec_slice", "obs_keys", "dsrl"):
        if key not in cfg:
            raise CheckpointError(f"{where}: key {key!r} is missing (written by an older robosteer?)")
    from policies.steering.scratch import SCRATCH, make_scratch_base

    if cfg["base"] == SCRATCH:  # plain SAC from scratch: the identity noise -> chunk map
        base = make_scratch_base(*cfg["scratch_shape"])
    elif not Path(cfg["base"]).exists():
        raise CheckpointError(
            f"{where}: key 'base' points to {cfg['base']}, which no longer exists: "
            "DSRL steers that exact base policy, restore it there"
        )
    else:
        base = load_policy(cfg["base"], which=cfg["base_which"])
    if "base_hash" in cfg and state_dict_hash(base) != cfg["base_hash"]:
        raise CheckpointError(
            f"{where}: the base at {cfg['base']} (which={cfg['base_which']}) is not the one this actor was "
            "trained on (weight hash differs)"
        )
    agent = DSRL(
        base,
        int(cfg["obs_dim"]),
        slice(*cfg["exec_slice"]),
        DSRLConfig(**cfg["dsrl"]),
        tuple(cfg["obs_keys"]),
    )
    agent.load_state_dict(ck.modules["agent"])
    policy = SteeredPolicy(base, agent.eval(), deterministic=deterministic)
    policy.task = cfg.get("task") or getattr(base, "task", None)
    return policy


def _final_obs(
    info: dict[str, Any], next_obs: dict[str, Any], done: Any, keys: tuple[str, ...]
) -> dict[str, Any]:
    """Next observations with the finished envs' rows replaced by their episodes' last observations."""
    import numpy as np

    out = {k: np.array(next_obs[k], copy=True) for k in keys}
    final = info.get("final_obs")
    for i in np.flatnonzero(done):
        row = final[i] if not isinstance(final, dict) else {k: final[k][i] for k in keys}
        for k in keys:
            out[k][i] = row[k]
    return out


def run_dsrl(
    agent: DSRL,
    env: Any,
    cfg: DSRLRunConfig,
    out_dir: str,
    eval_fn: Any = None,
    offline: dict[str, torch.Tensor] | None = None,
    resume: bool = False,
    checkpoint_config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Collect chunk transitions from ``env`` and train ``agent``; returns the final metrics.

    ``env``: the batched env protocol with ``action_chunk=Ta`` and observation histories (B, To, ...).
    Bootstrapping is cut only on true termination (success); a time-out keeps bootstrapping from its
    last observation. ``eval_fn(policy) -> {"success_rate", ...}`` evaluates a :class:`SteeredPolicy`.
    ``offline``: demonstration chunk transitions (NA only) mixed into every batch at ``offline_ratio``.
    """
    import time
    from pathlib import Path

    import numpy as np
    from torch.utils.tensorboard import SummaryWriter
    from tqdm import tqdm

    from policies.checkpoint import load_checkpoint, save_checkpoint
    from policies.rl import ReplayBuffer, sample_mixed
    from policies.train.trainer import get_rng_state, set_rng_state

    out = Path(out_dir)
    keys = agent.obs_keys
    na = agent.config.variant == "na"
    obs_space = env.single_observation_space
    spec: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
    for k in keys:
        spec[f"obs/{k}"] = (tuple(obs_space[k].shape), torch.float32)
        spec[f"next_obs/{k}"] = (tuple(obs_space[k].shape), torch.float32)
    spec["taken"] = ((agent.exec_dim,) if na else (agent.latent_dim,), torch.float32)
    spec["reward"] = ((), torch.float32)
    spec["done"] = ((), torch.float32)
    buffer = ReplayBuffer(cfg.buffer_size, spec)
    offline_buf = None
    if offline is not None:
        if not na:
            raise ValueError(
                "offline demonstrations need variant=na: DSRL-SAC's critic is over latents, not actions"
            )
        offline_buf = ReplayBuffer(len(offline["reward"]), spec)
        offline_buf.add(**offline)
    gen = torch.Generator().manual_seed(cfg.seed)
    counters = {"env_steps": 0, "transitions": 0, "updates": 0, "episodes": 0, "pending_updates": 0.0}
    history: list[dict[str, float]] = []
    best: dict[str, float] = {"success_rate": -1.0, "env_steps": 0}
    ckpt_dir = out / "checkpoints" / "latest"
    if resume and ckpt_dir.exists():
        ck = load_checkpoint(ckpt_dir)
        agent.load_state_dict(ck.modules["agent"])
        for name, opt in agent.optimizers().items():
            opt.load_state_dict(ck.modules[f"opt_{name}"])
        buffer.load_state_dict(ck.modules["buffer"])
        counters.update(ck.extra["counters"])
        history = list(ck.extra["history"])
        best.update(ck.extra.get("best", {}))
        set_rng_state(ck.extra["rng"])
        gen.set_state(ck.extra["generator"])

    def save() -> None:
        modules: dict[str, Any] = {"agent": agent.state_dict(), "buffer": buffer.state_dict()}
        modules.update({f"opt_{n}": o.state_dict() for n, o in agent.optimizers().items()})
        save_checkpoint(
            ckpt_dir,
            modules,
            {"kind": "dsrl", **agent.get_config(), **(checkpoint_config or {})},
            extra={
                "counters": dict(counters),
                "history": history,
                "best": dict(best),
                "rng": get_rng_state(),
                "generator": gen.get_state(),
            },
        )

    def evaluate() -> None:
        if eval_fn is None:
            return
        m = dict(eval_fn(SteeredPolicy(agent.base, agent)))
        m["env_steps"] = counters["env_steps"]
        history.append({"env_steps": float(counters["env_steps"]), "success_rate": float(m["success_rate"])})
        tb.add_scalar("eval/success_rate", m["success_rate"], counters["env_steps"])
        if (
            m["success_rate"] > best["success_rate"]
        ):  # the actor that scored best (robosteer-eval's which=best)
            best.update(success_rate=float(m["success_rate"]), env_steps=counters["env_steps"])
            save_checkpoint(
                out / "checkpoints" / "best",
                {"agent": agent.state_dict()},
                {"kind": "dsrl", **agent.get_config(), **(checkpoint_config or {}), "score": dict(best)},
            )

    tb = SummaryWriter(str(out / "tb"))
    start = time.perf_counter()
    # Resumed runs restart their episodes from a fresh seed: env simulator state is not checkpointed.
    obs = env.reset(seed=cfg.seed + 7919 * counters["transitions"])
    num_envs = env.num_envs
    ep_return, ep_len = np.zeros(num_envs), np.zeros(num_envs, dtype=int)
    recent: list[tuple[bool, float]] = []
    next_eval = (counters["env_steps"] // cfg.eval_every + 1) * cfg.eval_every if cfg.eval_every else None
    next_ckpt = (counters["env_steps"] // cfg.checkpoint_every + 1) * cfg.checkpoint_every
    next_log = counters["env_steps"] + cfg.log_every
    info_acc: dict[str, float] = {}
    bar = tqdm(
        total=cfg.env_steps,
        initial=counters["env_steps"],
        unit="step",
        desc=f"dsrl-{agent.config.variant}",
        disable=not cfg.progress,
    )
    if not history and eval_fn is not None:
        evaluate()  # the base policy's own success (latent 0 from the zero-initialised actor)
    while counters["env_steps"] < cfg.env_steps:
        if cfg.max_minutes is not None and time.perf_counter() - start > 60 * cfg.max_minutes:
            break
        obs_t = {k: torch.as_tensor(obs[k], dtype=torch.float32) for k in keys}
        if counters["transitions"] < cfg.warmup_chunks:
            latent = agent.random_latent(num_envs, gen)
            chunk = agent.decode(obs_t, latent)
        else:
            latent, chunk = agent.act(obs_t, generator=gen)
        next_obs, reward, terminated, truncated, info = env.step(chunk.numpy())
        steps = np.asarray(info["steps_executed"])
        success = np.asarray(info["success"], dtype=bool)
        if cfg.reward == "sparse":
            r = np.where(success, 0.0, -1.0)
        else:
            r = np.asarray(reward, dtype=np.float64)
        done_any = np.asarray(terminated) | np.asarray(truncated)
        real_next = _final_obs(info, next_obs, done_any, keys)
        buffer.add(
            **{f"obs/{k}": obs_t[k] for k in keys},
            **{f"next_obs/{k}": torch.as_tensor(real_next[k], dtype=torch.float32) for k in keys},
            taken=(chunk.flatten(1) if na else latent),
            reward=torch.as_tensor(r, dtype=torch.float32),
            done=torch.as_tensor(np.asarray(terminated), dtype=torch.float32),
        )
        counters["env_steps"] += int(steps.sum())
        counters["transitions"] += num_envs
        bar.update(int(steps.sum()))
        ep_return += r
        ep_len += steps
        for i in np.flatnonzero(done_any):
            recent.append((bool(terminated[i]), float(ep_return[i])))
            counters["episodes"] += 1
            ep_return[i], ep_len[i] = 0.0, 0
        obs = next_obs

        if counters["transitions"] >= cfg.warmup_chunks:
            counters["pending_updates"] += cfg.utd * num_envs
            while counters["pending_updates"] >= 1:
                counters["pending_updates"] -= 1
                batch = sample_mixed(offline_buf, buffer, agent.config.batch_size, cfg.offline_ratio, gen)
                stats = agent.update(_as_agent_batch(batch, keys, na), generator=gen)
                counters["updates"] += 1
                for k, v in stats.items():
                    info_acc[k] = v
            if na:
                for _ in range(agent.config.noise_critic_steps):
                    batch = sample_mixed(offline_buf, buffer, agent.config.batch_size, cfg.offline_ratio, gen)
                    info_acc.update(
                        agent.update_noise_critic(_as_agent_batch(batch, keys, na)["obs"], generator=gen)
                    )

        if counters["env_steps"] >= next_log:
            next_log += cfg.log_every
            elapsed = time.perf_counter() - start
            tb.add_scalar(
                "perf/env_steps_per_s", counters["env_steps"] / max(elapsed, 1e-9), counters["env_steps"]
            )
            tb.add_scalar(
                "perf/updates_per_s", counters["updates"] / max(elapsed, 1e-9), counters["env_steps"]
            )
            for k, v in info_acc.items():
                tb.add_scalar(f"train/{k}", v, counters["env_steps"])
            if recent:
                tb.add_scalar(
                    "train/success_rate", float(np.mean([s for s, _ in recent[-50:]])), counters["env_steps"]
                )
                tb.add_scalar(
                    "train/return", float(np.mean([x for _, x in recent[-50:]])), counters["env_steps"]
                )
                bar.set_postfix(
                    success=f"{np.mean([s for s, _ in recent[-50:]]):.0%}", q=f"{info_acc.get('q', 0):.2f}"
                )
        if next_eval is not None and counters["env_steps"] >= next_eval:
            next_eval += cfg.eval_every
            evaluate()
        if counters["env_steps"] >= next_ckpt:
            next_ckpt += cfg.checkpoint_every
            save()
    bar.close()
    if eval_fn is not None and (not history or history[-1]["env_steps"] != counters["env_steps"]):
        evaluate()
    save()
    tb.close()
    return {
        "variant": agent.config.variant,
        "env_steps": counters["env_steps"],
        "updates": counters["updates"],
        "train_episodes": counters["episodes"],
        "eval_episodes": cfg.eval_episodes,
        "wall_time_s": time.perf_counter() - start,
        "history": history,
        "success_rate": history[-1]["success_rate"] if history else None,
        "best_success_rate": best["success_rate"] if history else None,
        "best_env_steps": best["env_steps"] if history else None,
        # the zero-initialised deterministic actor plays latent 0: the base's mode, not its stock sampler
        "initial_success_rate": history[0]["success_rate"] if history else None,
    }


def _as_agent_batch(batch: dict[str, torch.Tensor], keys: tuple[str, ...], na: bool) -> dict[str, Any]:
    """Replay fields → the batch layout of :meth:`DSRL.update`."""
    return {
        "obs": {k: batch[f"obs/{k}"] for k in keys},
        "next_obs": {k: batch[f"next_obs/{k}"] for k in keys},
        "reward": batch["reward"],
        "done": batch["done"],
        ("action" if na else "latent"): batch["taken"],
    }
