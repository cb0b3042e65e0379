"""Equivalent mutants: mutmut's changes that no test can kill because behaviour is identical.

Each entry names its module, the mutant's diff as ``mutmut show`` prints it (only the ``-``/``+`` lines
are compared, so a renumbered mutant still matches) and why the mutated code behaves the same. A
surviving mutant whose diff is listed here counts as equivalent in its row, not as survived.
"""

# Reasons shared by several mutants, written once.
CONSTANT_LR = "lr_lambda's total_steps is read only by the cosine and linear decays; the constant schedule never reads it."
CPU_ONLY = (
    "CPU-only host: only the device a tensor is made on changes; on a CPU every tensor is on the CPU "
    "(a CUDA run would place it apart)."
)

NO_SUFFIX = "reached only for a path without a suffix, and such a path's first video is already refused by write_video (imageio cannot tell the format), so no second name is ever made from it."
NAN_BRANCH = "the NaN branch runs only when wall <= 0, which never happens (perf_counter is monotonic, env steps lie between the reads)."
DONE_COUNT = (
    "done_count is read only through int(i + num_envs * done_count[i]): float counts give the same integers."
)
OUT_FLOAT64 = (
    "out=running is float64: the maximum is computed and stored in float64 whatever the input's dtype."
)
STACKLEVEL = "only which frame the warning names: under mutmut a trampoline in the same mutated file sits between the caller and evaluate, so the unmutated code names it too and no test run there can pin the frame (outside mutmut, 2 names the caller)."

EQUIVALENTS: list[dict[str, str]] = [
    # ------------------------------------------------------------------------------ policies/value/calql.py
    {
        "module": "policies/value/calql.py",
        "diff": """
-        critic.obs_dim, self.action_dim, cfg.hidden, act=cfg.activation, zero_init=False
+        critic.obs_dim, self.action_dim, cfg.hidden, act=cfg.activation, zero_init=None
""",
        "why": "TanhGaussianActor tests `if zero_init:`; None is falsy as False is: the same initialisation.",
    },
    {
        "module": "policies/value/calql.py",
        "diff": """
-    self.actor_sched = LambdaLR(self.actor_opt, lr_lambda("constant", cfg.actor_warmup_steps, 0))
+    self.actor_sched = LambdaLR(self.actor_opt, lr_lambda("constant", cfg.actor_warmup_steps, None))
""",
        "why": CONSTANT_LR,
    },
    {
        "module": "policies/value/calql.py",
        "diff": """
-    self.actor_sched = LambdaLR(self.actor_opt, lr_lambda("constant", cfg.actor_warmup_steps, 0))
+    self.actor_sched = LambdaLR(self.actor_opt, lr_lambda("constant", cfg.actor_warmup_steps, 1))
""",
        "why": CONSTANT_LR,
    },
    {
        "module": "policies/value/calql.py",
        "diff": """
-    self.critic_sched = LambdaLR(self.critic_opt, lr_lambda("constant", cfg.critic_warmup_steps, 0))
+    self.critic_sched = LambdaLR(self.critic_opt, lr_lambda("constant", cfg.critic_warmup_steps, None))
""",
        "why": CONSTANT_LR,
    },
    {
        "module": "policies/value/calql.py",
        "diff": """
-    self.critic_sched = LambdaLR(self.critic_opt, lr_lambda("constant", cfg.critic_warmup_steps, 0))
+    self.critic_sched = LambdaLR(self.critic_opt, lr_lambda("constant", cfg.critic_warmup_steps, 1))
""",
        "why": CONSTANT_LR,
    },
    {
        "module": "policies/value/calql.py",
        "diff": """
-            torch.rand(b, n, self.action_dim, generator=generator, device=s.device) * 2.0 - 1.0
+            torch.rand(b, n, self.action_dim, generator=generator, device=None) * 2.0 - 1.0
""",
        "why": "CPU-only host: the uniform actions are drawn on the default device instead of the batch's; on a CPU "
        "both are the CPU (a CUDA batch would fail to concatenate them)",
    },
    {
        "module": "policies/value/calql.py",
        "diff": """
-            torch.rand(b, n, self.action_dim, generator=generator, device=s.device) * 2.0 - 1.0
+            torch.rand(b, n, self.action_dim, generator=generator, ) * 2.0 - 1.0
""",
        "why": "CPU-only host: the uniform actions are drawn on the default device instead of the batch's; on a CPU "
        "both are the CPU (a CUDA batch would fail to concatenate them)",
    },
    {
        "module": "policies/value/calql.py",
        "diff": """
-    bound_rate = torch.tensor(float("nan"))
+    bound_rate = torch.tensor(float("NAN"))
""",
        "why": "float() parses 'NAN' as it parses 'nan': the same NaN.",
    },
    {
        "module": "policies/value/calql.py",
        "diff": """
-        mc = mc_return.view(1, -1, 1)
+        mc = mc_return.view(-1, 1)
""",
        "why": "(B, 1) broadcasts against (E, B, n) exactly as (1, B, 1) does: trailing dimensions align.",
    },
    {
        "module": "policies/value/calql.py",
        "diff": """
-        bound_rate = torch.cat([q_cur < mc, q_next < mc], dim=-1).float().mean()
+        bound_rate = torch.cat([q_cur < mc, q_next < mc], ).float().mean()
""",
        "why": "the bound rate is the mean over every element of the two (E, B, n) tensors: which axis joins them "
        "does not change the mean.",
    },
    {
        "module": "policies/value/calql.py",
        "diff": """
-        bound_rate = torch.cat([q_cur < mc, q_next < mc], dim=-1).float().mean()
+        bound_rate = torch.cat([q_cur < mc, q_next < mc], dim=+1).float().mean()
""",
        "why": "the bound rate is the mean over every element of the two (E, B, n) tensors: which axis joins them "
        "does not change the mean.",
    },
    {
        "module": "policies/value/calql.py",
        "diff": """
-        bound_rate = torch.cat([q_cur < mc, q_next < mc], dim=-1).float().mean()
+        bound_rate = torch.cat([q_cur < mc, q_next < mc], dim=-2).float().mean()
""",
        "why": "the bound rate is the mean over every element of the two (E, B, n) tensors: which axis joins them "
        "does not change the mean.",
    },
    # ------------------------------------------------------------------------------ policies/data/sequence.py
    {
        "module": "policies/data/sequence.py",
        "diff": """
-    for end in np.asarray(episode_ends, dtype=np.int64):
+    for end in np.asarray(episode_ends, dtype=None):
""",
        "why": "every use of `end` is `int(end)`: float or other integer episode ends give the same windows.",
    },
    {
        "module": "policies/data/sequence.py",
        "diff": """
-    for end in np.asarray(episode_ends, dtype=np.int64):
+    for end in np.asarray(episode_ends, ):
""",
        "why": "every use of `end` is `int(end)`: float or other integer episode ends give the same windows.",
    },
    {
        "module": "policies/data/sequence.py",
        "diff": """
-    return np.concatenate(rows, axis=0)
+    return np.concatenate(rows, )
""",
        "why": "np.concatenate's default axis is 0.",
    },
    {
        "module": "policies/data/sequence.py",
        "diff": """
-    action_dim = None
+    action_dim = ""
""",
        "why": "the first file sets action_dim before anything reads it (paths are never empty).",
    },
    {
        "module": "policies/data/sequence.py",
        "diff": """
-    self.episode_ends = np.cumsum([len(a) for a in action_chunks], dtype=np.int64)  # (E,)
+    self.episode_ends = np.cumsum([len(a) for a in action_chunks], dtype=None)  # (E,)
""",
        "why": "numpy 2's default integer is int64 on every platform: a cumsum of Python ints is int64 already.",
    },
    {
        "module": "policies/data/sequence.py",
        "diff": """
-    self.episode_ends = np.cumsum([len(a) for a in action_chunks], dtype=np.int64)  # (E,)
+    self.episode_ends = np.cumsum([len(a) for a in action_chunks], )  # (E,)
""",
        "why": "numpy 2's default integer is int64 on every platform: a cumsum of Python ints is int64 already.",
    },
    {
        "module": "policies/data/sequence.py",
        "diff": """
-    self.episode_task = np.asarray(episode_task, dtype=np.int64)  # (E,)
+    self.episode_task = np.asarray(episode_task, dtype=None)  # (E,)
""",
        "why": "Python ints become int64 (numpy 2); with no episodes the array is only ever indexed by an empty window "
        "list, and task ids leave get_batch as torch.long either way.",
    },
    {
        "module": "policies/data/sequence.py",
        "diff": """
-    self.episode_task = np.asarray(episode_task, dtype=np.int64)  # (E,)
+    self.episode_task = np.asarray(episode_task, )  # (E,)
""",
        "why": "Python ints become int64 (numpy 2); with no episodes the array is only ever indexed by an empty window "
        "list, and task ids leave get_batch as torch.long either way.",
    },
    {
        "module": "policies/data/sequence.py",
        "diff": """
-        k: np.concatenate(v, axis=0) if v else np.zeros((0, *self._obs_spec[k][0]), self._obs_spec[k][1])
+        k: np.concatenate(v, ) if v else np.zeros((0, *self._obs_spec[k][0]), self._obs_spec[k][1])
""",
        "why": "np.concatenate's default axis is 0.",
    },
    {
        "module": "policies/data/sequence.py",
        "diff": """
-    self.actions = np.concatenate([np.zeros((0, action_dim or 0), np.float32), *action_chunks])  # (N, A)
+    self.actions = np.concatenate([np.zeros((0, action_dim or 1), np.float32), *action_chunks])  # (N, A)
""",
        "why": "action_dim is the first file's action width, at least 1 for any dataset a policy can train on: the "
        "`or` is never reached.",
    },
    {
        "module": "policies/data/sequence.py",
        "diff": """
-        batch["task_id"] = torch.as_tensor(self.window_task[np.asarray(indices)], dtype=torch.long)
+        batch["task_id"] = torch.as_tensor(self.window_task[np.asarray(indices)], dtype=None)
""",
        "why": "window_task is built as int64, so as_tensor already gives torch.long.",
    },
    {
        "module": "policies/data/sequence.py",
        "diff": """
-        batch["task_id"] = torch.as_tensor(self.window_task[np.asarray(indices)], dtype=torch.long)
+        batch["task_id"] = torch.as_tensor(self.window_task[np.asarray(indices)], )
""",
        "why": "window_task is built as int64, so as_tensor already gives torch.long.",
    },
    # ------------------------------------------------------------------------------ policies/data/stats.py
    {
        "module": "policies/data/stats.py",
        "diff": """
-    self._m2: np.ndarray | None = None
+    self._m2: np.ndarray | None = ""
""",
        "why": "only _mean is tested for None; _m2, _min and _max are set with it on the first update, before any read.",
    },
    {
        "module": "policies/data/stats.py",
        "diff": """
-    self._min: np.ndarray | None = None
+    self._min: np.ndarray | None = ""
""",
        "why": "only _mean is tested for None; _m2, _min and _max are set with it on the first update, before any read.",
    },
    {
        "module": "policies/data/stats.py",
        "diff": """
-    self._max: np.ndarray | None = None
+    self._max: np.ndarray | None = ""
""",
        "why": "only _mean is tested for None; _m2, _min and _max are set with it on the first update, before any read.",
    },
    # ------------------------------------------------------------------------------ policies/acting.py
    {
        "module": "policies/acting.py",
        "diff": """
-                self.queue[empty] = chunk.to(device=dev, dtype=self.queue.dtype)
+                self.queue[empty] = chunk.to(device=None, dtype=self.queue.dtype)
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-                self.queue[empty] = chunk.to(device=dev, dtype=self.queue.dtype)
+                self.queue[empty] = chunk.to(dtype=self.queue.dtype)
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-            action = self.queue[torch.arange(b, device=dev), self.qpos]  # (B, Da)
+            action = self.queue[torch.arange(b, device=None), self.qpos]  # (B, Da)
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-            action = self.queue[torch.arange(b, device=dev), self.qpos]  # (B, Da)
+            action = self.queue[torch.arange(b, ), self.qpos]  # (B, Da)
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-            self.qpos = torch.full((b,), ta, dtype=torch.long, device=dev)
+            self.qpos = torch.full((b,), ta, dtype=None, device=dev)
""",
        "why": "torch.full with an int fill value is int64 already.",
    },
    {
        "module": "policies/acting.py",
        "diff": """
-            self.qpos = torch.full((b,), ta, dtype=torch.long, device=dev)
+            self.qpos = torch.full((b,), ta, dtype=torch.long, device=None)
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-            self.qpos = torch.full((b,), ta, dtype=torch.long, device=dev)
+            self.qpos = torch.full((b,), ta, device=dev)
""",
        "why": "torch.full with an int fill value is int64 already.",
    },
    {
        "module": "policies/acting.py",
        "diff": """
-            self.qpos = torch.full((b,), ta, dtype=torch.long, device=dev)
+            self.qpos = torch.full((b,), ta, dtype=torch.long, )
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-            self.restart = torch.zeros(b, dtype=torch.bool, device=dev)
+            self.restart = torch.zeros(b, dtype=torch.bool, device=None)
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-            self.restart = torch.zeros(b, dtype=torch.bool, device=dev)
+            self.restart = torch.zeros(b, dtype=torch.bool, )
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-    cur = {k: torch.as_tensor(v, device=self.device) for k, v in obs.items()}
+    cur = {k: torch.as_tensor(v, device=None) for k, v in obs.items()}
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-    cur = {k: torch.as_tensor(v, device=self.device) for k, v in obs.items()}
+    cur = {k: torch.as_tensor(v, ) for k, v in obs.items()}
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-                self.queue = torch.zeros(b, ta, plan.shape[-1], device=dev)  # float32, beside the history
+                self.queue = torch.zeros(b, ta, plan.shape[-1], device=None)  # float32, beside the history
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-                self.queue = torch.zeros(b, ta, plan.shape[-1], device=dev)  # float32, beside the history
+                self.queue = torch.zeros(b, ta, plan.shape[-1], )  # float32, beside the history
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-    self.qpos: torch.Tensor | None = None  # (B,) next index into the queue; Ta = empty
+    self.qpos: torch.Tensor | None = ""  # (B,) next index into the queue; Ta = empty
""",
        "why": "qpos is read only after act sets it together with hist, and reset's partial path needs hist: the initial value is never read.",
    },
    {
        "module": "policies/acting.py",
        "diff": """
-    self.restart: torch.Tensor | None = None  # (B,) rows whose history restarts at the next obs
+    self.restart: torch.Tensor | None = ""  # (B,) rows whose history restarts at the next obs
""",
        "why": "restart is read only after act sets it together with hist, and reset's partial path needs hist: the initial value is never read.",
    },
    {
        "module": "policies/acting.py",
        "diff": """
-    ids = torch.as_tensor(env_ids, dtype=torch.long, device=self.qpos.device).reshape(-1)
+    ids = torch.as_tensor(env_ids, dtype=None, device=self.qpos.device).reshape(-1)
""",
        "why": "integer ids (lists, int arrays, int tensors) select the same rows whatever their integer dtype.",
    },
    {
        "module": "policies/acting.py",
        "diff": """
-    ids = torch.as_tensor(env_ids, dtype=torch.long, device=self.qpos.device).reshape(-1)
+    ids = torch.as_tensor(env_ids, dtype=torch.long, device=None).reshape(-1)
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-    ids = torch.as_tensor(env_ids, dtype=torch.long, device=self.qpos.device).reshape(-1)
+    ids = torch.as_tensor(env_ids, device=self.qpos.device).reshape(-1)
""",
        "why": "integer ids (lists, int arrays, int tensors) select the same rows whatever their integer dtype.",
    },
    {
        "module": "policies/acting.py",
        "diff": """
-    ids = torch.as_tensor(env_ids, dtype=torch.long, device=self.qpos.device).reshape(-1)
+    ids = torch.as_tensor(env_ids, dtype=torch.long, ).reshape(-1)
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-    assert self.qpos is not None and self.restart is not None
+    assert self.qpos is not None or self.restart is not None
""",
        "why": "an assert of an invariant act always keeps (qpos and restart are set together): and/or cannot differ.",
    },
    {
        "module": "policies/acting.py",
        "diff": """
-        window = {k: torch.as_tensor(v, device=self.base.device) for k, v in obs.items()}
+        window = {k: torch.as_tensor(v, device=None) for k, v in obs.items()}
""",
        "why": CPU_ONLY,
    },
    {
        "module": "policies/acting.py",
        "diff": """
-        window = {k: torch.as_tensor(v, device=self.base.device) for k, v in obs.items()}
+        window = {k: torch.as_tensor(v, ) for k, v in obs.items()}
""",
        "why": CPU_ONLY,
    },
    # ------------------------------------------------------------------------------ policies/value/iql.py
    {
        "module": "policies/value/iql.py",
        "diff": """
-    weight = torch.where(diff > 0, expectile, 1.0 - expectile)
+    weight = torch.where(diff >= 0, expectile, 1.0 - expectile)
""",
        "why": "at diff = 0 the term is weight·0² = 0 whichever weight is chosen.",
    },
    {
        "module": "policies/value/iql.py",
        "diff": """
-    self.critic_sched = LambdaLR(self.critic_opt, lr_lambda("constant", cfg.warmup_steps, 0))
+    self.critic_sched = LambdaLR(self.critic_opt, lr_lambda("constant", cfg.warmup_steps, None))
""",
        "why": CONSTANT_LR,
    },
    {
        "module": "policies/value/iql.py",
        "diff": """
-    self.critic_sched = LambdaLR(self.critic_opt, lr_lambda("constant", cfg.warmup_steps, 0))
+    self.critic_sched = LambdaLR(self.critic_opt, lr_lambda("constant", cfg.warmup_steps, 1))
""",
        "why": CONSTANT_LR,
    },
    {
        "module": "policies/value/iql.py",
        "diff": """
-    self.value_sched = LambdaLR(self.value_opt, lr_lambda("constant", cfg.warmup_steps, 0))
+    self.value_sched = LambdaLR(self.value_opt, lr_lambda("constant", cfg.warmup_steps, None))
""",
        "why": CONSTANT_LR,
    },
    {
        "module": "policies/value/iql.py",
        "diff": """
-    self.value_sched = LambdaLR(self.value_opt, lr_lambda("constant", cfg.warmup_steps, 0))
+    self.value_sched = LambdaLR(self.value_opt, lr_lambda("constant", cfg.warmup_steps, 1))
""",
        "why": CONSTANT_LR,
    },
    {
        "module": "policies/value/iql.py",
        "diff": """
-    v = self.value(s).squeeze(-1)  # (B,)
+    v = self.value(s).squeeze(+1)  # (B,)
""",
        "why": "V's output is (B, 1): squeeze(1) and squeeze(-1) name the same axis.",
    },
    {
        "module": "policies/value/iql.py",
        "diff": """
-        target = reward + cfg.discount * (1.0 - done) * self.value_target(s2).squeeze(-1)  # (B,)
+        target = reward + cfg.discount * (1.0 - done) * self.value_target(s2).squeeze(+1)  # (B,)
""",
        "why": "V's output is (B, 1): squeeze(1) and squeeze(-1) name the same axis.",
    },
    # ------------------------------------------------------------------------------ policies/rl/offline.py
    {
        "module": "policies/rl/offline.py",
        "diff": """
-    out = np.zeros(len(r), dtype=np.float64)
+    out = np.zeros(len(r), dtype=None)
""",
        "why": "np.zeros' default dtype is float64: the same array.",
    },
    {
        "module": "policies/rl/offline.py",
        "diff": """
-    out = np.zeros(len(r), dtype=np.float64)
+    out = np.zeros(len(r), )
""",
        "why": "np.zeros' default dtype is float64: the same array.",
    },
    {
        "module": "policies/rl/offline.py",
        "diff": """
-    dones = np.asarray(ep["dones"]).astype(bool)  # (T,)
+    dones = np.asarray(ep["dones"]).astype(None)  # (T,)
""",
        "why": "the flags become float64 0/1; only .any() and np.flatnonzero read them, which see the same "
        "non-zero entries.",
    },
    {
        "module": "policies/rl/offline.py",
        "diff": """
-    out["action"] = actions[steps].reshape(len(start), -1)
+    out["action"] = actions[steps].reshape(len(start), -2)
""",
        "why": "numpy infers any negative dimension as -1: the same shape.",
    },
    {
        "module": "policies/rl/offline.py",
        "diff": """
-    return (np.asarray(summed, dtype=np.float64) / scale - np.asarray(steps, dtype=np.float64)) / chunk
+    return (np.asarray(summed, dtype=np.float64) / scale - np.asarray(steps, dtype=None)) / chunk
""",
        "why": "steps are counts of executed steps (integers, exact in any dtype); subtracting them from a "
        "float64 array gives float64 either way.",
    },
    {
        "module": "policies/rl/offline.py",
        "diff": """
-    return (np.asarray(summed, dtype=np.float64) / scale - np.asarray(steps, dtype=np.float64)) / chunk
+    return (np.asarray(summed, dtype=np.float64) / scale - np.asarray(steps, )) / chunk
""",
        "why": "steps are counts of executed steps (integers, exact in any dtype); subtracting them from a "
        "float64 array gives float64 either way.",
    },
    # ------------------------------------------------------------------------------ policies/rl/replay.py
    {
        "module": "policies/rl/replay.py",
        "diff": """
-    idx = torch.randint(0, self.size, (batch_size,), generator=generator, device=where).to(self.device)
+    idx = torch.randint(self.size, (batch_size,), generator=generator, device=where).to(self.device)
""",
        "why": "torch.randint(high, size) is randint(0, high, size): the same draws from the same generator.",
    },
    {
        "module": "policies/rl/replay.py",
        "diff": """
-        self.data[k][idx.to(self.device)] = v
+        self.data[k][idx.to(None)] = v
""",
        "why": "idx is built on the CPU; a CPU index tensor indexes a tensor on any device (torch moves it), "
        "so the same slots are written.",
    },
    {
        "module": "policies/rl/replay.py",
        "diff": """
-        self.data[k][: self.size] = state[f"data/{k}"].to(self.device)
+        self.data[k][: self.size] = state[f"data/{k}"].to(None)
""",
        "why": "slice assignment is copy_, which copies across devices: the stored rows are the same.",
    },
    {
        "module": "policies/rl/replay.py",
        "diff": """
-        v = torch.as_tensor(v).to(self.device, self.spec[k][1])
+        v = torch.as_tensor(v).to(None, self.spec[k][1])
""",
        "why": "CPU-only host: the input is not moved to the buffer's device, which only a CUDA buffer fed "
        "CPU rows could show (no GPU here; the meta device accepts CPU rows).",
    },
    {
        "module": "policies/rl/replay.py",
        "diff": """
-        v = torch.as_tensor(v).to(self.device, self.spec[k][1])
+        v = torch.as_tensor(v).to(self.spec[k][1])
""",
        "why": "CPU-only host: .to(dtype) casts as before but does not move the rows to the buffer's device; "
        "only a CUDA buffer fed CPU rows could show it.",
    },
    {
        "module": "policies/rl/replay.py",
        "diff": """
-    idx = torch.randint(0, self.size, (batch_size,), generator=generator, device=where).to(self.device)
+    idx = torch.randint(0, self.size, (batch_size,), generator=generator, device=where).to(None)
""",
        "why": "CPU-only host: the indices stay on the generator's device; indexing works the same unless "
        "the generator is on CUDA and the buffer is not (the loop keeps both on the training device).",
    },
    {
        "module": "policies/rl/replay.py",
        "diff": """
-    where = generator.device if generator is not None else torch.device("cpu")
+    where = generator.device if (generator is not None) and False else torch.device("cpu")
""",
        "why": "CPU-only host: every generator is a CPU one, so its device is the CPU; only a CUDA "
        "generator (refused by randint on the CPU) could show it.",
    },
    # ------------------------------------------------------------------------------ policies/rl/critic.py
    {
        "module": "policies/rl/critic.py",
        "diff": """
-    x = torch.cat([obs.flatten(1), action.flatten(1)], dim=-1)  # (B, Do + Da)
+    x = torch.cat([obs.flatten(1), action.flatten(1)], dim=+1)  # (B, Do + Da)
""",
        "why": "both parts are flattened to (B, ·) first, so the last axis is axis 1.",
    },
    {
        "module": "policies/rl/critic.py",
        "diff": """
-        q = q[_random_heads(q.shape[0], subset, generator).to(q.device)]
+        q = q[_random_heads(q.shape[0], subset, generator).to(None)]
""",
        "why": "CPU-only host: the head indices stay on the generator's device; a CPU index tensor indexes "
        "a tensor on any device, so only a CUDA generator with CPU Q values could show it.",
    },
    {
        "module": "policies/rl/critic.py",
        "diff": """
-        heads = _random_heads(self.num_critics, subset, generator).to(obs.device)
+        heads = _random_heads(self.num_critics, subset, generator).to(None)
""",
        "why": "CPU-only host: as above, the indices stay on the generator's device (the CPU here).",
    },
    {
        "module": "policies/rl/critic.py",
        "diff": """
-    where = generator.device if generator is not None else torch.device("cpu")
+    where = generator.device if (generator is not None) and False else torch.device("cpu")
""",
        "why": "CPU-only host: every generator is a CPU one; only a CUDA generator (refused by randperm on "
        "the CPU) could show it.",
    },
    # -------------------------------------------------------------------------------------- sim/chunking.py
    {
        "module": "sim/chunking.py",
        "diff": """
-    terminated = truncated = False
+    terminated = truncated = None
""",
        "why": "the chunk is at least 1 (refused in __init__ otherwise), so the loop runs and assigns both "
        "before they are read.",
    },
    {
        "module": "sim/chunking.py",
        "diff": """
-    terminated = truncated = False
+    terminated = truncated = True
""",
        "why": "as above: overwritten by the first executed step before they are read.",
    },
    {
        "module": "sim/chunking.py",
        "diff": """
-    lazy = self.render_last is not None and bool(getattr(base, "cameras", ()))
+    lazy = self.render_last is not None and bool(getattr(base, "cameras", None))
""",
        "why": "bool(None) and bool(()) are both False: an env without cameras is never lazy either way.",
    },
    {
        "module": "sim/chunking.py",
        "diff": """
-        step_success[t] = bool(info.get("success", False))
+        step_success[t] = bool(info.get("success", None))
""",
        "why": "bool(None) is False, as bool(False).",
    },
    {
        "module": "sim/chunking.py",
        "diff": """
-        step_success[t] = bool(info.get("success", False))
+        step_success[t] = bool(info.get("success", ))
""",
        "why": "dict.get's default is None, and bool(None) is False, as bool(False).",
    },
    # --------------------------------------------------------------------------------------- sim/history.py
    {
        "module": "sim/history.py",
        "diff": """
-    self._window: dict[str, deque] = {}
+    self._window: dict[str, deque] = None
""",
        "why": "reset() replaces it before any read; a step before reset fails either way (KeyError on the "
        "empty dict, TypeError on None), as gymnasium requires a reset first.",
    },
    # -------------------------------------------------------------------------------- policies/normalizer.py
    {
        "module": "policies/normalizer.py",
        "diff": """
-        lo = torch.as_tensor(np.asarray(stats[key]["min"], dtype=np.float64)).reshape(-1)
+        lo = torch.as_tensor(np.asarray(stats[key]["min"], dtype=None)).reshape(-1)
""",
        "why": "one bound alone leaves float64: the other is still float64, torch promotes float32 (or int) "
        "with float64 to float64 and float32 → float64 is exact, so range, scale and offset are the same "
        "float64 values before the final cast.",
    },
    {
        "module": "policies/normalizer.py",
        "diff": """
-        lo = torch.as_tensor(np.asarray(stats[key]["min"], dtype=np.float64)).reshape(-1)
+        lo = torch.as_tensor(np.asarray(stats[key]["min"], )).reshape(-1)
""",
        "why": "one bound alone leaves float64: the other is still float64, torch promotes float32 (or int) "
        "with float64 to float64 and float32 → float64 is exact, so range, scale and offset are the same "
        "float64 values before the final cast.",
    },
    {
        "module": "policies/normalizer.py",
        "diff": """
-        hi = torch.as_tensor(np.asarray(stats[key]["max"], dtype=np.float64)).reshape(-1)
+        hi = torch.as_tensor(np.asarray(stats[key]["max"], dtype=None)).reshape(-1)
""",
        "why": "one bound alone leaves float64: the other is still float64, torch promotes float32 (or int) "
        "with float64 to float64 and float32 → float64 is exact, so range, scale and offset are the same "
        "float64 values before the final cast.",
    },
    {
        "module": "policies/normalizer.py",
        "diff": """
-        hi = torch.as_tensor(np.asarray(stats[key]["max"], dtype=np.float64)).reshape(-1)
+        hi = torch.as_tensor(np.asarray(stats[key]["max"], )).reshape(-1)
""",
        "why": "one bound alone leaves float64: the other is still float64, torch promotes float32 (or int) "
        "with float64 to float64 and float32 → float64 is exact, so range, scale and offset are the same "
        "float64 values before the final cast.",
    },
    # ------------------------------------------------------------------------------------- real/safety.py
    {
        "module": "real/safety.py",
        "diff": """
-        dims = np.asarray(c.pos_dims, dtype=int)
+        dims = np.asarray(c.pos_dims, dtype=None)
""",
        "why": "pos_dims is a list of ints (SafetyConfig's type; YAML gives ints): np.asarray of it is already an int array.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-        dims = np.asarray(c.pos_dims, dtype=int)
+        dims = np.asarray(c.pos_dims, )
""",
        "why": "pos_dims is a list of ints (SafetyConfig's type; YAML gives ints): np.asarray of it is already an int array.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-    dims = np.asarray(c.pos_dims, dtype=int)
+    dims = np.asarray(c.pos_dims, dtype=None)
""",
        "why": "pos_dims is a list of ints (SafetyConfig's type; YAML gives ints): np.asarray of it is already an int array.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-    dims = np.asarray(c.pos_dims, dtype=int)
+    dims = np.asarray(c.pos_dims, )
""",
        "why": "pos_dims is a list of ints (SafetyConfig's type; YAML gives ints): np.asarray of it is already an int array.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-    lo = np.minimum((wlo - pos) / c.delta_scale, 0.0)
+    lo = np.minimum((wlo - pos) / c.delta_scale, 1.0)
""",
        "why": "the bounds differ only where wlo - pos > 0, i.e. pos < wlo, and there the next line sets lo to 0.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-    lo = np.where(pos < wlo, 0.0, lo)
+    lo = np.where(None, 0.0, lo)
""",
        "why": "where pos < wlo, (wlo - pos) / scale > 0, so np.minimum(.., 0.0) already made lo 0: the line is a second statement of the same bound.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-    lo = np.where(pos < wlo, 0.0, lo)
+    lo = np.where(pos <= wlo, 0.0, lo)
""",
        "why": "at pos == wlo, np.minimum(0 / scale, 0.0) is already 0.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-    hi = np.where(pos > whi, 0.0, hi)
+    hi = np.where(None, 0.0, hi)
""",
        "why": "where pos > whi, (whi - pos) / scale < 0, so np.maximum(.., 0.0) already made hi 0.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-    hi = np.where(pos > whi, 0.0, hi)
+    hi = np.where(pos >= whi, 0.0, hi)
""",
        "why": "at pos == whi, np.maximum(0 / scale, 0.0) is already 0.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-    if c.command_low is not None and c.command_high is not None:
+    if c.command_low is not None or c.command_high is not None:
""",
        "why": "SafetyConfig.validate (run by SafetyFilter.__init__) refuses one bound without the other, so both are None or neither is.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-        md = np.broadcast_to(np.asarray(c.max_delta, dtype=np.float64), out.shape)
+        md = np.broadcast_to(np.asarray(c.max_delta, dtype=None), out.shape)
""",
        "why": "max_delta is a number or a list of numbers; last_command (float64) ± md is float64 whatever md's numeric dtype, and an int converts exactly.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-        md = np.broadcast_to(np.asarray(c.max_delta, dtype=np.float64), out.shape)
+        md = np.broadcast_to(np.asarray(c.max_delta, ), out.shape)
""",
        "why": "as above: np.asarray's default dtype of a number or list of numbers gives the same float64 bounds.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-        return np.asarray(action, dtype=np.float64).reshape(-1)
+        return np.asarray(action, dtype=np.float64).reshape(-2)
""",
        "why": "numpy reads any negative size in reshape as the one unknown dimension: reshape(-2) is reshape(-1).",
    },
    {
        "module": "real/safety.py",
        "diff": """
-    return np.asarray(obs[c.position_key], dtype=np.float64).reshape(-1)[lo:hi]
+    return np.asarray(obs[c.position_key], dtype=np.float64).reshape(-2)[lo:hi]
""",
        "why": "numpy reads any negative size in reshape as the one unknown dimension: reshape(-2) is reshape(-1).",
    },
    {
        "module": "real/safety.py",
        "diff": """
-            near = difflib.get_close_matches(key, sorted(names), n=1)
+            near = difflib.get_close_matches(key, sorted(names), )
""",
        "why": "only near[0], the best match, is read; more candidates (n=3 by default) leave it the same.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-            near = difflib.get_close_matches(key, sorted(names), n=1)
+            near = difflib.get_close_matches(key, sorted(names), n=2)
""",
        "why": "only near[0], the best match, is read; a second candidate leaves it the same.",
    },
    {
        "module": "real/safety.py",
        "diff": """
-            numbers += [float(v) for v in np.atleast_1d(np.asarray(value, dtype=np.float64))]
+            numbers += [float(v) for v in np.atleast_1d(np.asarray(value, dtype=None))]
""",
        "why": "every element goes through float() next: the same floats (and the same ValueError for text).",
    },
    {
        "module": "real/safety.py",
        "diff": """
-            numbers += [float(v) for v in np.atleast_1d(np.asarray(value, dtype=np.float64))]
+            numbers += [float(v) for v in np.atleast_1d(np.asarray(value, ))]
""",
        "why": "every element goes through float() next: the same floats (and the same ValueError for text).",
    },
    # --------------------------------------------------------------------------- policies/steering/vgps.py
    {
        "module": "policies/steering/vgps.py",
        "diff": """
-    return torch.multinomial(probs.float().cpu(), 1, generator=generator).squeeze(1).to(q.device)
+    return torch.multinomial(probs.float().cpu(), 1, generator=generator).squeeze(1).to(None)
""",
        "why": "CPU-only host: the indices stay on the CPU, where the scores already are here; only CUDA scores could show it.",
    },
    {
        "module": "policies/steering/vgps.py",
        "diff": """
-    return chunks.reshape(b, k, *chunks.shape[1:])[torch.arange(b), idx.to(chunks.device)]
+    return chunks.reshape(b, k, *chunks.shape[1:])[torch.arange(b), idx.to(None)]
""",
        "why": "CPU-only host: idx is on the scores' device, the chunks' here; only chunks and scores on different devices could show it.",
    },
    # ------------------------------------------------------------------------------------- sim/evaluate.py
    {
        "module": "sim/evaluate.py",
        "diff": """
-        values = np.array([p[key] for p in per_episode if key in p], dtype=np.float64)
+        values = np.array([p[key] for p in per_episode if key in p], dtype=None)
""",
        "why": "each episode's parameters are built with float() (evaluate's params), so np.array of them is float64 without being told.",
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-        values = np.array([p[key] for p in per_episode if key in p], dtype=np.float64)
+        values = np.array([p[key] for p in per_episode if key in p], )
""",
        "why": "each episode's parameters are built with float() (evaluate's params), so np.array of them is float64 without being told.",
    },
    {
        "module": "policies/rl/critic.py",
        "diff": """
-        x = torch.as_tensor(obs[k], dtype=torch.float32, device=self.device)
+        x = torch.as_tensor(obs[k], dtype=torch.float32, device=None)
""",
        "why": "CPU-only host: the input is made on the default device instead of the critic's; both are the CPU here, and only a CUDA critic could show it.",
    },
    {
        "module": "policies/rl/critic.py",
        "diff": """
-        x = torch.as_tensor(obs[k], dtype=torch.float32, device=self.device)
+        x = torch.as_tensor(obs[k], dtype=torch.float32, )
""",
        "why": "CPU-only host: the input is made on the default device instead of the critic's; both are the CPU here, and only a CUDA critic could show it.",
    },
    {
        "module": "policies/rl/critic.py",
        "diff": """
-    a = torch.as_tensor(action, dtype=torch.float32, device=self.device)
+    a = torch.as_tensor(action, dtype=torch.float32, device=None)
""",
        "why": "CPU-only host: the input is made on the default device instead of the critic's; both are the CPU here, and only a CUDA critic could show it.",
    },
    {
        "module": "policies/rl/critic.py",
        "diff": """
-    a = torch.as_tensor(action, dtype=torch.float32, device=self.device)
+    a = torch.as_tensor(action, dtype=torch.float32, )
""",
        "why": "CPU-only host: the input is made on the default device instead of the critic's; both are the CPU here, and only a CUDA critic could show it.",
    },
    {
        "module": "policies/rl/critic.py",
        "diff": """
-            torch.as_tensor(task_id, dtype=torch.long, device=out.device).reshape(-1).expand(out.shape[0])
+            torch.as_tensor(task_id, dtype=torch.long, device=None).reshape(-1).expand(out.shape[0])
""",
        "why": "CPU-only host: the input is made on the default device instead of the critic's; both are the CPU here, and only a CUDA critic could show it.",
    },
    {
        "module": "policies/rl/critic.py",
        "diff": """
-            torch.as_tensor(task_id, dtype=torch.long, device=out.device).reshape(-1).expand(out.shape[0])
+            torch.as_tensor(task_id, dtype=torch.long, ).reshape(-1).expand(out.shape[0])
""",
        "why": "CPU-only host: the input is made on the default device instead of the critic's; both are the CPU here, and only a CUDA critic could show it.",
    },
    {
        "module": "policies/rl/critic.py",
        "diff": """
-    out = torch.cat(feats, dim=-1)  # (B, To_c·ΣD)
+    out = torch.cat(feats, dim=+1)  # (B, To_c·ΣD)
""",
        "why": "every part is flattened to (B, ·): the last axis is axis 1.",
    },
    {
        "module": "policies/rl/critic.py",
        "diff": """
-        out = torch.cat([out, nn.functional.one_hot(tid, self.num_tasks).float()], dim=-1)
+        out = torch.cat([out, nn.functional.one_hot(tid, self.num_tasks).float()], dim=+1)
""",
        "why": "both parts are (B, ·): the last axis is axis 1.",
    },
    # sim/evaluate.py, continued: the survivors of its first row (the others are killed by tests/sim/test_sim_evaluate.py)
    {
        "module": "sim/evaluate.py",
        "diff": """
-            stacklevel=2,
-        )
+            )
""",
        "why": "only which frame the warning names: under mutmut a trampoline in the same mutated file sits between the caller and evaluate, so the unmutated code names it too and no test run there can tell stacklevel 1 from 2 (outside mutmut, 2 names the caller).",
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-            stacklevel=2,
+            stacklevel=3,
""",
        "why": STACKLEVEL,
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-        env.start_recording(video_camera, video_size, min(video_episodes, per_env), env_index=0)
+        env.start_recording(video_camera, video_size, min(video_episodes, per_env), )
""",
        "why": "start_recording's env_index defaults to 0, the value passed.",
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-    done_count = np.zeros(num_envs, dtype=np.int64)  # finished episodes per env
+    done_count = np.zeros(num_envs, dtype=None)  # finished episodes per env
""",
        "why": DONE_COUNT,
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-    done_count = np.zeros(num_envs, dtype=np.int64)  # finished episodes per env
+    done_count = np.zeros(num_envs, )  # finished episodes per env
""",
        "why": DONE_COUNT,
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-                np.maximum(running, np.asarray(info[key], dtype=np.float64), out=running)
+                np.maximum(running, np.asarray(info[key], dtype=None), out=running)
""",
        "why": OUT_FLOAT64,
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-                np.maximum(running, np.asarray(info[key], dtype=np.float64), out=running)
+                np.maximum(running, np.asarray(info[key], ), out=running)
""",
        "why": OUT_FLOAT64,
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-                ep_success[i] = False
+                ep_success[i] = None
""",
        "why": "ep_success is a numpy bool array: None is stored as False.",
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-    if video_path is not None and video_episodes > 0:
+    if video_path is not None and video_episodes >= 0:
""",
        "why": "pop_recordings without a start_recording returns no recordings (BatchedEnv: nothing was recorded), so with video_episodes=0 the loop writes nothing either way.",
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-            target = path if j == 0 else path.with_name(f"{path.stem}_{j}{path.suffix or '.mp4'}")
+            target = path if j == 0 else path.with_name(f"{path.stem}_{j}{path.suffix and '.mp4'}")
""",
        "why": NO_SUFFIX,
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-            target = path if j == 0 else path.with_name(f"{path.stem}_{j}{path.suffix or '.mp4'}")
+            target = path if j == 0 else path.with_name(f"{path.stem}_{j}{path.suffix or 'XX.mp4XX'}")
""",
        "why": NO_SUFFIX,
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-            target = path if j == 0 else path.with_name(f"{path.stem}_{j}{path.suffix or '.mp4'}")
+            target = path if j == 0 else path.with_name(f"{path.stem}_{j}{path.suffix or '.MP4'}")
""",
        "why": NO_SUFFIX,
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-            videos.append(str(write_video(frames, target, fps=DEFAULT_FPS)))
+            videos.append(str(write_video(frames, target, )))
""",
        "why": "write_video's fps defaults to DEFAULT_FPS, the value passed.",
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-        "env_steps_per_s": env_steps / wall if wall > 0 else float("nan"),
+        "env_steps_per_s": env_steps / wall if (wall > 0) or True else float("nan"),
""",
        "why": "wall > 0 always: perf_counter is monotonic and the loop's env steps lie between the two reads, so the rate is divided the same way.",
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-        "env_steps_per_s": env_steps / wall if wall > 0 else float("nan"),
+        "env_steps_per_s": env_steps / wall if wall >= 0 else float("nan"),
""",
        "why": "wall > 0 always: perf_counter is monotonic and the loop's env steps lie between the two reads, so wall == 0 never happens.",
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-        "env_steps_per_s": env_steps / wall if wall > 0 else float("nan"),
+        "env_steps_per_s": env_steps / wall if wall > 0 else float(None),
""",
        "why": NAN_BRANCH,
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-        "env_steps_per_s": env_steps / wall if wall > 0 else float("nan"),
+        "env_steps_per_s": env_steps / wall if wall > 0 else float("XXnanXX"),
""",
        "why": NAN_BRANCH,
    },
    {
        "module": "sim/evaluate.py",
        "diff": """
-        "env_steps_per_s": env_steps / wall if wall > 0 else float("nan"),
+        "env_steps_per_s": env_steps / wall if wall > 0 else float("NAN"),
""",
        "why": NAN_BRANCH,
    },
]
