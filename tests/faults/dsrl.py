"""Planted faults in DSRL (``policies/steering/dsrl.py``), the RL blocks it uses (``policies/rl``) and the
shared chunk-MDP loop (``policies/steering/loop.py``); ``python tests/faults/run.py -k dsrl`` (or ``-k loop``)."""

DSRL = "policies/steering/dsrl.py"
LOOP = "policies/steering/loop.py"
T_DSRL = "tests/policies/steering/test_dsrl_targets.py"
T_DSRL_OLD = "tests/policies/steering/test_dsrl.py"
T_LOOP = "tests/policies/steering/test_loop_targets.py"
T_RL = "tests/policies/rl/test_rl_targets.py"
T_RL_OLD = "tests/policies/rl/test_rl_blocks.py"
STEER = "policies/steering/steerability.py"
T_STEER = "tests/policies/steering/test_steerability.py"
T_AVG = "tests/policies/steering/test_dsrl.py::test_averaged_actor_is_a_polyak_average_that_acts_where_the_run_is_judged"
T_DECAY = "tests/policies/steering/test_dsrl.py::test_actor_lr_decay_sets_the_actors_rate_from_the_share_of_the_budget_done"
SERVED = "policies/steering/served.py"
T_SERVED = "tests/scripts/test_steer.py::test_dsrl_steers_a_served_base"


def _f(name: str, file: str, old: str, new: str, *tests: str) -> dict:
    return {"name": name, "file": file, "old": old, "new": new, "tests": list(tests)}


FAULTS = [
    # ------------------------------------------------------------------------------------------ DSRL
    _f(
        "dsrl: distillation latents clipped to ±1",
        DSRL,
        "w = torch.randn(s.shape[0], self.latent_dim, generator=generator, device=self.device)\n",
        "w = torch.randn(s.shape[0], self.latent_dim, generator=generator, device=self.device).clamp(-1, 1)\n",
        T_DSRL,
    ),
    _f(
        "dsrl: bank latents clipped to ±1",
        DSRL,
        "w = torch.randn(n * k, self.latent_dim, generator=generator, device=self.device)\n",
        "w = torch.randn(n * k, self.latent_dim, generator=generator, device=self.device).clamp(-1, 1)\n",
        T_DSRL,
    ),
    _f(
        "dsrl: NA backup decodes w = 0 instead of the actor's w'",
        DSRL,
        'a2 = self.decode(batch["next_obs"], w2).flatten(1)',
        'a2 = self.decode(batch["next_obs"], torch.zeros_like(w2)).flatten(1)',
        T_DSRL,
    ),
    _f(
        "dsrl: gamma not applied in the TD target",
        DSRL,
        "target = reward + (1.0 - done) * cfg.gamma * q2",
        "target = reward + (1.0 - done) * q2",
        T_DSRL,
    ),
    _f(
        "dsrl: (1 - done) dropped from the TD target",
        DSRL,
        "target = reward + (1.0 - done) * cfg.gamma * q2",
        "target = reward + cfg.gamma * q2",
        T_DSRL,
    ),
    _f(
        "dsrl: NA backup reads the online Q^A instead of its target",
        DSRL,
        "q2 = self.critic_target(c2, a2)",
        "q2 = self.critic(c2, a2)",
        T_DSRL,
    ),
    _f(
        "dsrl: SAC backup reads the online Q instead of its target",
        DSRL,
        "q2 = self.critic_target(c2, w2)",
        "q2 = self.critic(c2, w2)",
        T_DSRL,
    ),
    _f(
        "dsrl: Polyak τ flipped (target ← τ·target + (1−τ)·online)",
        DSRL,
        "polyak_update(self.critic_target, self.critic, cfg.tau)",
        "polyak_update(self.critic_target, self.critic, 1 - cfg.tau)",
        T_DSRL,
    ),
    _f(
        "dsrl: entropy added instead of subtracted in the backup",
        DSRL,
        "q2 = q2 - alpha * logp2",
        "q2 = q2 + alpha * logp2",
        T_DSRL,
    ),
    _f(
        "dsrl: backup_entropy=False ignored",
        DSRL,
        "            if cfg.backup_entropy:\n",
        "            if True:\n",
        T_DSRL,
    ),
    _f(
        "dsrl: backup_latent=mean ignored (the next latent is always sampled)",
        DSRL,
        'if cfg.backup_latent == "mean":',
        "if False:",
        T_DSRL,
    ),
    _f(
        "dsrl: backup_latent=mean reads the trained actor, not the acting (averaged) one",
        DSRL,
        "w2, logp2 = self.acting_actor(s2, deterministic=True)",
        "w2, logp2 = self.actor(s2, deterministic=True)",
        T_DSRL,
    ),
    _f(
        "dsrl: backup=mean ignored (always min)",
        DSRL,
        "q2 = self.critic_target.reduce(q2, cfg.backup)",
        'q2 = self.critic_target.reduce(q2, "min")',
        T_DSRL,
    ),
    _f(
        "dsrl: actor loss entropy term sign",
        DSRL,
        "return (alpha * logp - q_pi).mean(), logp",
        "return (-alpha * logp - q_pi).mean(), logp",
        T_DSRL,
    ),
    _f(
        "dsrl: NA actor trained against Q^A instead of Q^W",
        DSRL,
        'actor_critic = self.noise_critic if self.config.variant == "na" else self.critic',
        "actor_critic = self.critic",
        T_DSRL_OLD
        + "::test_na_wiring_actor_gradient_only_through_noise_critic",  # same dims: a semantic kill
        T_DSRL,
    ),
    _f(
        "dsrl: actor loss heads always min (ignores backup)",
        DSRL,
        "q_pi = actor_critic.reduce(actor_critic(c, w), self.config.backup)",
        'q_pi = actor_critic.reduce(actor_critic(c, w), "min")',
        T_DSRL,
    ),
    _f(
        "dsrl: SAC log π scores M·tanh(u) (−d·log M) instead of the unit box",
        DSRL,
        "scale_in_log_prob=False,",
        "scale_in_log_prob=True,",
        T_DSRL,
    ),
    _f(
        "dsrl: critic loss without the ½",
        DSRL,
        "critic_loss = 0.5 * ((q - target.unsqueeze(0)) ** 2).mean(dim=1).sum()",
        "critic_loss = ((q - target.unsqueeze(0)) ** 2).mean(dim=1).sum()",
        T_DSRL,
    ),
    _f(
        "dsrl: Q^W fitted to the target Q^A instead of the online one",
        DSRL,
        "target = self.critic(s, executed)  # (E, B)",
        "target = self.critic_target(s, executed)  # (E, B)",
        T_DSRL,
    ),
    _f(
        "dsrl: centring dropped for K > 1",
        DSRL,
        "pred, target = _centred(pred, k), _centred(target, k)",
        "pred, target = pred, target",
        T_DSRL,
    ),
    _f(
        "dsrl: K > 1 tiles the states instead of repeating each K times",
        DSRL,
        "obs = {key: v[::k].repeat_interleave(k, dim=0) for key, v in obs.items()}",
        "obs = {key: v[::k].repeat(k, *[1] * (v.dim() - 1)) for key, v in obs.items()}",
        T_DSRL,
    ),
    _f(
        "dsrl: offline share ignored in the bank distillation",
        DSRL,
        "self.bank, n, self.offline_share, generator)",
        "self.bank, n, 0.0, generator)",
        T_DSRL,
    ),
    _f(
        "dsrl: offline bank ignores its seed",
        DSRL,
        "gen = torch.Generator(device=self.device).manual_seed(seed)",
        "gen = torch.Generator(device=self.device).manual_seed(0)",
        T_DSRL,
    ),
    _f(
        "dsrl: SAC warm-up latents not clipped to ±M",
        DSRL,
        'w if self.config.variant == "na" else w.clamp(',
        "w if True else w.clamp(",
        T_DSRL,
    ),
    _f(
        "dsrl: learn runs one distillation step instead of noise_critic_steps",
        DSRL,
        "for _ in range(self.config.noise_critic_steps):",
        "for _ in range(1):",
        T_DSRL,
    ),
    # --------------------------------------------------------------------------- RL blocks DSRL uses
    _f(
        "dsrl: rl/actor log π without the tanh Jacobian",
        "policies/rl/actor.py",
        "return (gauss - tanh_log_det(u) - self.log_scale).sum(-1)",
        "return (gauss - self.log_scale).sum(-1)",
        T_RL,
        T_DSRL,
    ),
    _f(
        "dsrl: rl/temperature target entropy sign",
        "policies/rl/temperature.py",
        "(log_prob.detach() + self.target_entropy)",
        "(log_prob.detach() - self.target_entropy)",
        T_RL,
        T_DSRL,
    ),
    _f(
        "dsrl: rl/critic Polyak τ flipped",
        "policies/rl/critic.py",
        "t.lerp_(o, tau)",
        "t.lerp_(o, 1 - tau)",
        T_RL_OLD + "::test_polyak_update",
        T_DSRL,
    ),
    _f(
        "dsrl: rl/critic mean reduction is a median",
        "policies/rl/critic.py",
        "            return q.mean(dim=0)\n",
        "            return q.median(dim=0).values\n",
        T_RL_OLD + "::test_critic_reduce_and_subset",
        T_DSRL,
    ),
    _f(
        "dsrl: rl/replay samples unfilled slots",
        "policies/rl/replay.py",
        "idx = torch.randint(0, self.size, (batch_size,)",
        "idx = torch.randint(0, self.capacity, (batch_size,)",
        T_RL,
    ),
    _f(
        "dsrl: rl/replay ring restarts at slot 0",
        "policies/rl/replay.py",
        "idx = (self.ptr + torch.arange(n)) % self.capacity",
        "idx = torch.arange(n) % self.capacity",
        T_RL,
    ),
    # ------------------------------------------------------------------------------------------ loop
    _f(
        "loop: a base moved along with its steering run is not looked for beside it",
        LOOP,
        'if not base_dir.exists() and "base_hash" in cfg and beside.is_dir():',
        'if not base_dir.exists() and "base_hash" in cfg and beside.is_file():',
        "tests/scripts/test_steer.py::test_steered_policy_refuses_a_changed_base",
    ),
    _f(
        "loop: a time-out stored as terminal",
        LOOP,
        "done=torch.as_tensor(terminated, dtype=torch.float32, device=device),",
        "done=torch.as_tensor(done_any, dtype=torch.float32, device=device),",
        T_LOOP,
    ),
    _f(
        "loop: sparse reward 1 on success and 0 otherwise",
        LOOP,
        "r = np.where(success, 0.0, -1.0)",
        "r = np.where(success, 1.0, 0.0)",
        T_LOOP,
    ),
    _f(
        "loop: shaped reward counts a full chunk of steps",
        LOOP,
        "r = shaped_chunk_reward(np.asarray(reward), steps, chunk.shape[1], cfg.reward_scale)",
        "r = shaped_chunk_reward(np.asarray(reward), 0 * steps + chunk.shape[1], chunk.shape[1], cfg.reward_scale)",
        T_LOOP,
    ),
    _f(
        "loop: shaped reward ignores reward_scale",
        LOOP,
        "r = shaped_chunk_reward(np.asarray(reward), steps, chunk.shape[1], cfg.reward_scale)",
        "r = shaped_chunk_reward(np.asarray(reward), steps, chunk.shape[1], 1.0)",
        T_LOOP,
    ),
    _f(
        "loop: next obs of a finished episode is the reset obs",
        LOOP,
        "real_next = final_obs(info, next_obs, done_any, keys)",
        "real_next = {k: np.asarray(next_obs[k]) for k in keys}",
        T_LOOP,
    ),
    _f(
        "loop: final obs substituted only for successes",
        LOOP,
        "real_next = final_obs(info, next_obs, done_any, keys)",
        "real_next = final_obs(info, next_obs, terminated, keys)",
        T_LOOP,
    ),
    _f(
        "loop: stored obs is the next obs",
        LOOP,
        '**{f"obs/{k}": obs_t[k] for k in keys},',
        '**{f"obs/{k}": next_t[k] for k in keys},',
        T_LOOP,
    ),
    _f(
        "loop: utd ignores the number of envs",
        LOOP,
        'counters["pending_updates"] += utd * new_transitions',
        'counters["pending_updates"] += utd',
        T_LOOP,
    ),
    _f(
        "loop: warm-up one iteration too long",
        LOOP,
        'return self.counters["transitions"] >= self.cfg.warmup_chunks',
        'return self.counters["transitions"] > self.cfg.warmup_chunks',
        T_LOOP,
    ),
    _f(
        "loop: observe told only successes end an episode",
        LOOP,
        "learner.observe(obs_t, chunk, steps, done_any, terminated)",
        "learner.observe(obs_t, chunk, steps, terminated, terminated)",
        T_LOOP,
    ),
    _f(
        "loop: offline_ratio ignored when sampling",
        LOOP,
        "sample_mixed(offline, online, batch_size, offline_ratio, gen)",
        "sample_mixed(offline, online, batch_size, 0.0, gen)",
        T_LOOP,
    ),
    _f(
        "dsrl: distillation without a bank takes the batch's first B/K states (all offline)",
        DSRL,
        "obs = {key: v[::k].repeat_interleave(k, dim=0) for key, v in obs.items()}",
        "obs = {key: v[: v.shape[0] // k].repeat_interleave(k, dim=0) for key, v in obs.items()}",
        T_DSRL,
    ),
    _f(
        "dsrl: a K = 1 bank infers the latent size from an empty draw",
        DSRL,
        "latent = w.reshape(n, k, self.latent_dim)",
        "latent = w.reshape(n, k, -1)",
        T_DSRL,
    ),
    # ---------------------------------------------------------------------------- steerability check
    _f(
        "steerability: the spread over states is taken over every chunk, latents included",
        STEER,
        "over_states = float(chunks.mean(dim=1).std(dim=0).mean())",
        "over_states = float(chunks.flatten(0, 1).std(dim=0).mean())",
        T_STEER,
    ),
    _f(
        "steerability: the latents are tiled across states instead of states across latents",
        STEER,
        "tiled = {k: v.to(device).repeat_interleave(latents, dim=0) for k, v in obs.items()}",
        "tiled = {k: v.to(device).repeat(latents, *([1] * (v.dim() - 1))) for k, v in obs.items()}",
        T_STEER,
    ),
    _f(
        "steerability: a weak base is called steerable",
        STEER,
        '    return "weakly steerable" if ratio >= THRESHOLDS["weak"] else "not steerable"',
        '    return "weakly steerable" if ratio >= THRESHOLDS["weak"] else "steerable"',
        T_STEER,
    ),
    _f(
        "served base: DSRL's latents not sent (the server draws its own noise)",
        SERVED,
        "None if noise is None else noise[i : i + n]",
        "None",
        T_SERVED,
    ),
    _f(
        "actor lr decay: a quarter cosine (half the budget leaves 0.85 of actor_lr, not half)",
        DSRL,
        "math.cos(math.pi * min(max(done, 0.0), 1.0))",
        "math.cos(0.5 * math.pi * min(max(done, 0.0), 1.0))",
        T_DECAY,
    ),
    _f(
        "actor lr decay: past the budget the rate climbs back (no clamp)",
        DSRL,
        "math.cos(math.pi * min(max(done, 0.0), 1.0))",
        "math.cos(math.pi * done)",
        T_DECAY,
    ),
    _f(
        "actor lr decay: the loop never tells the learner its progress",
        LOOP,
        '        self.learner.set_progress(counters["env_steps"] / self.cfg.env_steps)\n',
        "",
        T_LOOP,
    ),
    _f(
        "averaged actor: the Polyak rate applied the wrong way round (the average jumps to the trained actor)",
        DSRL,
        "polyak_update(self.actor_avg, self.actor, cfg.actor_tau)",
        "polyak_update(self.actor_avg, self.actor, 1.0 - cfg.actor_tau)",
        T_AVG,
    ),
    _f(
        "averaged actor: evaluation and deployment act with the trained actor",
        DSRL,
        "self.actor = agent.actor if trained else agent.acting_actor",
        "self.actor = agent.actor",
        T_AVG,
    ),
    _f(
        "dsrl benchmark: kept checkpoints are scored with the run's best actor, not their own",
        "benchmarks/dsrl_steering.py",
        'ck, task, episodes, Path(f"{run}{where}/{ck.name}"), "latest", deterministic',
        'ck, task, episodes, Path(f"{run}{where}/{ck.name}"), "best", deterministic',
        "tests/benchmarks/test_dsrl_steering.py",
    ),
    _f(
        "dsrl benchmark: kept checkpoints listed newest first, not in env-step order",
        "benchmarks/dsrl_steering.py",
        "return sorted(history.iterdir()) if history.is_dir() else []",
        "return sorted(history.iterdir(), reverse=True) if history.is_dir() else []",
        "tests/benchmarks/test_dsrl_steering.py",
    ),
    _f(
        "dsrl kept average: the average stops at the start checkpoint instead of running to the last",
        "benchmarks/dsrl_kept_average.py",
        "kept = [ck for ck in kept_checkpoints(run) if kept_steps(ck) >= start]",
        "kept = [ck for ck in kept_checkpoints(run) if kept_steps(ck) >= start][:1]",
        "tests/benchmarks/test_dsrl_kept_average.py",
    ),
    _f(
        "dsrl kept average: the averaged weights are scored with the last kept actor's own",
        "benchmarks/dsrl_kept_average.py",
        "acting.load_state_dict({k: v.to(states[0][k].dtype) for k, v in average.items()})",
        "acting.load_state_dict(states[-1])",
        "tests/benchmarks/test_dsrl_kept_average.py",
    ),
    _f(
        "dsrl failures: the successes are split by grasp instead of the failures",
        "benchmarks/dsrl_failures.py",
        "failed = [g for s, g in zip(successes, grasped, strict=True) if not s]",
        "failed = [g for s, g in zip(successes, grasped, strict=True) if s]",
        "tests/benchmarks/test_dsrl_failures.py",
    ),
    _f(
        "evaluate: an episode's info maximum carries over into the env's next episode",
        "sim/evaluate.py",
        "                for running in ep_max.values():\n                    running[i] = -np.inf\n",
        "",
        "tests/sim/test_sim_evaluate.py",
    ),
]
