"""Where one EXPO transition's time goes, beside its floor: the base decode every on-the-fly TD target needs.

Why: EXPO's on-the-fly (OTF) backup decodes N base samples for every next state of every critic minibatch,
so a CPU run is bound by base decodes, not by the critics. This prints, per piece, the milliseconds of one
call on the chosen device, interleaved so machine load hits all alike:

- ``base decode B·N`` (the floor: the bare ``base.sample`` on B·N next states that any OTF target pays);
- OTF scoring of the B·(N + M) candidates by the target ensemble, with every head computed and reduced
  afterwards (``reduce(forward(...), "min", subset)``) and with only the drawn heads computed
  (``subset_min``, RLPD's ``subsample_ensemble``; what EXPO uses);
- ``update_critic`` (OTF target + TD step), ``update_base`` (one imitation step), ``update_actor`` (edit + α),
  ``explore`` (one env's action);
- the same critic step with ``expo.backup_base=bank`` (the N samples at s' stored with the transition, so
  the step decodes nothing) and what storing them costs per transition (one env's N-sample decode);
- the per-transition total at the config's UTD, with and without the bank, and the env steps/s each allows
  (E = Ta env steps per MDP action with ``expo.action=chunk``), leaving out the simulator itself.

Random weights: a Meta-World-sized DP (39-d state, 4-d action, the steering benchmarks' MLP backbone); costs do
not depend on training. ``python experiments/expo_update_cost.py [--utd 2] [--samples 4] [--edits 4]
[--batch 128] [--device cpu] [--reps 10]``. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

from robosteer.policies import make_policy
from robosteer.policies.steering.expo import EXPO, EXPOConfig

STATE_DIM, ACTION_DIM = 39, 4  # Meta-World v3


def _base(device: torch.device) -> torch.nn.Module:
    shape_meta = {
        "obs": {"state": {"shape": [STATE_DIM], "type": "low_dim"}},
        "action": {"shape": [ACTION_DIM]},
    }
    ones = np.ones
    stats = {
        "state": {"min": -ones(STATE_DIM), "max": ones(STATE_DIM)},
        "action": {"min": -ones(ACTION_DIM), "max": ones(ACTION_DIM)},
    }
    return make_policy("diffusion", shape_meta, stats, backbone="mlp").to(device).eval()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--utd", type=float, default=2.0, help="critic updates per transition")
    parser.add_argument("--samples", type=int, default=4, help="N base samples")
    parser.add_argument("--edits", type=int, default=4, help="M edited samples")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    base = _base(device)
    to = base.config.n_obs_steps
    horizon, ta = base.config.horizon, base.config.n_action_steps
    bc = {
        "obs/state": torch.randn(1024, to, STATE_DIM),
        "action": torch.rand(1024, horizon, ACTION_DIM) * 2 - 1,
    }
    cfg = EXPOConfig(num_samples=args.samples, num_edits=args.edits, batch_size=args.batch)
    agent = EXPO(base, to * STATE_DIM, cfg, ("state",), bc, device=device)
    b, d = args.batch, agent.action_dim
    banked = EXPO(
        base, to * STATE_DIM, dataclasses.replace(cfg, backup_base="bank"), ("state",), device=device
    )

    def obs(n: int) -> dict[str, torch.Tensor]:
        return {"state": torch.randn(n, to, STATE_DIM, device=device)}

    batch = {
        "obs": obs(b),
        "next_obs": obs(b),
        "taken": torch.rand(b, d, device=device) * 2 - 1,
        "reward": torch.zeros(b, device=device),
        "done": torch.zeros(b, device=device),
    }
    batch_banked = {**batch, "next_base": torch.rand(b, args.samples, d, device=device) * 2 - 1}  # (B, N, d)
    g = torch.Generator(device=device).manual_seed(0)
    decode_obs = obs(b * args.samples)
    c = args.samples + args.edits
    feats = agent.features(obs(b)).repeat_interleave(c, dim=0)  # (B·C, S)
    cands = torch.rand(b * c, d, device=device) * 2 - 1  # (B·C, d)
    target = agent.critic_target
    pieces: dict[str, Callable[[], object]] = {
        f"base decode B·N = {b * args.samples} (floor)": lambda: base.sample(decode_obs),
        f"OTF scoring of B·(N+M) = {b * c}, all {cfg.num_critics} heads": lambda: target.reduce(
            target(feats, cands), "min", subset=cfg.num_min_qs, generator=g
        ),
        f"OTF scoring, only the {cfg.num_min_qs} drawn heads (used)": lambda: target.subset_min(
            feats, cands, cfg.num_min_qs, g
        ),
        "update_critic (OTF target + TD step)": lambda: agent.update_critic(batch, g),
        "update_critic, banked samples (backup_base=bank)": lambda: banked.update_critic(batch_banked, g),
        "bank one transition's N samples at s' (1 env)": lambda: banked.transition_extras(obs(1), g),
        "update_base (one imitation step)": lambda: agent.update_base(g),
        "update_actor (edit + α)": lambda: agent.update_actor(batch, g),
        "explore (1 env)": lambda: agent.explore(obs(1), g),
    }
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times: dict[str, list[float]] = {k: [] for k in pieces}
    for fn in pieces.values():  # warm-up
        fn()
    for _ in range(args.reps):
        for name, fn in pieces.items():
            sync()
            start = time.perf_counter()
            fn()
            sync()
            times[name].append((time.perf_counter() - start) * 1e3)
    ms = {k: statistics.median(v) for k, v in times.items()}
    rest = ms["update_base (one imitation step)"] + ms["update_actor (edit + α)"] + ms["explore (1 env)"]
    per = args.utd * ms["update_critic (OTF target + TD step)"] + rest
    per_bank = (
        args.utd * ms["update_critic, banked samples (backup_base=bank)"]
        + ms["bank one transition's N samples at s' (1 env)"]
        + rest
    )
    print(
        f"EXPO cost per piece, median of {args.reps} (ms); {device.type}, {args.threads} thread(s), "
        f"{platform.processor() or platform.machine()}, load average {os.getloadavg()[0]:.1f}; "
        f"N = {args.samples}, M = {args.edits}, batch {b}, d = {d} (chunk of Ta = {ta})"
    )
    print("| piece | ms |")
    print("|---|---|")
    for name, value in ms.items():
        print(f"| {name} | {value:.1f} |")
    print(f"| per transition at UTD {args.utd:g} (no simulator) | {per:.1f} |")
    print(f"| env steps/s it allows (Ta = {ta} per transition) | {ta * 1e3 / per:.1f} |")
    print(f"| per transition at UTD {args.utd:g} with the bank (no simulator) | {per_bank:.1f} |")
    print(f"| env steps/s it allows with the bank | {ta * 1e3 / per_bank:.1f} |")


if __name__ == "__main__":
    main()
