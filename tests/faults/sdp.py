"""Planted faults in the streaming diffusion policy (``policies/streaming.py``); ``run.py -k sdp``."""

SDP = "policies/streaming.py"
T_SDP = "tests/policies/test_streaming_targets.py"
T_SDP_OLD = "tests/policies/test_streaming_policy.py"


def _f(name: str, old: str, new: str, *tests: str) -> dict:
    return {"name": name, "file": SDP, "old": old, "new": new, "tests": list(tests) or [T_SDP]}


FAULTS = [
    _f(
        "sdp: training level k(c) = ⌊N(c+1)/h⌋ − 1 off by one",
        '(n_tr * (self.chunk_index + 1)).div(self.h, rounding_mode="floor") - 1,',
        '(n_tr * (self.chunk_index + 1)).div(self.h, rounding_mode="floor") - 2,',
    ),
    _f(
        "sdp: inference level k(c) = ⌊N(c+1)/h⌋ − 1 off by one",
        '(n_inf * (self.chunk_index + 1)).div(self.h, rounding_mode="floor") - 1,',
        '(n_inf * (self.chunk_index + 1)).div(self.h, rounding_mode="floor") - 2,',
    ),
    _f(
        "sdp: constant-level probability is p_chunkwise (regimes swapped)",
        "use_cw = torch.rand(b, 1, device=device) < self.config.p_chunkwise",
        "use_cw = torch.rand(b, 1, device=device) >= self.config.p_chunkwise",
    ),
    _f(
        "sdp: chunk-wise offset j drawn from {1 .. N/h}",
        "j = torch.randint(0, per, (b, 1), device=device)",
        "j = torch.randint(1, per + 1, (b, 1), device=device)",
    ),
    _f(
        "sdp: loss noises x0 with swapped coefficients",
        "xt = sa * x0 + sb * eps",
        "xt = sb * x0 + sa * eps",
    ),
    _f(
        "sdp: loss noises every position at the first position's level",
        "ac = self.noise_scheduler.alphas_cumprod.to(x0.device)[t].unsqueeze(-1)  # (B, Tp, 1)",
        "ac = self.noise_scheduler.alphas_cumprod.to(x0.device)[t[:, :1]].unsqueeze(-1)  # (B, Tp, 1)",
    ),
    _f(
        "sdp: epsilon target is x0",
        'target = eps if pt == "epsilon" else',
        'target = x0 if pt == "epsilon" else',
    ),
    _f(
        "sdp: v-prediction target sign",
        "else sa * eps - sb * x0",
        "else sb * x0 - sa * eps",
    ),
    _f(
        "sdp: buffer shifted by Ta − 1",
        "buf = torch.cat([chunk[:, ta : ta + self.keep], fresh], dim=1)",
        "buf = torch.cat([chunk[:, ta - 1 : ta - 1 + self.keep], fresh], dim=1)",
    ),
    _f(
        "sdp: appended tail is zeros instead of fresh noise",
        "fresh = torch.randn(n_rows, self.config.horizon - self.keep, self.action_dim, device=chunk.device)",
        "fresh = torch.zeros(n_rows, self.config.horizon - self.keep, self.action_dim, device=chunk.device)",
    ),
    _f(
        "sdp: head re-noised to the last chunk's level",
        "t = int(self.init_levels[0]) * self.ddim_table().ratio",
        "t = int(self.init_levels[-1]) * self.ddim_table().ratio",
    ),
    _f(
        "sdp: re-noised head discarded (the reference's bug)",
        "buf[:, :to1] = sa * head + sb * torch.randn_like(head)",
        "_ = sa * head + sb * torch.randn_like(head)",
        T_SDP,
        T_SDP_OLD,
    ),
]
