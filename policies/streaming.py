"""Streaming Diffusion Policy (Høeg et al.; "TEDi" in the reference code), with the reference's defects fixed.

A persistent action buffer (B, Tp, Da) holds positions at different noise levels. With
h = floor((Tp - (To-1)) / Ta) chunks, position i belongs to chunk c(i) = clamp(floor((i-(To-1))/Ta), 0, h-1)
and starts a call at level k(i) = floor(N (c(i)+1) / h) - 1. Each call runs N/h denoiser calls (all
positions step down one level per call) until the executed positions To-1 .. To-1+Ta-1 are clean (level
-1), returns the buffer, shifts it left by Ta, drops the partially denoised tail, appends fresh N(0, I)
at level N-1, and re-noises the first To-1 (clean, already executed) positions to chunk 0's level
(the reference discards ``add_noise``'s result; here it is assigned).

Scheduler path: DDIM, eta = 0, on the inference grid. Inference levels k in {-1, ..., N_inf-1} map to
train timesteps t = k * (N_train // N_inf) ("leading" spacing, as DDIMScheduler), and a step from level k
goes to k-1 (alpha_bar = 1 below level 0). The reference's DDIM variant fed inference indices as train
timesteps; this one does not. N_inf must be divisible by h (so levels stay aligned after each shift) and
N_train by N_inf (so every inference level vector lies in the training support, checked at construction).

Training (``loss``) uses N = num_train_timesteps: with probability ``p_chunkwise`` (0.8) chunk-wise levels
k(i, j) = floor(N (c(i)+1)/h) - 1 - j with j ~ U{0 .. floor(N/h) - 1}, else one level ~ U{0 .. N-1} for
all positions (plain DP). ``act`` and ``stream_step`` use the buffer. ``sample(obs, noise)`` is stateless and
deterministic in noise (what DSRL, EXPO and V-GPS draw candidates from), two ways (``sample_levels``):
"streaming" (default) is a cold-start streaming call: constant levels down to chunk 0's start level, later
chunks' positions set back to their start levels with the same noise, then one streaming call, so its last
denoiser calls use chunk-wise level vectors like ``act`` (positions after To-1+Ta-1 come back partly
denoised; they are never executed). "constant" is a full N_inf-step DDIM at one level for every position
(DP sampling with this network). On the MT10 generalists "streaming" scores higher (README, V-GPS).
Per-row reset re-initialises that row's buffer; all rows keep identical level vectors, so the rows planned
together always share one level schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from robosteer.policies.base import _check_choice
from robosteer.policies.diffusion import DDIMTable, DiffusionConfig, DiffusionPolicy, ddim_update


class LevelSchedule:
    """The per-step tables for ``n_steps`` DDIM steps from one per-position level vector ``start`` (Tp,).

    Built and validated once per (start, n_steps), so negative levels (which would wrap ``alphas_cumprod``)
    need no host sync per step. Per step: train timesteps (1, Tp) and (sa, sb, sap, sdir) gathered at the
    step's levels, laid out (1, Tp, Da) (cheaper than (B, Tp, 1) broadcasts, same values).
    """

    def __init__(self, tab: DDIMTable, start: torch.Tensor, n_steps: int, action_dim: int) -> None:
        levels = start.detach().to("cpu", torch.long).reshape(-1)  # (Tp,)
        tp = levels.numel()
        self.timesteps: list[torch.Tensor] = []
        self.coefs: list[tuple[torch.Tensor, ...]] = []
        for _ in range(n_steps):
            if bool((levels < 0).any()):
                raise AssertionError(
                    f"SDP step with a negative level (would wrap alphas_cumprod): {levels.tolist()}"
                )
            self.timesteps.append((levels * tab.ratio).unsqueeze(0))  # (1, Tp)
            self.coefs.append(
                tuple(
                    v[levels].reshape(1, tp, 1).expand(1, tp, action_dim).contiguous()
                    for v in (tab.sa, tab.sb, tab.sap, tab.sdir)
                )
            )
            levels = (levels - 1).clamp(min=-1)
        self.final_levels = levels  # (Tp,)

    def to(self, device: torch.device) -> LevelSchedule:
        out = LevelSchedule.__new__(LevelSchedule)
        out.timesteps = [t.to(device) for t in self.timesteps]
        out.coefs = [tuple(c.to(device) for c in cs) for cs in self.coefs]
        out.final_levels = self.final_levels.to(device)
        return out


SAMPLE_LEVELS = ("streaming", "constant")


BUFFER_INITS = ("zero", "denoise")


@dataclass
class StreamingConfig(DiffusionConfig):
    """SDP hyperparameters; horizon 20 with To=2, Ta=8 gives h=2 chunks (the reference's lowdim config)."""

    horizon: int = 20
    p_chunkwise: float = 0.8  # training mixture: chunk-wise levels vs one constant level
    buffer_init: str = "zero"  # "zero": zeros noised to k(i) (fresh noise at level N-1) | "denoise"
    sample_levels: str = "streaming"  # stateless sample(): "streaming" cold-start call | "constant" full DDIM

    def validate(self) -> None:
        super().validate()
        _check_choice("scheduler", self.scheduler, ("ddim",))
        _check_choice("buffer_init", self.buffer_init, BUFFER_INITS)
        _check_choice("sample_levels", self.sample_levels, SAMPLE_LEVELS)
        if self.prefix_train_prob:
            raise ValueError(
                "prefix_train_prob is for diffusion policies: streaming already uses per-position levels"
            )
        h = (self.horizon - (self.n_obs_steps - 1)) // self.n_action_steps
        if h < 1:
            raise ValueError("streaming needs horizon - (n_obs_steps-1) >= n_action_steps")
        if self.num_inference_steps % h:
            ok = [n for n in range(h, self.num_train_timesteps + 1, h) if self.num_train_timesteps % n == 0]
            raise ValueError(
                f"num_inference_steps={self.num_inference_steps} must be divisible by h={h} chunks "
                f"(horizon={self.horizon}, n_obs_steps={self.n_obs_steps}, n_action_steps={self.n_action_steps}); "
                f"valid values with num_train_timesteps={self.num_train_timesteps}: {ok or 'none, change num_train_timesteps too'}"
            )
        if self.num_train_timesteps % self.num_inference_steps:
            raise ValueError(
                "num_train_timesteps must be divisible by num_inference_steps (train/test level coverage)"
            )
        if not 0.0 <= self.p_chunkwise <= 1.0:
            raise ValueError("p_chunkwise must be in [0, 1]")


class StreamingDiffusionPolicy(DiffusionPolicy):
    """SDP: per-position noise levels, a persistent buffer, N/h denoiser calls per ``act`` refill."""

    name = "streaming"
    config_class = StreamingConfig
    config: StreamingConfig
    per_position_levels = True
    # its denoiser runs on per-position levels; the DDIM inpainting path does not apply
    supports_prefix = False

    def __init__(
        self, shape_meta: Mapping[str, Any], config: StreamingConfig, stats: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(shape_meta, config, stats)
        c = config
        to1, ta, tp = c.n_obs_steps - 1, c.n_action_steps, c.horizon
        self.h = (tp - to1) // ta
        pos = torch.arange(tp)
        self.register_buffer(
            "chunk_index", ((pos - to1).div(ta, rounding_mode="floor")).clamp(0, self.h - 1), persistent=False
        )
        n_inf, n_tr = c.num_inference_steps, c.num_train_timesteps
        self.register_buffer(
            "init_levels",
            (n_inf * (self.chunk_index + 1)).div(self.h, rounding_mode="floor") - 1,
            persistent=False,
        )
        self.register_buffer(
            "train_chunk_levels",
            (n_tr * (self.chunk_index + 1)).div(self.h, rounding_mode="floor") - 1,
            persistent=False,
        )
        self.nfe_per_call = n_inf // self.h
        self.exec_pos = to1 + ta - 1  # last executed position
        self.keep = to1 + ta * (self.h - 1)  # positions surviving a shift
        self._buffer: torch.Tensor | None = None  # (B, Tp, Da) normalised
        self._levels: torch.Tensor | None = None  # (B, Tp) inference levels
        self._needs_init: torch.Tensor | None = None  # (B,) rows to re-initialise before the next call
        self.last_call_levels: torch.Tensor | None = None
        self._pending_init = False  # mirrors _needs_init.any() without a host sync per call
        self._schedules: dict[tuple[Any, ...], LevelSchedule] = {}
        self._stream_cache: tuple[torch.device, LevelSchedule] | None = None
        self._renoise_cache: tuple[torch.device, tuple[torch.Tensor, torch.Tensor]] | None = None
        self._cold_start_cache: tuple[torch.device, tuple[torch.Tensor, torch.Tensor]] | None = None
        self.check_coverage()
        self.check_stream_schedule()

    # ------------------------------------------------------------------ training
    def sample_train_levels(self, b: int, device: torch.device | None = None) -> torch.Tensor:
        """Per-position train timesteps (B, Tp) from the chunk-wise / constant mixture."""
        device = device or self.device
        n, per = self.config.num_train_timesteps, self.config.num_train_timesteps // self.h
        j = torch.randint(0, per, (b, 1), device=device)
        chunkwise = self.train_chunk_levels.to(device)[None] - j  # (B, Tp)
        const = torch.randint(0, n, (b, 1), device=device).expand(b, self.config.horizon)
        use_cw = torch.rand(b, 1, device=device) < self.config.p_chunkwise
        return torch.where(use_cw, chunkwise, const)

    def train_level_support(self) -> set[tuple[int, ...]]:
        """Every level vector the training sampler can produce (train timesteps)."""
        n, tp = self.config.num_train_timesteps, self.config.horizon
        cw = {tuple((self.train_chunk_levels - j).tolist()) for j in range(n // self.h)}
        return cw | {(k,) * tp for k in range(n)}

    def inference_level_vectors(self) -> set[tuple[int, ...]]:
        """Every per-position train-timestep vector the denoiser sees during streaming and full sampling."""
        ratio = self.ddim_table().ratio
        n = self.config.num_inference_steps
        seen = {tuple((self.init_levels - i).mul(ratio).tolist()) for i in range(self.nfe_per_call)}
        lowest = 0 if self.config.sample_levels == "constant" else self.nfe_per_call  # the constant phase
        seen |= {(k * ratio,) * self.config.horizon for k in range(lowest, n)}
        return seen

    def set_sample_levels(self, value: str) -> None:
        """Switch the stateless ``sample`` path of a built policy (a loaded checkpoint) between SAMPLE_LEVELS."""
        _check_choice("sample_levels", value, SAMPLE_LEVELS)
        self.config.sample_levels = value
        self.check_coverage()

    def check_coverage(self) -> None:
        """Fail at construction if inference would query level vectors the training sampler never draws."""
        missing = self.inference_level_vectors() - self.train_level_support()
        if missing:
            raise ValueError(
                f"streaming config: inference level vectors outside the training support, e.g. {min(missing)}"
            )

    def check_stream_schedule(self) -> None:
        """Validate once that a streaming call from ``init_levels`` ends with the executed positions clean (-1)
        and that shift + append + re-noise restores ``init_levels`` exactly (the schedule never changes)."""
        c = self.config
        final = self.level_schedule(self.init_levels, self.nfe_per_call, torch.device("cpu")).final_levels
        if not bool((final[: self.exec_pos + 1] == -1).all()):
            raise AssertionError(
                f"executed positions not clean after {self.nfe_per_call} NFEs: {final.tolist()}"
            )
        shifted = torch.cat(
            [
                final[c.n_action_steps : c.n_action_steps + self.keep],
                final.new_full((c.horizon - self.keep,), c.num_inference_steps - 1),
            ]
        )
        shifted[: c.n_obs_steps - 1] = self.init_levels[0]
        if not torch.equal(shifted, self.init_levels.cpu()):
            raise AssertionError(f"SDP levels drift: {shifted.tolist()} != {self.init_levels.tolist()}")

    def level_schedule(self, start: torch.Tensor, n_steps: int, device: torch.device) -> LevelSchedule:
        """The cached (validated) schedule for ``n_steps`` DDIM steps from the level vector ``start`` (Tp,)."""
        key = (tuple(start.tolist()), n_steps, self.config.num_inference_steps, device)
        if key not in self._schedules:
            cpu = torch.device("cpu")
            if device == cpu:
                self._schedules[key] = LevelSchedule(self.ddim_table(), start, n_steps, self.action_dim)
            else:
                self._schedules[key] = self.level_schedule(start, n_steps, cpu).to(device)
        return self._schedules[key]

    def _run_schedule(self, x: torch.Tensor, cond: torch.Tensor, sched: LevelSchedule) -> torch.Tensor:
        """DDIM steps of a validated schedule on x (B, Tp, Da); all rows share the schedule's levels."""
        b = x.shape[0]
        pt, clip, model = self.config.prediction_type, self._clip, self.model
        for t, (sa, sb, sap, sdir) in zip(sched.timesteps, sched.coefs):
            out = model(x, t if b == 1 else t.expand(b, -1), cond)  # (B, Tp, Da)
            x = ddim_update(x, out, sa, sb, sap, sdir, pt, clip)
        return x

    def loss(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """Per-position-level denoising loss under the SDP training mixture."""
        cond, x0 = self._prepare_batch(batch)  # (B, G), (B, Tp, Da)
        b = x0.shape[0]
        eps = torch.randn_like(x0)
        t = self.sample_train_levels(b, x0.device)  # (B, Tp)
        ac = self.noise_scheduler.alphas_cumprod.to(x0.device)[t].unsqueeze(-1)  # (B, Tp, 1)
        sa, sb = ac.sqrt(), (1 - ac).sqrt()
        xt = sa * x0 + sb * eps
        pred = self.model(xt, t, cond)
        pt = self.config.prediction_type
        target = eps if pt == "epsilon" else x0 if pt == "sample" else sa * eps - sb * x0
        loss = F.mse_loss(pred, target)
        return loss, {"loss": float(loss.detach())}

    # ------------------------------------------------------------------ denoising with per-position levels
    def denoise_levels(
        self, x: torch.Tensor, levels: torch.Tensor, cond: torch.Tensor, n_steps: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run ``n_steps`` DDIM steps on buffer x (B, Tp, Da) at inference levels (B, Tp); returns (x, levels).

        Rows sharing one level vector (the streaming case) use the cached, construction-validated
        schedule (one host sync per call); rows with different levels take the per-step gather path.
        """
        if torch.equal(levels, levels[:1].expand_as(levels)):
            sched = self.level_schedule(levels[0], n_steps, x.device)
            x = self._run_schedule(x, cond, sched)
            return x, sched.final_levels.expand_as(levels).clone()
        tab = self.ddim_table()
        dev = x.device
        sa_t, sb_t, sap_t, sdir_t = (v.to(dev) for v in (tab.sa, tab.sb, tab.sap, tab.sdir))
        pt, clip = self.config.prediction_type, self._clip
        for _ in range(n_steps):
            if bool((levels < 0).any()):
                raise AssertionError(
                    f"SDP step with a negative level (would wrap alphas_cumprod): {levels[0].tolist()}"
                )
            out = self.model(x, levels * tab.ratio, cond)  # (B, Tp, Da)
            g = levels.unsqueeze(-1)  # (B, Tp, 1)
            x = ddim_update(x, out, sa_t[g], sb_t[g], sap_t[g], sdir_t[g], pt, clip)
            levels = (levels - 1).clamp(min=-1)
        return x, levels

    def _sample_normalized(self, cond: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Stateless chunk from ``noise`` (B, Tp, Da), N_inf denoiser calls either way (``sample_levels``)."""
        n = self.config.num_inference_steps
        levels = torch.full(
            (noise.shape[0], self.config.horizon), n - 1, dtype=torch.long, device=noise.device
        )
        if self.config.sample_levels == "constant":  # full DDIM at one level (DP sampling with this network)
            return self.denoise_levels(noise, levels, cond, n)[0]
        # cold-start streaming call: constant levels down to chunk 0's start level (nfe_per_call - 1), then
        # later chunks back to their start levels with the same noise, then one streaming call
        x = self.denoise_levels(noise, levels, cond, n - self.nfe_per_call)[0]
        a, b = self._cold_start_coefs(noise.device)  # (1, Tp, 1) each
        return self._run_schedule(a * x + b * noise, cond, self._stream_schedule(noise.device))  # (B, Tp, Da)

    # ------------------------------------------------------------------ streaming buffer
    def _q_sample(self, x0: torch.Tensor, noise: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Forward-noise x0 (B, P, Da) to per-position train timesteps t (B, P) (DDPMScheduler.add_noise, per position)."""
        ac = self.noise_scheduler.alphas_cumprod.to(x0.device)[t].unsqueeze(-1)  # (B, P, 1)
        return ac.sqrt() * x0 + (1 - ac).sqrt() * noise

    def init_buffer(
        self, cond: torch.Tensor, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Fresh buffer (B, Tp, Da) and levels (B, Tp) for B rows (cond (B, G)).

        "zero": positions at level N-1 hold pure noise (like appended positions), lower levels hold zeros
        noised to their level. "denoise": a full DDIM denoise, then re-noised to k(i) with fresh noise.
        """
        b = cond.shape[0]
        noise = self._noise(noise, b)
        levels = self.init_levels.to(noise.device).expand(b, -1).clone()  # (B, Tp)
        t = levels * self.ddim_table().ratio
        if self.config.buffer_init == "zero":
            buf = self._q_sample(torch.zeros_like(noise), noise, t)
            buf = torch.where((levels == self.config.num_inference_steps - 1).unsqueeze(-1), noise, buf)
        else:
            buf = self._q_sample(self._sample_normalized(cond, noise), torch.randn_like(noise), t)
        return buf, levels

    def reset_rows(self, rows: torch.Tensor | None) -> None:
        """Rows reset by the action queue re-initialise their stream buffer at their next plan."""
        if rows is None:
            self._buffer = self._levels = self._needs_init = None
            self._pending_init = False
        elif self._needs_init is not None:
            self._needs_init[rows.to(self._needs_init.device)] = True
            self._pending_init = True

    def stream_step(self, obs: Mapping[str, Any], init_noise: Any = None) -> torch.Tensor:
        """One streaming call for all rows: (B, Tp, Da) raw chunk whose executed positions are clean.

        The buffer is (re)initialised when missing or when the batch size changed; ``init_noise``
        (B, Tp, Da) fixes that initial noise.
        """
        with torch.no_grad():
            cond = self.encode_obs(obs)
            return self._stream(cond, None, init_noise)

    def plan(self, obs: dict[str, torch.Tensor], rows: torch.Tensor | None) -> torch.Tensor:
        with torch.no_grad():
            return self._stream(self.encode_obs(obs), rows, None)

    def _stream(self, cond: torch.Tensor, rows: torch.Tensor | None, init_noise: Any) -> torch.Tensor:
        n_rows = cond.shape[0]
        full_b = n_rows if rows is None else (-1 if self._buffer is None else self._buffer.shape[0])
        if self._buffer is None or self._buffer.shape[0] != full_b:
            if rows is not None:  # first plan with a subset cannot happen through act(); guard anyway
                raise RuntimeError("SDP buffer missing for a partial-row plan; call reset() first")
            self._buffer, self._levels = self.init_buffer(cond, init_noise)
            self._needs_init = torch.zeros(full_b, dtype=torch.bool, device=cond.device)
            self._pending_init = False
        assert self._levels is not None and self._needs_init is not None
        if self._pending_init:  # some rows were reset: re-initialise those planned now
            idx = torch.arange(full_b, device=cond.device) if rows is None else rows
            redo = self._needs_init[idx]
            if bool(redo.any()):
                nb, nl = self.init_buffer(cond[redo])
                self._buffer[idx[redo]], self._levels[idx[redo]] = nb, nl
                self._needs_init[idx[redo]] = False
            self._pending_init = bool(self._needs_init.any())
        # the level invariant, once per call: every row sits at init_levels between calls (so the rows
        # planned together share one level vector) and the schedule from there was validated at construction
        if not torch.equal(self._levels, self.init_levels.expand_as(self._levels)):
            raise AssertionError(
                f"SDP buffer levels {self._levels[0].tolist()} != init_levels {self.init_levels.tolist()}"
            )
        sched = self._stream_schedule(cond.device)
        buf = self._buffer if rows is None else self._buffer[rows]  # (n, Tp, Da)
        chunk = self._run_schedule(buf, cond, sched)  # a new tensor: the buffer is not modified in place
        self.last_call_levels = sched.final_levels.expand(n_rows, -1)  # (n, Tp) levels at return
        # shift by Ta, drop the partially denoised tail, append fresh noise at level N-1
        ta, to1 = self.config.n_action_steps, self.config.n_obs_steps - 1
        fresh = torch.randn(n_rows, self.config.horizon - self.keep, self.action_dim, device=chunk.device)
        buf = torch.cat([chunk[:, ta : ta + self.keep], fresh], dim=1)
        # re-noise the first To-1 (clean, executed) positions to chunk 0's level -- and keep the result;
        # the levels after the shift equal init_levels (checked at construction), so _levels is unchanged
        if to1 > 0:
            sa, sb = self._renoise_coefs(chunk.device)
            head = buf[:, :to1]
            buf[:, :to1] = sa * head + sb * torch.randn_like(head)
        if rows is None:
            self._buffer = buf
        else:
            self._buffer[rows] = buf
        return self.normalizer.unnormalize("action", chunk)

    def _stream_schedule(self, device: torch.device) -> LevelSchedule:
        """The streaming call's schedule (from ``init_levels``, ``nfe_per_call`` steps) on ``device``, cached."""
        if self._stream_cache is None or self._stream_cache[0] != device:
            self._stream_cache = (device, self.level_schedule(self.init_levels, self.nfe_per_call, device))
        return self._stream_cache[1]

    def _cold_start_coefs(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(a, b), each (1, Tp, 1): a·x + b·noise takes x from chunk 0's start level to every position's start
        level, deterministic in noise. Level N-1 holds the noise itself (a = 0, b = 1, as appended positions
        do); levels in between the forward process from chunk 0's level (a = 1, b = 0 at that level)."""
        if self._cold_start_cache is None or self._cold_start_cache[0] != device:
            start, ratio = self.init_levels.cpu(), self.ddim_table().ratio  # (Tp,)
            ac = self.noise_scheduler.alphas_cumprod
            keep = (ac[start * ratio] / ac[(self.nfe_per_call - 1) * ratio]).clamp(max=1.0)  # (Tp,)
            top = start == self.config.num_inference_steps - 1
            a = torch.where(top, torch.zeros_like(keep), keep.sqrt())
            b = torch.where(top, torch.ones_like(keep), (1 - keep).sqrt())
            self._cold_start_cache = (device, (a.view(1, -1, 1).to(device), b.view(1, -1, 1).to(device)))
        return self._cold_start_cache[1]

    def _renoise_coefs(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """0-d (sqrt(alpha_bar), sqrt(1 - alpha_bar)) at chunk 0's level, as ``_q_sample`` computes them."""
        if self._renoise_cache is None or self._renoise_cache[0] != device:
            t = int(self.init_levels[0]) * self.ddim_table().ratio
            ac = self.noise_scheduler.alphas_cumprod[t]
            self._renoise_cache = (device, (ac.sqrt().to(device), (1 - ac).sqrt().to(device)))
        return self._renoise_cache[1]
