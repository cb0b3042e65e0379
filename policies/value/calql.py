"""Cal-QL critic (Nakamoto et al.): CQL whose policy-action Q values are clipped from below by the
Monte-Carlo return before the conservative logsumexp, so the critic stays calibrated (never pushed below
the value of the behaviour that collected the data). With ``use_calql=False`` it is plain CQL.

Follows ``jaxrl_m/agents/continuous/cql.py`` with the V-GPS ``lc_cql`` overrides: 2 LayerNorm critics,
a tanh-Gaussian actor (only to propose the CQL samples), ``cql_n_actions=4`` uniform + policy samples at s
and s', importance sampling, max target backup, ``cql_temp=1``, α_cql=5, discount 0.98, entropy target −|A|
(auto-tuned), no entropy in the backup. Everything runs in the critic's normalised action space [-1, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from policies.rl import NormalizedCritic, TanhGaussianActor, Temperature, polyak_update


@dataclass
class CalQLConfig:
    """Every Cal-QL hyper-parameter (configs/algo/calql.yaml mirrors these; reference values)."""

    discount: float = 0.98
    tau: float = 0.005  # target rate
    critic_lr: float = 3e-4
    actor_lr: float = 1e-4
    actor_warmup_steps: int = 2000  # linear LR warm-up of the actor
    temperature_lr: float = 3e-4
    init_temperature: float = 1.0
    target_entropy: float | None = None  # None: −|A| (the critic's action dims)
    backup_entropy: bool = False
    cql_alpha: float = 5.0
    cql_n_actions: int = 4
    cql_importance_sample: bool = True
    cql_max_target_backup: bool = True
    cql_temp: float = 1.0
    use_calql: bool = True  # False: plain CQL (no Monte-Carlo lower bound)
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    num_critics: int = 2
    activation: str = "relu"
    layer_norm: bool = True

    def __post_init__(self) -> None:
        if self.cql_n_actions < 1:
            raise ValueError(f"calql cql_n_actions={self.cql_n_actions} must be >= 1 (reference: 4)")
        Temperature.check_lr("calql", self.temperature_lr)
        if not 0.0 <= self.discount < 1.0:
            raise ValueError(f"calql discount={self.discount} must lie in [0, 1); the reference uses 0.98")


class CalQL(nn.Module):
    """Cal-QL / CQL learner over a ``NormalizedCritic``.

    ``update(batch)``: ``obs``/``next_obs`` (B, F) critic features, ``action`` (B, Da) in [-1, 1],
    ``reward``, ``done`` and ``mc_return`` (B,) (the Monte-Carlo lower bound; needed when ``use_calql``).
    """

    def __init__(self, critic: NormalizedCritic, config: CalQLConfig | None = None) -> None:
        super().__init__()
        self.config = cfg = config or CalQLConfig()
        self.critic = critic
        self.action_dim = critic.action_steps * critic.action_dim
        self.actor = TanhGaussianActor(
            critic.obs_dim, self.action_dim, cfg.hidden, act=cfg.activation, zero_init=False
        )
        target = -float(self.action_dim) if cfg.target_entropy is None else cfg.target_entropy
        self.temperature = Temperature(cfg.init_temperature, target)
        self.critic_opt = torch.optim.Adam(critic.q.parameters(), lr=cfg.critic_lr)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.actor_lr)
        self.temperature_opt = torch.optim.Adam(self.temperature.parameters(), lr=cfg.temperature_lr)
        warm = max(1, cfg.actor_warmup_steps)
        self.actor_sched = torch.optim.lr_scheduler.LambdaLR(
            self.actor_opt, lambda s: min(1.0, (s + 1) / warm)
        )

    def _policy_samples(
        self, s: torch.Tensor, n: int, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """n actor samples per row: actions (B, n, Da) and log-probs (B, n)."""
        b = s.shape[0]
        a, logp = self.actor(s.repeat_interleave(n, dim=0), generator=generator)
        return a.reshape(b, n, -1), logp.reshape(b, n)

    def _q_many(self, q: nn.Module, s: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """Q of n actions per row: s (B, F), a (B, n, Da) → (E, B, n)."""
        b, n = a.shape[:2]
        return q(s.repeat_interleave(n, dim=0), a.reshape(b * n, -1)).reshape(-1, b, n)

    def update(
        self, batch: dict[str, torch.Tensor], generator: torch.Generator | None = None
    ) -> dict[str, float]:
        """One critic (TD + α_cql·CQL), actor and temperature step, then the Polyak update."""
        cfg = self.config
        s, a, s2 = batch["obs"], batch["action"], batch["next_obs"]
        reward, done = batch["reward"].float(), batch["done"].float()
        b, n = s.shape[0], cfg.cql_n_actions
        alpha = self.temperature.alpha

        with torch.no_grad():
            n_backup = n if cfg.cql_max_target_backup else 1
            a2, logp2 = self._policy_samples(s2, n_backup, generator)  # (B, n, Da), (B, n)
            q2 = self._q_many(self.critic.q_target, s2, a2).min(dim=0).values  # (B, n)
            best = q2.argmax(dim=1, keepdim=True)  # max backup over the sampled next actions
            q2, logp2 = q2.gather(1, best).squeeze(1), logp2.gather(1, best).squeeze(1)
            if cfg.backup_entropy:
                q2 = q2 - alpha * logp2
            target = reward + cfg.discount * (1.0 - done) * q2  # (B,)

        q = self.critic.q(s, a)  # (E, B)
        td_loss = 0.5 * ((q - target.unsqueeze(0)) ** 2).mean(dim=1).sum()

        # Conservative term: push down Q on uniform and policy actions, push up Q on data actions.
        with torch.no_grad():
            a_rand = torch.rand(b, n, self.action_dim, generator=generator) * 2.0 - 1.0  # (B, n, Da)
            a_cur, logp_cur = self._policy_samples(s, n, generator)
            a_next, logp_next = self._policy_samples(s2, n, generator)
        q_rand = self._q_many(self.critic.q, s, a_rand)  # (E, B, n)
        q_cur = self._q_many(self.critic.q, s, a_cur)
        q_next = self._q_many(self.critic.q, s, a_next)
        bound_rate = torch.tensor(float("nan"))
        if cfg.use_calql:
            if "mc_return" not in batch:
                raise KeyError(
                    "Cal-QL needs batch['mc_return'] (the Monte-Carlo lower bound); use_calql=false is CQL"
                )
            mc = batch["mc_return"].float().view(1, b, 1)
            bound_rate = ((q_cur < mc).float().mean() + (q_next < mc).float().mean()) / 2
            q_cur, q_next = torch.maximum(q_cur, mc), torch.maximum(q_next, mc)
        if cfg.cql_importance_sample:
            log_uniform = self.action_dim * math.log(0.5)  # density of U[-1, 1]^Da
            cat = torch.cat(
                [q_rand - log_uniform, q_next - logp_next.unsqueeze(0), q_cur - logp_cur.unsqueeze(0)], dim=-1
            )  # (E, B, 3n)
        else:
            cat = torch.cat([q_rand, q.unsqueeze(-1), q_next, q_cur], dim=-1)
        lse = cfg.cql_temp * torch.logsumexp(cat / cfg.cql_temp, dim=-1)  # (E, B)
        cql_diff = (lse - q).mean(dim=1)  # (E,)
        critic_loss = td_loss + cfg.cql_alpha * cql_diff.sum()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()

        a_pi, logp = self.actor(s, generator=generator)
        actor_loss = (alpha * logp - self.critic.q(s, a_pi).min(dim=0).values).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        self.actor_sched.step()
        self.critic_opt.zero_grad(set_to_none=True)  # the actor step leaves grads on the critic: drop them

        temp_loss = self.temperature.loss(logp)
        self.temperature_opt.zero_grad(set_to_none=True)
        temp_loss.backward()
        self.temperature_opt.step()
        polyak_update(self.critic.q_target, self.critic.q, cfg.tau)
        return {
            "critic_loss": critic_loss.item(),
            "td_loss": td_loss.item(),
            "cql_diff": cql_diff.mean().item(),
            "calql_bound_rate": bound_rate.item(),
            "actor_loss": actor_loss.item(),
            "alpha": alpha.item(),
            "entropy": -logp.detach().mean().item(),
            "q": q.mean().item(),
            "q_rand": q_rand.mean().item(),
            "target_q": target.mean().item(),
        }

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Every optimizer, by name (checkpointed for an exact resume)."""
        return {"critic": self.critic_opt, "actor": self.actor_opt, "temperature": self.temperature_opt}
