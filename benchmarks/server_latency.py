"""Policy-server round trip on loopback vs bare policy inference (the floor), batch 1, p50/p99.

Why: a remote policy is only usable in a control loop if the server adds little on top of inference. The
floor is ``policy.sample(window)`` called in-process; the server path adds msgpack encoding, the websocket,
validation and a thread hop. Both are measured interleaved (request i of each path back to back) so machine
load hits them alike; the server's own ``infer_ms`` splits the round trip into compute and transport.

Run: ``python benchmarks/server_latency.py [--checkpoint runs/real_dp] [--requests 300]``. Prints a table and
appends one row per path (with its provenance: command, commit, machine, load) to ``--rows``.
The server binds 127.0.0.1 only; the number of requests is bounded.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch
from results_tables import append_row

ROOT = Path(__file__).resolve().parents[1]


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "runs" / "real_dp"), help="run directory to serve")
    ap.add_argument("--requests", type=int, default=300, help="requests per path (bounded, <= 5000)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument(
        "--rows", default="docs/results/server_latency.jsonl", help="append rows here ('': don't)"
    )
    args = ap.parse_args()
    requests = min(int(args.requests), 5000)
    torch.set_num_threads(1)

    from robosteer.real.client import PolicyClient
    from robosteer.real.server import PolicyServer, load_backend

    backend = load_backend(args.checkpoint)
    rng = np.random.default_rng(0)
    dim = int(backend.shape_meta["obs"]["state"]["shape"][0])
    windows = [
        {"state": rng.normal(size=(1, backend.n_obs_steps, dim)).astype(np.float32)} for _ in range(requests)
    ]
    bare, rtt, server_ms, infer_ms = [], [], [], []
    with (
        PolicyServer(backend, host="127.0.0.1", port=0) as srv,
        PolicyClient(srv.url, timeout_s=10.0) as client,
    ):
        for w in windows[: args.warmup]:
            backend.sample(w)
            client.sample(w)
        for w in windows:
            t0 = time.perf_counter()
            backend.sample(w)
            bare.append(1e3 * (time.perf_counter() - t0))
            client.sample(w)
            rtt.append(client.last_timing["round_trip_ms"])
            server_ms.append(client.last_timing["server_ms"])
            infer_ms.append(client.last_timing["infer_ms"])
    rows = [
        ("bare policy.sample (floor)", bare),
        ("server: inference (infer_ms)", infer_ms),
        ("server: total in server (server_ms)", server_ms),
        ("client round trip (loopback)", rtt),
    ]
    print(f"checkpoint: {args.checkpoint}  requests: {requests}  load average: {os.getloadavg()[0]:.2f}")
    print("| path | p50 ms | p99 ms | min ms |")
    print("|---|---|---|---|")
    ckpt = Path(args.checkpoint).resolve()
    for name, xs in rows:
        print(f"| {name} | {pct(xs, 50):.2f} | {pct(xs, 99):.2f} | {min(xs):.2f} |")
        if args.rows:
            append_row(
                args.rows,
                {
                    "path": name,
                    "p50_ms": pct(xs, 50),
                    "p99_ms": pct(xs, 99),
                    "min_ms": min(xs),
                    "requests": requests,
                    "checkpoint": str(ckpt.relative_to(ROOT) if ckpt.is_relative_to(ROOT) else ckpt),
                },
            )
    print(
        f"\noverhead of the server path (p50 round trip - p50 floor): {pct(rtt, 50) - pct(bare, 50):.2f} ms"
    )


if __name__ == "__main__":
    main()
