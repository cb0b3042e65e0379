"""Planted faults in the value learners (Cal-QL / CQL and IQL), each killed by the default suite."""

CALQL = "policies/value/calql.py"
IQL = "policies/value/iql.py"
TARGETS = "tests/policies/value/test_value_targets.py"
LEARNERS = "tests/policies/value/test_learners.py"

FAULTS = [
    {
        "name": "calql: importance-sampling log-probabilities dropped",
        "file": CALQL,
        "old": "[q_rand - log_uniform, q_cur - logp_cur.unsqueeze(0), q_next - logp_next.unsqueeze(0)], dim=-1",
        "new": "[q_rand - log_uniform, q_cur, q_next], dim=-1",
        "tests": [TARGETS],
    },
    {
        "name": "calql: CQL term summed over heads (weight 2α against TD, the old weighting)",
        "file": CALQL,
        "old": "return td_loss + cfg.cql_alpha * gap.mean(), td_loss, gap.mean(), bound_rate",
        "new": "return td_loss + cfg.cql_alpha * gap.mean(dim=1).sum(), td_loss, gap.mean(), bound_rate",
        "tests": [TARGETS],
    },
    {
        "name": "calql: TD loss halved (½·MSE, not the reference's mean square)",
        "file": CALQL,
        "old": "td_loss = ((q - target.unsqueeze(0)) ** 2).mean()",
        "new": "td_loss = 0.5 * ((q - target.unsqueeze(0)) ** 2).mean()",
        "tests": [TARGETS],
    },
    {
        "name": "calql: Monte-Carlo bound also raises the uniform samples",
        "file": CALQL,
        "old": "q_cur, q_next = torch.maximum(q_cur, mc), torch.maximum(q_next, mc)",
        "new": "q_cur, q_next, q_rand = torch.maximum(q_cur, mc), torch.maximum(q_next, mc), torch.maximum(q_rand, mc)",
        "tests": [TARGETS],
    },
    {
        "name": "calql: uniform density term missing",
        "file": CALQL,
        "old": "log_uniform = action_dim * math.log(0.5)",
        "new": "log_uniform = 0.0",
        "tests": [TARGETS],
    },
    {
        "name": "calql: no log(3n + 1) correction without importance sampling",
        "file": CALQL,
        "old": "samples = samples - math.log(samples.shape[-1]) * cfg.cql_temp",
        "new": "samples = samples",
        "tests": [TARGETS],
    },
    {
        "name": "calql: bootstrapping ignores done",
        "file": CALQL,
        "old": "target = reward + cfg.discount * (1.0 - done) * q2",
        "new": "target = reward + cfg.discount * q2",
        "tests": [TARGETS],
    },
    {
        "name": "calql: backup takes the mean of the n next samples instead of their max",
        "file": CALQL,
        "old": "best = q2.argmax(dim=1, keepdim=True)",
        "new": "best = q2.argmin(dim=1, keepdim=True)",
        "tests": [TARGETS],
    },
    {
        "name": "calql: backup reads the online critic instead of the target",
        "file": CALQL,
        "old": "q2 = self._q_many(self.critic.q_target, s2, a2).min(dim=0).values",
        "new": "q2 = self._q_many(self.critic.q, s2, a2).min(dim=0).values",
        "tests": [TARGETS],
    },
    {
        "name": "calql: temperature tuned on log π at s instead of s'",
        "file": CALQL,
        "old": "_, logp_s2 = self.actor(s2, generator=generator)",
        "new": "_, logp_s2 = self.actor(s, generator=generator)",
        "tests": [TARGETS],
    },
    {
        "name": "iql: TD target reads the online V instead of the target V",
        "file": IQL,
        "old": "target = reward + cfg.discount * (1.0 - done) * self.value_target(s2).squeeze(-1)",
        "new": "target = reward + cfg.discount * (1.0 - done) * self.value(s2).squeeze(-1)",
        "tests": [TARGETS],
    },
    {
        "name": "iql: V regresses onto the online critic instead of the target critic",
        "file": IQL,
        "old": "q_t = self.critic.q_target(s, a).min(dim=0).values",
        "new": "q_t = self.critic.q(s, a).min(dim=0).values",
        "tests": [TARGETS],
    },
    {
        "name": "iql: expectile weights swapped",
        "file": IQL,
        "old": "weight = torch.where(diff > 0, expectile, 1.0 - expectile)",
        "new": "weight = torch.where(diff > 0, 1.0 - expectile, expectile)",
        "tests": [TARGETS, LEARNERS],
    },
    {
        "name": "iql: bootstrapping ignores done",
        "file": IQL,
        "old": "target = reward + cfg.discount * (1.0 - done) * self.value_target(s2).squeeze(-1)",
        "new": "target = reward + cfg.discount * self.value_target(s2).squeeze(-1)",
        "tests": [TARGETS],
    },
    {
        "name": "iql: target V never follows V",
        "file": IQL,
        "old": "polyak_update(self.value_target, self.value, cfg.tau)",
        "new": "pass",
        "tests": [TARGETS],
    },
]
