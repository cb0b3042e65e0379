"""Planted faults in EXPO and RLPD (``policies/steering/expo.py``); see ``run.py`` for the format."""

FILE = "policies/steering/expo.py"
TARGETS = "tests/policies/steering/test_expo_targets.py"


def _fault(name: str, old: str, new: str, tests: list[str] | None = None) -> dict:
    return {"name": name, "file": FILE, "old": old, "new": new, "tests": tests or [TARGETS]}


FAULTS = [
    # ------------------------------------------------------------------------------ edit / actor losses
    _fault(
        "expo: edit loss uses the min over heads instead of the mean",
        "q = self.critic(s, a).mean(dim=0)  # (B,)",
        "q = self.critic(s, a).min(dim=0).values  # (B,)",
    ),
    _fault(
        "expo: edits trained on base samples instead of replay actions",
        'a0 = batch["taken"].flatten(1)  # (B, d)',
        "a0 = self.base_samples(batch['obs'], self.base, generator)[:, 0]  # (B, d)",
    ),
    _fault(
        "expo: actor loss drops the temperature α (edit and RLPD)",
        "return (self.temperature.alpha * logp - q).mean(), logp",
        "return (logp - q).mean(), logp",
    ),
    _fault(
        "expo: temperature step on −log π (the entropy) instead of log π",
        "optimizer_step(self.temperature_opt, self.temperature.loss(logp))",
        "optimizer_step(self.temperature_opt, self.temperature.loss(-logp))",
    ),
    _fault(
        "rlpd: actor loss scores the actor's mean instead of a sample",
        "a, logp = self.actor(s, generator=generator)",
        "a, logp = self.actor(s, deterministic=True, generator=generator)",
    ),
    # ------------------------------------------------------------------------------------- TD target
    _fault(
        "expo: TD target's (1 − done) dropped",
        'y = batch["reward"].float() + (1.0 - batch["done"].float()) * cfg.gamma * q2',
        'y = batch["reward"].float() + cfg.gamma * q2',
    ),
    _fault(
        "expo: TD target's γ missing",
        'y = batch["reward"].float() + (1.0 - batch["done"].float()) * cfg.gamma * q2',
        'y = batch["reward"].float() + (1.0 - batch["done"].float()) * q2',
    ),
    _fault(
        "expo: TD target scored by the online critic instead of the target critic",
        "q2 = self.critic_target.subset_min(s2, a2, cfg.num_min_qs, generator)",
        "q2 = self.critic.subset_min(s2, a2, cfg.num_min_qs, generator)",
    ),
    _fault(
        "expo: TD target's min over all heads instead of a random subset",
        "q2 = self.critic_target.subset_min(s2, a2, cfg.num_min_qs, generator)",
        "q2 = self.critic_target(s2, a2).min(dim=0).values",
    ),
    _fault(
        "expo: TD backup decodes with the EMA base instead of the online one",
        'base = self.base if cfg.backup_base == "online" else self.base_ema',
        "base = self.base_ema",
    ),
    _fault(
        "expo: backup_base=ema decodes with the online base",
        'base = self.base if cfg.backup_base == "online" else self.base_ema',
        "base = self.base",
    ),
    _fault(
        "expo: backup_base=bank ignores the banked samples and decodes",
        'cands = self.candidates(batch["next_obs"], None, generator, samples=batch["next_base"])',
        'cands = self.candidates(batch["next_obs"], self.base_ema, generator)',
    ),
    _fault(
        "rlpd: entropy bonus sign flipped in the backup",
        "q2 = q2 - self.temperature.alpha * logp2",
        "q2 = q2 + self.temperature.alpha * logp2",
    ),
    _fault(
        "rlpd: backup_entropy ignored",
        "if cfg.backup_entropy:",
        "if False:",
    ),
    _fault(
        "rlpd: backup action is the actor's mean instead of a sample",
        "a2, logp2 = self.actor(s2, generator=generator)",
        "a2, logp2 = self.actor(s2, deterministic=True, generator=generator)",
    ),
    # ------------------------------------------------------------------------------------------ critic
    _fault(
        "expo: critic regresses Q(s', a) instead of Q(s, a)",
        'q = self.critic(self.features(batch["obs"]), batch["taken"].flatten(1))',
        'q = self.critic(self.features(batch["next_obs"]), batch["taken"].flatten(1))',
    ),
    _fault(
        "expo: critic regresses at the backup's action instead of the replay action",
        'y, _ = self.td_target(batch, generator)\n        q = self.critic(self.features(batch["obs"]), '
        'batch["taken"].flatten(1))',
        'y, a2 = self.td_target(batch, generator)\n        q = self.critic(self.features(batch["obs"]), a2)',
    ),
    _fault(
        "expo: target critic's Polyak rate inverted",
        "polyak_update(self.critic_target, self.critic, self.config.tau)",
        "polyak_update(self.critic_target, self.critic, 1 - self.config.tau)",
    ),
    # --------------------------------------------------------------------------------------------- OTF
    _fault(
        "expo: OTF acting picks the argmin",
        "idx = q.reshape(b, c).argmax(dim=1)  # (B,)",
        "idx = q.reshape(b, c).argmin(dim=1)  # (B,)",
    ),
    _fault(
        "expo: OTF acting picks the first candidate",
        "idx = q.reshape(b, c).argmax(dim=1)  # (B,)",
        "idx = torch.zeros(b, dtype=torch.long, device=cands.device)  # (B,)",
    ),
    _fault(
        "expo: OTF scores with the online critic instead of the target critic",
        "q = self.critic_target.subset_min(s, cands.reshape(b * c, d), self.config.num_min_qs, generator)",
        "q = self.critic.subset_min(s, cands.reshape(b * c, d), self.config.num_min_qs, generator)",
    ),
    _fault(
        "expo: OTF scores with all heads instead of a random subset",
        "q = self.critic_target.subset_min(s, cands.reshape(b * c, d), self.config.num_min_qs, generator)",
        "q = self.critic_target.subset_min(s, cands.reshape(b * c, d), self.config.num_critics, generator)",
    ),
    _fault(
        "expo: edited action not scaled by β",
        "(obs_dim + self.action_dim, cfg.edit_scale)",
        "(obs_dim + self.action_dim, 1.0)",
    ),
    _fault(
        "expo: OTF edits taken at their mode instead of sampled",
        "eps, _ = self.actor(torch.cat([s, src], dim=-1), generator=generator)",
        "eps, _ = self.actor(torch.cat([s, src], dim=-1), deterministic=True, generator=generator)",
    ),
    _fault(
        "expo: OTF edits the last M samples instead of the first M",
        "src = a[:, :m].reshape(b * m, self.action_dim)",
        "src = a[:, -m:].reshape(b * m, self.action_dim)",
    ),
    _fault(
        "expo: acting decodes with the online base instead of the EMA base",
        "a = self.policy_action(obs, self.base_ema, generator)  # (B, d)",
        "a = self.policy_action(obs, self.base, generator)  # (B, d)",
    ),
    _fault(
        "expo: action=single executes the chunk's first row instead of row To − 1",
        "self.exec_slice = slice(to - 1, to - 1 + self.exec_steps)",
        "self.exec_slice = slice(0, self.exec_steps)",
    ),
    # -------------------------------------------------------------------------------------------- base
    _fault(
        "expo: EMA base rate inverted",
        "polyak_update(self.base_ema, self.base, cfg.base_ema)",
        "polyak_update(self.base_ema, self.base, 1 - cfg.base_ema)",
    ),
    _fault(
        "expo: the BC batch's offline share ignored (always half)",
        "self.bc_offline, self.bc_online, batch_size, self.config.bc_offline_ratio, generator",
        "self.bc_offline, self.bc_online, batch_size, 0.5, generator",
    ),
    _fault(
        "expo: the BC batch drops the demonstrations once online windows exist",
        "self.bc_offline, self.bc_online, batch_size, self.config.bc_offline_ratio, generator",
        "None, self.bc_online, batch_size, self.config.bc_offline_ratio, generator",
    ),
    _fault(
        "expo: base LR without its cosine decay",
        'group["lr"] = cfg.base_lr * _cosine(int(self.base_steps), cfg.base_decay_steps)',
        'group["lr"] = cfg.base_lr',
    ),
    _fault(
        "expo: bc_online=success imitates every episode",
        'if self.config.bc_online == "all" or success[i]:',
        "if True:",
    ),
    _fault(
        "expo: online BC windows start at the MDP step instead of To − 1 steps before",
        "episode_windows(starts, actions, self.exec_slice.start, self.noise_shape[0])",
        "episode_windows(starts, actions, 0, self.noise_shape[0])",
    ),
    # ----------------------------------------------------------------------------------------- cadence
    _fault(
        "expo: policy_updates ignored (one base and edit step per transition)",
        "for j in range(k):",
        "for j in range(1):",
    ),
    _fault(
        "expo: policy_updates edit every step on the last minibatch",
        "last_k = batches[max(len(batches) - k + j, 0)]  # ends on the last minibatch",
        "last_k = batches[-1]  # ends on the last minibatch",
    ),
    _fault(
        "expo: remainder critic steps go to the last transitions",
        "for _ in range(per + (1 if i < extra else 0)):",
        "for _ in range(per + (1 if i >= n_transitions - extra else 0)):",
    ),
]
