"""Bit-identity guard for refactors of the run engine: a seeded run of every kind, hashed weight by weight.

Runs, from one small seeded dataset (push-v3, 5 expert episodes): DP, flow and SDP training (500 steps each),
DSRL-NA (2,000 env steps) and EXPO (1,000 env steps) on the DP run, IQL and Cal-QL (500 steps). Every tensor
of every checkpoint each run leaves (latest, ema, best, ...) is hashed by name, so a difference names the
run, the checkpoint, the file and the tensor. ``--record`` writes the hashes with the commit they came
from; ``--compare`` re-runs and prints, per run, identical / differs (first differing tensors). Same machine
kind only: float kernels differ across CPUs.

    python benchmarks/engine_hashes.py --record docs/results/engine_hashes.json   # at the starting commit
    python benchmarks/engine_hashes.py --compare docs/results/engine_hashes.json  # after the change
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from robosteer.scripts.common import provenance, run_module

ROOT = Path(__file__).resolve().parents[1]
TASK = "push-v3"

# (name, module, overrides): {data} is the dataset, {dp} the DP run; every run is seeded (seed=0) and quiet.
RUNS: list[tuple[str, str, list[str]]] = [
    (
        "dp",
        "robosteer.scripts.train",
        ["policy=diffusion", "dataset={data}", "steps=500", "checkpoint_every=250"],
    ),
    (
        "flow",
        "robosteer.scripts.train",
        ["policy=flow", "dataset={data}", "steps=500", "checkpoint_every=250"],
    ),
    (
        "sdp",
        "robosteer.scripts.train",
        ["policy=streaming", "dataset={data}", "steps=500", "checkpoint_every=250"],
    ),
    (
        "dsrl_na",
        "robosteer.scripts.steer",
        # run.reward pinned: its default became "shaped" after the hashes of fa6b6cd were recorded (issue 26)
        [
            "algo=dsrl",
            "variant=na",
            "base={dp}",
            "offline={data}",
            "env_steps=2000",
            "run.warmup_chunks=25",
            "run.reward=sparse",
        ],
    ),
    (
        "expo",
        "robosteer.scripts.steer",
        ["algo=expo", "base={dp}", "offline={data}", "env_steps=1000", "run.warmup_chunks=25"],
    ),
    ("iql", "robosteer.scripts.value", ["algo=iql", "dataset={data}", "steps=500"]),
    ("calql", "robosteer.scripts.value", ["algo=calql", "dataset={data}", "steps=500"]),
]
# Per command: what keeps it quiet and short (no evaluation beyond a 2-episode final one, no progress bars).
QUIET = {
    "robosteer.scripts.train": ["progress=false"],
    "robosteer.scripts.steer": [
        f"task={TASK}",
        "eval_base=false",
        "run.eval_every=0",
        "run.eval_episodes=2",
        "num_envs=2",
        "run.progress=false",
    ],
    "robosteer.scripts.value": [],
}


def tensor_hashes(run_dir: Path) -> dict[str, str]:
    """sha256 of every tensor in every ``*.safetensors`` below ``run_dir``: ``{"<file>:<tensor>": hex}``."""
    from safetensors.numpy import load_file

    out: dict[str, str] = {}
    for f in sorted(run_dir.rglob("*.safetensors")):
        rel = f.relative_to(run_dir).as_posix()
        for name, arr in sorted(load_file(str(f)).items()):
            out[f"{rel}:{name}"] = hashlib.sha256(arr.tobytes() + str(arr.dtype).encode()).hexdigest()[:16]
    return out


def run_all(work: Path, only: list[str] | None = None) -> dict[str, dict[str, str]]:
    """Every run of RUNS in ``work`` (``only``: those, and the DP run they steer); ``{run: tensor_hashes}``."""
    data = work / "demos"
    run_module(
        [
            "robosteer.scripts.collect",
            f"task={TASK}",
            "episodes=5",
            "seed=0",
            "progress=false",
            f"out={data}",
        ],
        work / "collect.log",
        ROOT,
    )
    fill = {"data": str(data / "demos.hdf5"), "dp": str(work / "dp")}
    hashes: dict[str, dict[str, str]] = {}
    wanted = set(only or [r[0] for r in RUNS])
    wanted |= {"dp"} if any("{dp}" in o for r in RUNS if r[0] in wanted for o in r[2]) else set()
    for name, module, overrides in (r for r in RUNS if r[0] in wanted):
        t0 = time.time()
        args = [o.format(**fill) for o in overrides] + ["seed=0", f"out={work / name}", *QUIET[module]]
        run_module([module, *args], work / f"{name}.log", ROOT)
        hashes[name] = tensor_hashes(work / name)
        print(f"{name:8s} {len(hashes[name]):4d} tensors  {time.time() - t0:6.1f} s", flush=True)
    return hashes


def compare(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]) -> bool:
    """Print one line per run; True when every run's tensors are identical."""
    same_all = True
    print("\n| run | tensors | result |\n|---|---:|---|")
    for run in (r for r in before if r in after):  # a run left out with --only is not compared
        a, b = before[run], after[run]
        diff = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        same_all &= not diff
        result = "identical"
        if diff:  # per checkpoint: how many of its tensors differ, then the first few names
            where = sorted({k.split(":")[0].rsplit("/", 1)[0] for k in a.keys() | b.keys()})
            counts = [
                f"{d}: {sum(k.startswith(d + '/') for k in diff)} of {sum(k.startswith(d + '/') for k in a)}"
                for d in where
            ]
            result = f"differs ({'; '.join(counts)}; first: {', '.join(diff[:3])})"
        print(f"| {run} | {len(a)} | {result} |")
    return same_all


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path, help="write the hashes of this commit's runs to this JSON file")
    mode.add_argument("--compare", type=Path, help="re-run and compare with hashes recorded by --record")
    parser.add_argument("--work", type=Path, default=None, help="run directory (default: a temporary one)")
    parser.add_argument(
        "--only", nargs="+", choices=[r[0] for r in RUNS], help="these runs (+ the DP they steer)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="engine_hashes_") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        hashes = run_all(work, args.only)
    if args.record:
        record: dict[str, Any] = {"provenance": provenance(" ".join(sys.argv)), "runs": hashes}
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"wrote {args.record}")
        return 0
    recorded = json.loads(args.compare.read_text())
    print(f"recorded at {recorded['provenance'].get('commit')}, compared at {provenance('')['commit']}")
    return 0 if compare(recorded["runs"], hashes) else 1


if __name__ == "__main__":
    sys.exit(main())
