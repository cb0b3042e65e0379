"""Policy server under load: many small clients, alone and beside one client sending maximum-size batches.

Why: a deploy client gives up on a chunk after ``policy_timeout_s`` (2 s) and stops the arm, so a shared
server is only usable if one client's large batch cannot hold everyone else's small requests past that.
Cells: the bare in-process ``backend.sample`` at batch 1 (the floor); ``--clients`` clients each sending
``--requests`` one-row ``sample`` requests, alone; the same while one more client sends batches of the
server's ``max_batch`` rows back to back. Each cell prints p50 / p99 / max round trip and how many requests
took longer than ``--policy-timeout-s``; the loaded cell also the big batches served and what ``/healthz``
said meanwhile.

Run: ``python benchmarks/server_load.py [--checkpoint runs/real_dp_h32_15k] [--clients 50] [--requests 10]``.
The server runs as ``robosteer-serve`` in its own process on 127.0.0.1 (port 0); every count is bounded.
Prints a table and appends one row per cell, with its provenance (command, commit, machine, load), to
``--rows``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def start_server(checkpoint: str, max_batch: int, slice_rows: int, out: str) -> tuple[subprocess.Popen, str]:
    """robosteer-serve in its own process (so client threads here do not share its interpreter)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "robosteer.scripts.serve", f"checkpoint={checkpoint}", "port=0", f"out={out}",
         f"max_batch={max_batch}", f"slice_rows={slice_rows}", "threads=1"],
        cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    deadline = time.time() + 120
    assert proc.stdout is not None
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        found = re.search(r"on (ws://127\.0\.0\.1:\d+)", line)
        if found:
            return proc, found.group(1)
    proc.kill()
    raise SystemExit("server_load: robosteer-serve did not start within 120 s")


def healthz(port: int) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/healthz")
    return json.loads(conn.getresponse().read())


def small_clients(
    url: str, clients: int, requests: int, obs_dim: int, to: int, timeout_s: float
) -> tuple[list[float], list[str]]:
    """``clients`` threads, each with its own connection, sending ``requests`` one-row requests at once."""
    from robosteer.real.client import PolicyClient

    rtts: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def run(i: int) -> None:
        rng = np.random.default_rng(i)
        try:
            with PolicyClient(url, timeout_s=timeout_s) as client:
                client.sample({"state": rng.normal(size=(1, to, obs_dim)).astype(np.float32)})  # warm-up
                barrier.wait(120)
                for _ in range(requests):
                    w = {"state": rng.normal(size=(1, to, obs_dim)).astype(np.float32)}
                    t0 = time.perf_counter()
                    client.sample(w)
                    with lock:
                        rtts.append(1e3 * (time.perf_counter() - t0))
        except Exception as e:  # reported in the table, not fatal: a timeout is a finding
            with lock:
                errors.append(f"client {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    return rtts, errors


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="runs/real_dp_h32_15k", help="run directory to serve")
    ap.add_argument("--clients", type=int, default=50, help="small clients (<= 200)")
    ap.add_argument("--requests", type=int, default=10, help="one-row requests per small client (<= 100)")
    ap.add_argument("--floor-requests", type=int, default=100, help="bare in-process calls (<= 1000)")
    ap.add_argument(
        "--max-batch", type=int, default=1024, help="the server's max_batch (the big batches' rows)"
    )
    ap.add_argument("--slice-rows", type=int, default=64, help="the server's slice_rows")
    ap.add_argument("--policy-timeout-s", type=float, default=2.0, help="deploy's policy_timeout_s")
    ap.add_argument("--rows", default="docs/results/server_load.jsonl", help="append rows here ('': don't)")
    args = ap.parse_args()
    clients, requests = min(args.clients, 200), min(args.requests, 100)
    command = ["python", "benchmarks/server_load.py", *sys.argv[1:]]

    import torch

    torch.set_num_threads(1)
    from robosteer.real.client import PolicyClient
    from robosteer.real.server import load_backend
    from robosteer.scripts.common import provenance

    ckpt = Path(args.checkpoint)
    ckpt = ckpt if ckpt.is_absolute() else ROOT / ckpt
    backend = load_backend(ckpt)
    to = backend.n_obs_steps
    obs_dim = int(backend.shape_meta["obs"]["state"]["shape"][0])
    rng = np.random.default_rng(0)
    floor = []
    for i in range(min(args.floor_requests, 1000) + 5):
        w = {"state": rng.normal(size=(1, to, obs_dim)).astype(np.float32)}
        t0 = time.perf_counter()
        backend.sample(w)
        if i >= 5:  # warm-up
            floor.append(1e3 * (time.perf_counter() - t0))

    cells: list[dict[str, Any]] = [
        {"cell": "floor: bare backend.sample, batch 1", "rtts": floor, "errors": [], "clients": 1}
    ]
    with tempfile.TemporaryDirectory(prefix="server_load_") as tmp:
        proc, url = start_server(str(ckpt), args.max_batch, args.slice_rows, tmp)
        port = int(url.rsplit(":", 1)[1])
        try:
            rtts, errors = small_clients(url, clients, requests, obs_dim, to, timeout_s=60.0)
            cells.append({"cell": "small clients alone", "rtts": rtts, "errors": errors, "clients": clients})

            stop = threading.Event()
            heavy: list[float] = []
            heavy_errors: list[str] = []
            statuses: dict[str, int] = {}
            worst_wait = [0.0]

            def big_batches() -> None:
                big = {"state": rng.normal(size=(args.max_batch, to, obs_dim)).astype(np.float32)}
                try:
                    with PolicyClient(url, timeout_s=300.0) as client:
                        while not stop.is_set():
                            t0 = time.perf_counter()
                            client.sample(big)
                            heavy.append(1e3 * (time.perf_counter() - t0))
                except Exception as e:
                    heavy_errors.append(f"{type(e).__name__}: {e}")

            def watch_health() -> None:
                while not stop.is_set():
                    h = healthz(port)
                    statuses[h["status"]] = statuses.get(h["status"], 0) + 1
                    worst_wait[0] = max(worst_wait[0], float(h["oldest_wait_s"]))
                    stop.wait(0.25)

            threads = [threading.Thread(target=f, daemon=True) for f in (big_batches, watch_health)]
            threads[0].start()
            deadline = time.time() + 60
            while healthz(port)["running_s"] is None and time.time() < deadline:
                time.sleep(0.01)  # until the first big batch is being computed
            threads[1].start()
            rtts, errors = small_clients(url, clients, requests, obs_dim, to, timeout_s=60.0)
            stop.set()
            for t in threads:
                t.join(300)
            cells.append(
                {
                    "cell": f"small clients beside {args.max_batch}-row batches",
                    "rtts": rtts,
                    "errors": errors + heavy_errors,
                    "clients": clients,
                    "heavy_batches": len(heavy),
                    "heavy_p50_ms": pct(heavy, 50),
                    "healthz": statuses,
                    "healthz_oldest_wait_s": worst_wait[0],
                }
            )
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    limit_ms = 1e3 * args.policy_timeout_s
    print(
        f"checkpoint: {args.checkpoint}  clients: {clients} x {requests} one-row requests  max_batch: "
        f"{args.max_batch}  slice_rows: {args.slice_rows}  load average: {os.getloadavg()[0]:.2f}"
    )
    print(
        f"| cell | p50 ms | p99 ms | max ms | > {args.policy_timeout_s:g} s | big batches (p50 ms) | /healthz |"
    )
    print("|---|---|---|---|---|---|---|")
    for c in cells:
        xs = c["rtts"]
        over = sum(x > limit_ms for x in xs) + len(c["errors"])
        heavy_txt = f"{c['heavy_batches']} ({c['heavy_p50_ms']:.0f})" if "heavy_batches" in c else ""
        health_txt = json.dumps(c.get("healthz", "")).strip('"') if "healthz" in c else ""
        print(
            f"| {c['cell']} | {pct(xs, 50):.1f} | {pct(xs, 99):.1f} | {max(xs, default=float('nan')):.1f} | "
            f"{over} | {heavy_txt} | {health_txt} |"
        )
        for err in c["errors"][:3]:
            print(f"  error: {err}")
        if args.rows:
            row = {
                "cell": c["cell"],
                "clients": c["clients"],
                "requests": len(xs),
                "p50_ms": pct(xs, 50),
                "p99_ms": pct(xs, 99),
                "max_ms": max(xs, default=None),
                "over_timeout": over,
                "policy_timeout_s": args.policy_timeout_s,
                "errors": len(c["errors"]),
                "max_batch": args.max_batch,
                "slice_rows": args.slice_rows,
                "checkpoint": args.checkpoint,
                **{
                    k: c[k]
                    for k in ("heavy_batches", "heavy_p50_ms", "healthz", "healthz_oldest_wait_s")
                    if k in c
                },
                **provenance(command, ROOT),
            }
            path = Path(args.rows) if Path(args.rows).is_absolute() else ROOT / args.rows
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
