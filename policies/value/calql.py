"""Cal-QL critic (Nakamoto et al.): CQL whose policy-action Q values are clipped from below by the
Monte-Carlo return before the conservative logsumexp, so the critic stays calibrated (never pushed below
the value of the behaviour that collected the data). With ``use_calql=False`` it is plain CQL.

Follows ``jaxrl_m/agents/continuous/cql.py`` and ``sac.py`` with the V-GPS ``lc_cql`` overrides (nakamotoo/
V-GPS): 2 critics of (256, 256) without LayerNorm, a tanh-Gaussian actor (only to propose the CQL samples),
``cql_n_actions=4`` uniform + policy samples at s and s', importance sampling, max target backup,
``cql_temp=1``, α_cql=5, discount 0.98, entropy target −|A| (auto-tuned on the entropy at s'), no entropy
in the backup, 2000-step linear LR warm-ups of actor and critic. The critic loss is the reference's:
mean over heads and batch of (Q − y)² (no ½) + α_cql · mean over heads and batch of the CQL gap.
Everything runs in the critic's normalised action space [-1, 1].

Ours, deliberately: the three losses are stepped one after another (critic, then actor against the updated
critic, then α) where the reference differentiates all three at the same parameters; α is ``exp(log α)``
trained with SB3's ``−log α·(log π + H̄)`` where the reference uses a softplus Lagrange multiplier (same
fixed point, another rate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from robosteer.policies.optim import lr_lambda
from robosteer.policies.rl import NormalizedCritic, TanhGaussianActor, Temperature, polyak_update
from robosteer.policies.rl.nets import optimizer_step


@dataclass
class CalQLConfig:
    """Every Cal-QL hyper-parameter, each default written once here; every one is the reference's: V-GPS
    ``launch_calql.sh`` + ``train_config.py`` ``lc_cql`` over jaxrl_m's ``cql.get_default_config`` (labels checked
    by tests/configs/test_reference_labels.py), so configs/algo/calql.yaml overrides nothing."""

    discount: float = 0.98  # reference (launch_calql.sh)
    tau: float = 0.005  # reference (soft_target_update_rate)
    critic_lr: float = 3e-4  # reference
    actor_lr: float = 1e-4  # reference
    actor_warmup_steps: int = 2000  # reference: linear LR warm-up of the actor from 0
    critic_warmup_steps: int = 2000  # reference: linear LR warm-up of the critic from 0
    temperature_lr: float = 3e-4  # reference
    init_temperature: float = 1.0  # reference
    target_entropy: float | None = None  # reference: None is −|A| of the scored action span
    backup_entropy: bool = False  # reference
    cql_alpha: float = 5.0  # reference
    cql_n_actions: int = 4  # reference: uniform + policy samples at s and at s'
    cql_importance_sample: bool = True  # reference
    cql_max_target_backup: bool = True  # reference
    cql_temp: float = 1.0  # reference
    use_calql: bool = True  # reference (launch_calql.sh); False: plain CQL (no Monte-Carlo bound)
    hidden: list[int] = field(default_factory=lambda: [256, 256])  # reference
    num_critics: int = 2  # reference
    activation: str = "silu"  # reference: jaxrl_m MLP default (nn.swish)
    layer_norm: bool = False  # reference (lc_cql: use_layer_norm=False)

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
        # jaxrl_m's make_optimizer: the LR rises linearly from 0 over the warm-up, then holds
        self.actor_sched = LambdaLR(self.actor_opt, lr_lambda("constant", cfg.actor_warmup_steps, 0))
        self.critic_sched = LambdaLR(self.critic_opt, lr_lambda("constant", cfg.critic_warmup_steps, 0))

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
        # Conservative term: push down Q on uniform and policy actions, push up Q on data actions.
        with torch.no_grad():
            a_rand = (
                torch.rand(b, n, self.action_dim, generator=generator, device=s.device) * 2.0 - 1.0
            )  # (B, n, Da)
            a_cur, logp_cur = self._policy_samples(s, n, generator)
            a_next, logp_next = self._policy_samples(s2, n, generator)
        mc = None
        if cfg.use_calql:
            if "mc_return" not in batch:
                raise KeyError(
                    "Cal-QL needs batch['mc_return'] (the Monte-Carlo lower bound); use_calql=false is CQL"
                )
            mc = batch["mc_return"].float()
        critic_loss, td_loss, cql_diff, bound_rate = cql_critic_loss(
            q,
            target,
            self._q_many(self.critic.q, s, a_rand),
            self._q_many(self.critic.q, s, a_cur),
            self._q_many(self.critic.q, s, a_next),
            logp_cur,
            logp_next,
            mc,
            self.action_dim,
            cfg,
        )
        optimizer_step(self.critic_opt, critic_loss)
        self.critic_sched.step()

        a_pi, logp = self.actor(s, generator=generator)
        actor_loss = (alpha * logp - self.critic.q(s, a_pi).min(dim=0).values).mean()
        optimizer_step(self.actor_opt, actor_loss)
        self.actor_sched.step()
        self.critic_opt.zero_grad(set_to_none=True)  # the actor step leaves grads on the critic: drop them

        with torch.no_grad():  # the reference tunes α on the entropy of fresh actions at s'
            _, logp_s2 = self.actor(s2, generator=generator)
        optimizer_step(self.temperature_opt, self.temperature.loss(logp_s2))
        polyak_update(self.critic.q_target, self.critic.q, cfg.tau)
        return {
            "critic_loss": critic_loss.item(),
            "td_loss": td_loss.item(),
            "cql_diff": cql_diff.item(),
            "calql_bound_rate": bound_rate.item(),
            "actor_loss": actor_loss.item(),
            "alpha": alpha.item(),
            "entropy": -logp.detach().mean().item(),
            "q": q.mean().item(),
            "target_q": target.mean().item(),
        }

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Every optimizer, by name (checkpointed for an exact resume)."""
        return {"critic": self.critic_opt, "actor": self.actor_opt, "temperature": self.temperature_opt}

    def schedulers(self) -> dict[str, torch.optim.lr_scheduler.LRScheduler]:
        """Every LR schedule, by name (checkpointed for an exact resume)."""
        return {"actor": self.actor_sched, "critic": self.critic_sched}


def cql_critic_loss(
    q: torch.Tensor,
    target: torch.Tensor,
    q_rand: torch.Tensor,
    q_cur: torch.Tensor,
    q_next: torch.Tensor,
    logp_cur: torch.Tensor,
    logp_next: torch.Tensor,
    mc_return: torch.Tensor | None,
    action_dim: int,
    cfg: CalQLConfig,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(critic loss, TD loss, CQL gap, Cal-QL bound rate), as jaxrl_m's ``critic_loss_fn`` computes them.

    ``q`` (E, B) on the data actions, ``target`` (B,), ``q_rand``/``q_cur``/``q_next`` (E, B, n) on the uniform
    and the policy actions at s and s' (all scored at s), ``logp_cur``/``logp_next`` (B, n), ``mc_return``
    (B,) or None (CQL), ``action_dim`` = |A|. TD = mean over heads and batch of (q − y)²; the gap is
    ``temp·logsumexp(samples / temp) − q`` with the policy samples' Q raised to the Monte-Carlo return
    (Cal-QL) and, with importance sampling, each sample's log density subtracted (uniform: |A|·log ½);
    without it the data action's Q joins the samples and log(3n + 1)·temp is subtracted. The loss is
    TD + α_cql · mean over heads and batch of the gap.
    """
    td_loss = ((q - target.unsqueeze(0)) ** 2).mean()
    bound_rate = torch.tensor(float("nan"))
    if mc_return is not None:
        mc = mc_return.view(1, -1, 1)
        bound_rate = torch.cat([q_cur < mc, q_next < mc], dim=-1).float().mean()
        q_cur, q_next = torch.maximum(q_cur, mc), torch.maximum(q_next, mc)
    if cfg.cql_importance_sample:
        log_uniform = action_dim * math.log(0.5)  # density of U[-1, 1]^|A|
        samples = torch.cat(
            [q_rand - log_uniform, q_cur - logp_cur.unsqueeze(0), q_next - logp_next.unsqueeze(0)], dim=-1
        )  # (E, B, 3n)
    else:
        samples = torch.cat([q_rand, q_cur, q_next, q.unsqueeze(-1)], dim=-1)  # (E, B, 3n + 1)
        samples = samples - math.log(samples.shape[-1]) * cfg.cql_temp
    lse = cfg.cql_temp * torch.logsumexp(samples / cfg.cql_temp, dim=-1)  # (E, B)
    gap = lse - q  # (E, B)
    return td_loss + cfg.cql_alpha * gap.mean(), td_loss, gap.mean(), bound_rate
