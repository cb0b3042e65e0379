"""Planted faults in the pixels path (what a policy sees without the privileged state, and the twin that
streams it); ``run.py -k pixels``."""

FAULTS = [
    {
        "name": "pixels: evaluation crops a corner of the image instead of its centre",
        "file": "policies/encoders.py",
        "old": "            top, left = (h - ch) // 2, (w - cw) // 2\n",
        "new": "            top, left = 0, 0\n",
        "tests": ["tests/policies/test_encoders.py"],
    },
    {
        "name": "pixels: proprio leaks the object's position (state[:7] instead of hand + gripper)",
        "file": "sim/metaworld_env.py",
        "old": "PROPRIO_SLICE = slice(0, 4)\n",
        "new": "PROPRIO_SLICE = slice(0, 7)\n",
        "tests": ["tests/sim/test_sim_pixels.py"],
    },
    {
        "name": "pixels: obs=pixels lets a policy that reads state through",
        "file": "scripts/common.py",
        "old": "    if privileged:\n        raise UsageError(",
        "new": "    if privileged and False:\n        raise UsageError(",
        "tests": ["tests/scripts/test_obs_presets.py"],
    },
    {
        "name": "pixels: render=policy_steps renders only a chunk's last step (the To=2 window holds a stale frame)",
        "file": "sim/chunking.py",
        "old": "base.render_images = t >= self.chunk - self.render_last or",
        "new": "base.render_images = t >= self.chunk - 1 or",
        "tests": ["tests/sim/test_sim_pixels.py"],
    },
    {
        "name": "sim twin: a late period does not yield to the event loop (a slow twin goes silent)",
        "file": "real/drivers/sim_twin.py",
        "old": "            await asyncio.sleep(max(delay, 0.0))\n",
        "new": "            if delay > 0:\n                await asyncio.sleep(delay)\n",
        "tests": ["tests/real/test_sim_twin.py"],
    },
    {
        "name": "steering from pixels: the finished rows keep the auto-reset window's embedding as s'",
        "file": "policies/steering/embedding.py",
        "old": "            final[EMBED_KEY][done] = embed_windows(self.embedding, rows)\n",
        "new": "            pass\n",
        "tests": ["tests/policies/steering/test_embedding.py"],
    },
    {
        "name": "steering from pixels: offline next states are embedded at the chunk's start, not its end",
        "file": "policies/rl/offline.py",
        "old": '            out[f"next_obs/{k}"] = v[end]\n',
        "new": '            out[f"next_obs/{k}"] = v[start]\n',
        "tests": ["tests/policies/steering/test_embedding.py"],
    },
    {
        "name": "steering from pixels: the decoder reads the embedding of the window's first step only",
        "file": "policies/steering/embedding.py",
        "old": "        return self.base.sample_from_cond(cond[:, 0], noise)\n",
        "new": "        return self.base.sample_from_cond(torch.cat([cond[:, 0, : self.dim // 2]] * 2, dim=-1), noise)\n",
        "tests": ["tests/policies/steering/test_embedding.py"],
    },
    {
        "name": "steering from pixels: the steered policy decodes without the actor's latent",
        "file": "policies/steering/dsrl.py",
        "old": "        return self.agent.base.sample(obs, noise=self.agent.to_noise(latent))  # (n, Tp, Da)\n",
        "new": "        return self.agent.base.sample(obs, noise=self.agent.to_noise(latent * 0))  # (n, Tp, Da)\n",
        "tests": ["tests/policies/steering/test_embedding.py"],
    },
    {
        "name": "V-GPS from pixels: a critic loads over a base whose weights changed (its embedding differs)",
        "file": "policies/value/learner.py",
        "old": '    if state_dict_hash(base) != embed["hash"]:\n',
        "new": '    if state_dict_hash(base) != embed["hash"] and False:\n',
        "tests": [
            "tests/scripts/test_value.py::test_vgps_from_pixels_critic_reads_the_base_embedding_and_steers_its_policy"
        ],
    },
    {
        "name": "V-GPS from pixels: the critic scores the policy's windows with the embedding of their first step",
        "file": "policies/steering/embedding.py",
        "old": "        return self.critic.score(self.embedding.embed(obs), action, task_id)\n",
        "new": "        first = {k: v[:, :1].repeat_interleave(v.shape[1], dim=1) for k, v in obs.items()}\n        return self.critic.score(self.embedding.embed(first), action, task_id)\n",
        "tests": [
            "tests/scripts/test_value.py::test_vgps_from_pixels_critic_reads_the_base_embedding_and_steers_its_policy"
        ],
    },
    {
        "name": "EXPO from pixels: re-enabling the base's gradients unfreezes its encoder (stored embeddings go stale)",
        "file": "policies/steering/embedding.py",
        "old": "        self.base.obs_encoder.requires_grad_(False)  # frozen: the stored embeddings stay valid\n",
        "new": "",
        "tests": ["tests/policies/steering/test_embedding.py"],
    },
    {
        "name": "EXPO from pixels: a batch's stored embedding is ignored (the base re-encodes a zero window)",
        "file": "policies/base.py",
        "old": '        if "cond" in batch:\n',
        "new": '        if "cond" in batch and False:\n',
        "tests": ["tests/policies/steering/test_embedding.py"],
    },
    {
        "name": "EXPO from pixels: the acting policy plans from raw windows without embedding them",
        "file": "policies/steering/expo.py",
        "old": "        obs = agent.embed(obs)  # pixels: raw windows -> {EMBED_KEY: (n, 1, G)}\n",
        "new": "",
        "tests": ["tests/policies/steering/test_embedding.py"],
    },
    {
        "name": "EXPO from pixels: the demonstrations' imitation windows are embedded from their first step only",
        "file": "policies/steering/expo.py",
        "old": "        mapped = obs_transform({k: v.numpy() for k, v in obs.items()})\n",
        "new": "        mapped = obs_transform({k: v[:, :1].repeat_interleave(v.shape[1], 1).numpy() for k, v in obs.items()})\n",
        "tests": ["tests/policies/steering/test_embedding.py"],
    },
    {
        "name": "pixels benchmark: the steer part reports the periodic evaluations' pick as the final actor",
        "file": "benchmarks/pixels.py",
        "old": '        final = unseen["latest"]\n',
        "new": '        final = unseen["best"]\n',
        "tests": ["tests/benchmarks/test_pixels.py"],
    },
    {
        "name": "pixels benchmark: the steer part evaluates the picked checkpoint under both names",
        "file": "benchmarks/pixels.py",
        "old": '_eval_{which}"), which=which)\n',
        "new": '_eval_{which}"), which="best")\n',
        "tests": ["tests/benchmarks/test_pixels.py"],
    },
    {
        "name": "robosteer-eval: says best whatever checkpoint acted",
        "file": "scripts/evaluate.py",
        "old": '        metrics["which"] = which\n',
        "new": '        metrics["which"] = "best"\n',
        "tests": ["tests/scripts/test_evaluate.py"],
    },
    {
        "name": "asymmetric critic: the TD target's next-state critic reads the actor's features",
        "file": "policies/steering/dsrl.py",
        "old": "                q2 = self.critic_target(c2, a2)\n",
        "new": "                q2 = self.critic_target(s2, a2)\n",
        "tests": ["tests/policies/steering/test_dsrl_targets.py"],
    },
    {
        "name": "asymmetric critic: the actor's loss scores its latents at the actor's features",
        "file": "policies/steering/dsrl.py",
        "old": "        c = s if critic_s is None else critic_s\n",
        "new": "        c = s\n",
        "tests": ["tests/policies/steering/test_dsrl_targets.py"],
    },
    {
        "name": "asymmetric critic: the noise bank keeps the actor's features",
        "file": "policies/steering/dsrl.py",
        "old": "        bank.add(features=self.critic_features(obs), latent=latent, executed=executed)\n",
        "new": "        bank.add(features=self.features(obs), latent=latent, executed=executed)\n",
        "tests": ["tests/policies/steering/test_dsrl_targets.py"],
    },
    {
        "name": "asymmetric critic: the env drops the state the critics read (the base's keys only)",
        "file": "policies/steering/embedding.py",
        "old": "        kept = {k: v for k, v in windows.items() if keep_raw or k not in self.raw_keys}\n",
        "new": "        kept = {}\n",
        "tests": [
            "tests/policies/steering/test_embedding.py",
            "tests/scripts/test_steer.py::test_dsrl_from_pixels_with_an_asymmetric_critic_reads_the_state_in_its_critics_only",
        ],
    },
    {
        "name": "asymmetric critic: the online critic scores the taken chunks at the actor's features",
        "file": "policies/steering/dsrl.py",
        "old": "        q = self.critic(c, taken)  # (E, B)\n",
        "new": "        q = self.critic(s, taken)  # (E, B)\n",
        "tests": ["tests/policies/steering/test_dsrl_targets.py"],
    },
    {
        "name": "pixels probe: R² divides by the spread, not the variance",
        "file": "benchmarks/pixels.py",
        "old": "    err, var = ((pred - truth) ** 2).mean(0), truth.var(0)\n",
        "new": "    err, var = ((pred - truth) ** 2).mean(0), truth.std(0)\n",
        "tests": ["tests/benchmarks/test_pixels.py::test_read_out_scores_by_hand"],
    },
    {
        "name": "pixels probe: the read-outs are scored on windows they were fitted on",
        "file": "benchmarks/pixels.py",
        "old": "    test = np.asarray(episode) % 5 == 0\n",
        "new": "    test = np.asarray(episode) % 5 != 4\n",
        "tests": [
            "tests/benchmarks/test_pixels.py::test_probe_reads_every_target_out_of_every_input_on_held_out_episodes"
        ],
    },
    {
        "name": "pixels probe: evaluations are split by the goal's x, not its y",
        "file": "benchmarks/pixels.py",
        "old": '[0]["state"][PROBE_TARGETS["goal y"]]',
        "new": '[0]["state"][PROBE_TARGETS["goal x"]]',
        "tests": [
            "tests/benchmarks/test_pixels.py::test_goal_thirds_split_an_evaluation_by_the_goal_each_seed_draws"
        ],
    },
    {
        "name": "pixels own encoder: the actor's encoder is detached (its loss never trains it)",
        "file": "policies/steering/embedding.py",
        "old": "        return self.encoder(self.normalizer.normalize_obs({k: obs[k] for k in self.keys}))\n",
        "new": "        return self.encoder(self.normalizer.normalize_obs({k: obs[k] for k in self.keys})).detach()\n",
        "tests": ["tests/policies/steering/test_embedding.py"],
    },
    {
        "name": "pixels own encoder: gradient steps see the centre crop (no augmentation)",
        "file": "policies/steering/dsrl.py",
        "old": "        self.actor.train()  # an own encoder's random crop augments the gradient steps only (acting: centre)\n",
        "new": "        self.actor.eval()\n",
        "tests": ["tests/policies/steering/test_embedding.py"],
    },
    {
        "name": "pixels own encoder: the env drops the raw windows the actor reads",
        "file": "policies/steering/embedding.py",
        "old": "        return self.embedding.transform(obs, self.keep_raw)\n",
        "new": "        return self.embedding.transform(obs)\n",
        "tests": ["tests/policies/steering/test_embedding.py"],
    },
    {
        "name": "pixels own encoder: the replay stores images as float32 (four times the memory)",
        "file": "policies/steering/loop.py",
        "old": "        dtype = torch.uint8 if uint8 else torch.float32\n",
        "new": "        dtype = torch.float32\n",
        "tests": ["tests/policies/steering/test_loop_targets.py"],
    },
    {
        "name": "replay memory check: a replay twice the memory available passes",
        "file": "policies/steering/loop.py",
        "old": "    if available and need > available:\n",
        "new": "    if available and need > 2 * available:\n",
        "tests": ["tests/policies/steering/test_loop_targets.py"],
    },
    {
        "name": "pixels own encoder: loading a run forgets the actor's encoder",
        "file": "policies/steering/dsrl.py",
        "old": "        actor_encoder=PixelEncoder(base) if encoded else None,\n",
        "new": "        actor_encoder=None,\n",
        "tests": [
            "tests/scripts/test_steer.py::test_dsrl_from_pixels_with_its_own_encoder_keeps_uint8_images_and_trains_a_copy"
        ],
    },
]
