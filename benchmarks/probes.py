"""make probes: try robosteer as a careless user and as an attacker would, and count what is handled.

Probe classes (each probe is one input, built from the configs and formats as they are now):
- **bad CLI input**: every typed key of every command given a value of the wrong type, every count given 0
  and −5, every key misspelt, every config group given an unknown option, a bare word, a missing required
  key. Handled: exit 2 with one or two lines ``robosteer-X: error: ...`` (unknown keys: the nearest one).
- **refusals before any work**: each writing command pointed at an output that holds a run, at another folder
  with ``overwrite=true`` and at an interrupted collection; ``device=gpu`` and ``device=cuda`` without a GPU;
  ``logger=wandb`` online without a W&B key. Handled: exit 2 with one line, and the output byte-identical.
- **dataset corruption**: NaN / inf / 1e307 planted in every array of a file, random bytes over its middle,
  truncation, an empty file, a directory, a text file, a missing file. Handled: ``robosteer-dataset
  validate`` exits 2 naming the file, and training's reader refuses it with a DatasetError naming the file.
- **checkpoint corruption**: the committed run fixtures (a policy, DSRL, EXPO, a critic) with 0xff over
  their weights, truncated weights, weights or config.json removed, config.json garbled or of another kind.
  Handled: ``policies.loading.load`` raises CheckpointError naming the file (one line, exit 2 in scripts).
- **wire protocol**: raw messages to a loopback policy server: garbage, wrong types, bad handshakes and
  tokens, malformed / NaN / oversized observations and noise. Handled: an error reply or a close with its
  reason, and the server still healthy and answering a good client afterwards.
- **faults during and between episodes**: three deploy episodes on the in-process fake arm of the runtime's
  tests, with the robot link or the policy failing on its n-th call (observation, command, reset; sample,
  reset) or returning NaN. Handled: no exception escapes, the error says the arm was stopped (a NaN is held,
  never sent), and every episode that executed a step is in the recorded file.
- **load**: 1, 10 and 50 clients of the loopback server, alone and beside a client sending maximum-size
  batches. Handled: every small request answered within deploy's ``policy_timeout_s`` (2 s), none refused.

Writes one row per probe to ``docs/results/probes.jsonl`` and the table to ``docs/probes.md``;
``tests/benchmarks/test_probes.py`` fails when they are stale (the probe set changed) or a probe is not
handled. ``python benchmarks/probes.py --check`` lists the probes without running them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ROWS = ROOT / "docs" / "results" / "probes.jsonl"
TABLE = ROOT / "docs" / "probes.md"
COMMANDS = {  # config -> console script
    "collect": "robosteer-collect",
    "dataset": "robosteer-dataset",
    "train": "robosteer-train",
    "eval": "robosteer-eval",
    "steer": "robosteer-steer",
    "value": "robosteer-value",
    "serve": "robosteer-serve",
    "deploy": "robosteer-deploy",
}
REQUIRED = {"train": ["dataset=d.hdf5"], "steer": ["base=runs/dp"], "value": ["dataset=d.hdf5"],
            "serve": ["checkpoint=runs/dp"], "deploy": ["policy_source=runs/dp"]}  # fmt: skip


@dataclass
class Probe:
    kind: str  # the probe class
    name: str
    run: Callable[[], tuple[bool, str]]  # (handled, what was seen: the message's first line)


# ---------------------------------------------------------------------------------------------- CLI
def _cli(config: str, args: list[str], want: str) -> Callable[[], tuple[bool, str]]:
    def run() -> tuple[bool, str]:
        from robosteer.scripts.cli import check_overrides

        err = io.StringIO()
        code: Any = 0
        with contextlib.redirect_stderr(err):
            try:
                check_overrides(COMMANDS[config], config, args)
            except SystemExit as e:
                code = e.code
        lines = err.getvalue().strip().splitlines()
        seen = lines[0] if lines else f"(no message, exit {code})"
        ok = (
            code == 2
            and 1 <= len(lines) <= 2
            and seen.startswith(f"{COMMANDS[config]}: error:")
            and want in seen
        )
        return ok, seen

    return run


def _leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    from omegaconf import OmegaConf

    for key in node:
        full = f"{prefix}{key}"
        if OmegaConf.is_missing(node, key):
            continue
        value = node[key]
        if OmegaConf.is_dict(value):
            yield from _leaves(value, f"{full}.")
        elif not OmegaConf.is_list(value):
            yield full, value


def cli_probes() -> list[Probe]:
    from robosteer.scripts.cli import IMPLIED_GROUPS, NESTED_GROUPS, POSITIVE, _compose, _defaults

    probes = []
    for config in COMMANDS:
        base = _compose(config, [])
        req = REQUIRED.get(config, [])

        def add(arg: str, want: str, config: str = config, req: list[str] = req) -> None:
            probes.append(Probe("bad CLI input", f"{config} {arg}", _cli(config, [*req, arg], want)))

        for key, default in _leaves(base):
            if key.startswith("hydra."):
                continue
            if isinstance(default, bool):
                add(f"{key}=maybe", "expected true or false")
            elif isinstance(default, int):
                add(f"{key}=abc", "expected an integer")
                if key.rpartition(".")[2] in POSITIVE:
                    for bad in (0, -5):
                        add(f"{key}={bad}", ">= 1")
            elif isinstance(default, float):
                add(f"{key}=fast", "expected a number")
        for key in [k for k in base if k != "hydra"]:
            add(f"{key}x=1", "nearest valid choice")
        for group in sorted(_defaults(config)):
            if group in IMPLIED_GROUPS.get(config, ()):  # follows from another key (base=): never typed
                add(f"{group}=bogus", "not typed")
            elif group in NESTED_GROUPS.get(config, {}):  # exists only in a context (robot=...)
                add(f"{group}=bogus", "is a setting of")
            else:
                add(f"{group}=bogus", "is not known")
        probes.append(
            Probe(
                "bad CLI input",
                f"{config} a bare word",
                _cli(config, [*req, "episodes"], "is not an override"),
            )
        )
        if config in REQUIRED:
            probes.append(
                Probe(
                    "bad CLI input",
                    f"{config} without its required key",
                    _cli(config, [], "missing required key"),
                )
            )
    return probes  # fmt: skip


# ---------------------------------------------------------------------------------------------- refusals
FIXTURE_RUN = ROOT / "tests" / "fixtures" / "runs_fa6b6cd" / "dp"
# the inputs each writing command needs to reach its output check ({data}: a valid dataset, {run}: a train run)
WRITING = {
    "collect": ["task=push-v3"],
    "train": ["dataset={data}"],
    "steer": ["base={run}"],
    "value": ["dataset={data}"],
    "eval": ["checkpoint={run}"],
    "deploy": ["policy_source={run}"],
}
# the commands that run a network somewhere, with the inputs that reach their device check
DEVICE_INPUTS = {
    "train": ["dataset={data}"],
    "steer": ["base={run}"],
    "value": ["dataset={data}"],
    "eval": ["checkpoint={run}"],
    "serve": ["checkpoint={run}"],
}
LOGGING = ("train", "steer", "value")  # the commands that take logger=


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def _refusal(
    config: str, args: list[str], want: str, out: Path | None = None, env: dict[str, str | None] | None = None
) -> Callable[[], tuple[bool, str]]:
    """Handled: the command's one-line refusal (:func:`_cli`) and, when ``out`` holds files, ``out``
    byte-identical afterwards (nothing replaced, nothing added)."""
    check = _cli(config, args, want)

    def run() -> tuple[bool, str]:
        before = _tree(out) if out is not None else None
        saved = {k: os.environ.get(k) for k in env or {}}
        try:
            for k, v in (env or {}).items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
            ok, seen = check()
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        if out is not None and _tree(out) != before:
            return False, f"{out} changed: {seen}"
        return ok, seen

    return run


def refusal_probes(work: Path) -> list[Probe]:
    """Refused before any work, in one line, with nothing written or replaced: an output that holds data (a
    run, another folder, an interrupted collection), a device this machine lacks, W&B online without a key."""
    root = work / "refusals"
    root.mkdir(parents=True, exist_ok=True)
    data = root / "d.hdf5"
    _write_dataset(data)
    probes = []
    kind = "refusals before any work"
    for config, needs in WRITING.items():
        inputs = [a.format(data=data, run=FIXTURE_RUN) for a in needs]
        run_dir = root / f"{config}_run"  # a previous run of the command, with data beside its config
        run_dir.mkdir()
        (run_dir / "config.yaml").write_text("seed: 0\n")
        (run_dir / "demos.hdf5").write_bytes(b"the user's data")
        other = root / f"{config}_other"  # a folder that is no robosteer run
        other.mkdir()
        (other / "notes.txt").write_text("keep me")
        partial = root / f"{config}_partial"  # a collection killed part-way
        partial.mkdir()
        (partial / "demos.hdf5.partial").write_bytes(b"finished episodes")
        for name, out, extra, want in (
            ("an existing run", run_dir, [], "already holds files"),
            ("another folder with overwrite=true", other, ["overwrite=true"], "not a robosteer run"),
            (
                "an interrupted collection with overwrite=true",
                partial,
                ["overwrite=true"],
                "interrupted collection",
            ),
        ):
            args = [*inputs, f"out={out}", *extra]
            probes.append(Probe(kind, f"{config} out= {name}", _refusal(config, args, want, out)))
    for config in DEVICE_INPUTS:
        inputs = [a.format(data=data, run=FIXTURE_RUN) for a in DEVICE_INPUTS[config]]
        out = [] if config == "serve" else [f"out={root / f'{config}_device'}"]  # serve writes no run
        for device, want in (("gpu", "nearest valid choice: 'cuda'"), ("cuda", "no CUDA GPU is usable here")):
            if device == "cuda" and _cuda_here():
                continue
            probes.append(
                Probe(
                    kind,
                    f"{config} device={device}",
                    _refusal(config, [*inputs, f"device={device}", *out], want),
                )
            )
    no_key = {"WANDB_API_KEY": None, "WANDB_MODE": None, "NETRC": str(root / "no.netrc")}
    for config in LOGGING:
        inputs = [a.format(data=data, run=FIXTURE_RUN) for a in WRITING[config]]
        logger = "run.logger=wandb" if config == "steer" else "logger=wandb"
        args = [*inputs, logger, f"out={root / f'{config}_wandb'}"]
        probes.append(
            Probe(
                kind,
                f"{config} {logger} online without a key",
                _refusal(config, args, "no W&B key", env=no_key),
            )
        )
    return probes


def _cuda_here() -> bool:
    from robosteer.scripts.guards import cuda_available

    return cuda_available()


# ---------------------------------------------------------------------------------------------- datasets
def _write_dataset(path: Path) -> None:
    from robosteer.policies.data import DatasetWriter

    rng = np.random.default_rng(0)
    with DatasetWriter(path, {"env_name": "push-v3", "type": 2, "env_kwargs": {"obs": "state"}}) as w:
        for _ in range(2):
            t = 12
            w.add_episode(
                obs={"state": rng.normal(size=(t, 39)).astype(np.float32)},
                actions=rng.uniform(-1, 1, size=(t, 4)).astype(np.float32),
                rewards=rng.uniform(0, 1, size=t).astype(np.float32),
                dones=np.eye(t, dtype=np.float32)[-1],
                states=rng.normal(size=(t, 20)).astype(np.float64),
            )


def _plant(path: Path, key: str, value: float) -> None:
    import h5py

    with h5py.File(path, "r+") as f:
        ds = f[f"data/demo_1/{key}"]
        arr = ds[()]
        arr.reshape(-1)[arr.size // 2] = value
        ds[...] = arr


def _dataset_probe(work: Path, name: str, spoil: Callable[[Path], Path]) -> Callable[[], tuple[bool, str]]:
    def run() -> tuple[bool, str]:
        from omegaconf import OmegaConf

        from robosteer.policies.data import DatasetError, SequenceDataset
        from robosteer.scripts.dataset import run as dataset_run

        good = work / "good.hdf5"
        if not good.exists():
            _write_dataset(good)
        path = work / f"{abs(hash(name))}.hdf5"
        shutil.copy(good, path)
        path = spoil(path)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = dataset_run(OmegaConf.create({"cmd": "validate", "path": str(path), "deep": True}))
        seen = (err.getvalue().strip().splitlines() or [f"(no message, exit {code})"])[0]
        try:
            SequenceDataset([str(path)], obs_keys=["state"], n_obs_steps=2, horizon=8, n_action_steps=4)
            trained = False
        except DatasetError as e:
            trained = path.name in str(e)
        return code == 2 and path.name in seen and trained, seen

    return run


def dataset_probes(work: Path) -> list[Probe]:
    probes = []
    keys = ["obs/state", "next_obs/state", "actions", "rewards", "dones", "states"]
    for key in keys:
        values = (("NaN", np.nan), ("inf", np.inf), ("-inf", -np.inf), ("1e307", 1e307))
        if key == "dones":  # stored as uint8 0/1: the corruptions a byte can hold
            values = (("2", 2.0), ("255", 255.0))
        for label, value in values:
            if label == "1e307" and key != "states":
                continue  # float32 arrays overflow to inf: the inf probe covers them

            def spoil(p: Path, key: str = key, value: float = value) -> Path:
                _plant(p, key, value)
                return p

            probes.append(
                Probe("dataset corruption", f"{label} in {key}", _dataset_probe(work, f"{key}{label}", spoil))
            )
    for frac in (0.3, 0.5, 0.7):

        def garble(p: Path, frac: float = frac) -> Path:
            size = p.stat().st_size
            with p.open("r+b") as f:
                f.seek(int(size * frac))
                f.write(np.random.default_rng(1).bytes(4096))
            return p

        def cut(p: Path, frac: float = frac) -> Path:
            with p.open("r+b") as f:
                f.truncate(int(p.stat().st_size * frac))
            return p

        probes.append(
            Probe(
                "dataset corruption",
                f"4 KB of random bytes at {frac:.0%}",
                _dataset_probe(work, f"garble{frac}", garble),
            )
        )
        probes.append(
            Probe("dataset corruption", f"truncated to {frac:.0%}", _dataset_probe(work, f"cut{frac}", cut))
        )

    def empty(p: Path) -> Path:
        p.write_bytes(b"")
        return p

    def text(p: Path) -> Path:
        p.write_text("episode,action\n1,0.5\n")
        return p

    def directory(p: Path) -> Path:
        p.unlink()
        p.mkdir()
        return p

    def missing(p: Path) -> Path:
        p.unlink()
        return p

    for label, fn in (
        ("an empty file", empty),
        ("a CSV file", text),
        ("a directory", directory),
        ("a missing file", missing),
    ):
        probes.append(Probe("dataset corruption", label, _dataset_probe(work, label, fn)))
    return probes  # fmt: skip


# ---------------------------------------------------------------------------------------------- checkpoints
FIXTURES = ROOT / "tests" / "fixtures" / "runs_fa6b6cd"


def _checkpoint_probe(
    work: Path, run: str, label: str, spoil: Callable[[Path], None]
) -> Callable[[], tuple[bool, str]]:
    def go() -> tuple[bool, str]:
        from robosteer.policies.checkpoint import CheckpointError
        from robosteer.policies.loading import load

        dst = work / f"{run}-{abs(hash(label))}"
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(FIXTURES / run, dst)
        for which in ("best", "latest"):
            if (dst / "checkpoints" / which).is_dir():
                spoil(dst / "checkpoints" / which)
        try:
            load(dst, which="latest")
        except CheckpointError as e:
            first = str(e).splitlines()[0]
            return str(dst) in first and len(str(e).splitlines()) <= 2, first
        except Exception as e:  # anything else escapes the one-line contract
            return False, f"{type(e).__name__}: {e}".splitlines()[0]
        return False, "loaded without complaint"

    return go


def checkpoint_probes(work: Path) -> list[Probe]:
    def weights(d: Path) -> list[Path]:
        return sorted(d.glob("*.safetensors"))

    def ff(d: Path) -> None:
        for w in weights(d):
            with w.open("r+b") as f:
                f.seek(w.stat().st_size // 2)
                f.write(b"\xff" * min(65536, w.stat().st_size // 3))

    def head(d: Path) -> None:
        for w in weights(d):
            with w.open("r+b") as f:
                f.write(b"\x00" * 16)

    def cut(d: Path) -> None:
        for w in weights(d):
            with w.open("r+b") as f:
                f.truncate(w.stat().st_size // 2)

    def drop_weights(d: Path) -> None:
        for w in weights(d):
            w.unlink()

    def drop_config(d: Path) -> None:
        (d / "config.json").unlink()

    def garble_config(d: Path) -> None:
        (d / "config.json").write_text('{"format_version": 1, "kind": ')

    def other_kind(d: Path) -> None:
        cfg = json.loads((d / "config.json").read_text())
        cfg["kind"] = "unknown-kind"
        (d / "config.json").write_text(json.dumps(cfg))

    def drop_modules(d: Path) -> None:
        cfg = json.loads((d / "config.json").read_text())
        cfg.pop("modules", None)
        (d / "config.json").write_text(json.dumps(cfg))

    spoils = {
        "64 KB of 0xff over the weights": ff,
        "the weights' header zeroed": head,
        "weights truncated to half": cut,
        "weights removed": drop_weights,
        "config.json removed": drop_config,
        "config.json cut mid-way": garble_config,
        "config.json of an unknown kind": other_kind,
        "config.json without its module list": drop_modules,
    }
    runs = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
    return [
        Probe("checkpoint corruption", f"{run}: {label}", _checkpoint_probe(work, run, label, fn))
        for run in runs
        for label, fn in spoils.items()
    ]


# ---------------------------------------------------------------------------------------------- wire
class _Server:
    """One loopback policy server (a tiny untrained diffusion policy) for every wire probe."""

    srv: Any = None
    token = "s3cret-token"

    @classmethod
    def get(cls) -> Any:
        if cls.srv is None:
            import torch

            from robosteer.policies import make_policy
            from robosteer.real.server import PolicyBackend, PolicyServer

            torch.manual_seed(0)
            meta = {"obs": {"state": {"shape": [39], "type": "low_dim"}}, "action": {"shape": [4]}}
            stats = {
                k: {"min": np.full(d, -1.0), "max": np.full(d, 1.0), "mean": np.zeros(d), "std": np.ones(d)}
                for k, d in (("state", 39), ("action", 4))
            }
            tiny = {
                "mlp_hidden_dim": 32,
                "mlp_n_blocks": 2,
                "time_embed_dim": 16,
                "horizon": 8,
                "n_action_steps": 4,
            }
            policy = make_policy("diffusion", meta, stats=stats, **tiny).eval()
            policy.task = "push-v3"
            cls.srv = PolicyServer(PolicyBackend(policy), port=0, token=cls.token).start()
        return cls.srv


def _healthy(srv: Any) -> bool:
    from robosteer.real.client import PolicyClient

    if srv.health()["status"] == "stuck":  # "busy" for a moment after a reply is fine
        return False
    with PolicyClient(srv.url, token=_Server.token) as c:
        out = c.sample({"state": np.zeros((1, 2, 39), np.float32)})
        return out.shape == (1, 8, 4) and bool(np.isfinite(out).all())


def _wire_probe(hello: Any, message: Any = None) -> Callable[[], tuple[bool, str]]:
    """Send ``hello`` (raw bytes or a dict), then ``message`` if the handshake passed; expect an error reply
    or a close with a reason, then a healthy server."""

    def run() -> tuple[bool, str]:
        from websockets.sync.client import connect

        from robosteer.real.protocol import decode, encode

        srv = _Server.get()
        seen = "(nothing)"
        with connect(srv.url, close_timeout=1.0, max_size=2**26) as ws:
            ws.send(hello if isinstance(hello, bytes | str) else encode(hello))
            try:
                reply = decode(ws.recv(timeout=10))
            except Exception as e:  # a close frame with its reason is an answer
                reason = getattr(getattr(e, "rcvd", None), "reason", "")
                return bool(reason) and _healthy(srv), f"closed: {reason or e}"
            if message is not None and reply.get("type") == "hello_ok":
                ws.send(message if isinstance(message, bytes | str) else encode(message))
                reply = decode(ws.recv(timeout=30))
            seen = f"{reply.get('type')}: {reply.get('code', '')} {reply.get('message', '')}".strip()
            answered = reply.get("type") == "error" and bool(reply.get("message"))
        return answered and _healthy(srv), seen

    return run


def wire_probes() -> list[Probe]:
    import msgpack

    from robosteer.real.protocol import PROTOCOL_VERSION

    ok_hello = {"type": "hello", "version": PROTOCOL_VERSION, "token": _Server.token}
    good = np.zeros((1, 2, 39), np.float32)
    good_msg = {"type": "sample", "obs": {"state": good}}
    hellos = {
        "random bytes instead of a hello": np.random.default_rng(0).bytes(64),
        "a text frame": "hello?",
        "an empty frame": b"",
        "a msgpack list": msgpack.packb([1, 2, 3]),
        "a hello without a type": msgpack.packb({"version": PROTOCOL_VERSION, "token": _Server.token}),
        "a request before the hello": {"type": "sample", "obs": {"state": good}},
        "an unknown message type": {"type": "shutdown"},
        "a hello of another version": {**ok_hello, "version": PROTOCOL_VERSION + 7},
        "a hello with a string version": {**ok_hello, "version": "one"},
        "a hello without a token": {"type": "hello", "version": PROTOCOL_VERSION},
        "a wrong token": {**ok_hello, "token": "guess"},
        "a non-ASCII token": {**ok_hello, "token": "tökén-∑"},
        "a token of invalid UTF-8": msgpack.packb({**ok_hello, "token": "abc"}).replace(
            b"\xa3abc", b"\xa3\xed\xa0\x80"
        ),
        "a numeric token": {**ok_hello, "token": 1234},
        "a 1 MB token": {**ok_hello, "token": "x" * 2**20},
    }
    msgs = {
        "a second hello": ok_hello,
        "garbage after the hello": np.random.default_rng(1).bytes(256),
        "a sample without obs": {"type": "sample"},
        "obs that is a list": {"type": "sample", "obs": [1, 2]},
        "obs with an unknown key": {"type": "sample", "obs": {"pixels": good}},
        "obs of the wrong width": {"type": "sample", "obs": {"state": np.zeros((1, 2, 38), np.float32)}},
        "obs without a history axis": {"type": "sample", "obs": {"state": np.zeros((1, 39), np.float32)}},
        "obs with a NaN": {"type": "sample", "obs": {"state": np.full((1, 2, 39), np.nan, np.float32)}},
        "obs with an inf": {"type": "sample", "obs": {"state": np.full((1, 2, 39), np.inf, np.float32)}},
        "obs as strings": {"type": "sample", "obs": {"state": [["a"] * 39] * 2}},
        "an empty batch": {"type": "sample", "obs": {"state": np.zeros((0, 2, 39), np.float32)}},
        "a batch over the cap (1025 rows)": {
            "type": "sample",
            "obs": {"state": np.zeros((1025, 2, 39), np.float32)},
        },
        "noise of the wrong shape": {**good_msg, "noise": np.zeros((1, 3, 4), np.float32)},
        "noise with a NaN": {**good_msg, "noise": np.full((1, 8, 4), np.nan, np.float32)},
        "noise for another batch size": {**good_msg, "noise": np.zeros((2, 8, 4), np.float32)},
        "a prefix of the wrong shape": {**good_msg, "prefix": np.zeros((1, 9, 4), np.float32)},
        "act with a history window": {"type": "act", "obs": {"state": good}},
        "act with a NaN": {"type": "act", "obs": {"state": np.full((1, 39), np.nan, np.float32)}},
        "an unknown request": {"type": "train", "steps": 10},
        "a request type that is a number": msgpack.packb({"type": 7}),
        "a request that is a msgpack string": msgpack.packb("sample"),
    }
    probes = [Probe("wire protocol", name, _wire_probe(h)) for name, h in hellos.items()]
    probes += [Probe("wire protocol", name, _wire_probe(ok_hello, m)) for name, m in msgs.items()]
    return probes  # fmt: skip


# ---------------------------------------------------------------------------------------------- episodes
def _real_kit() -> Any:
    """The in-process fake arm and scripted chunk policy the runtime's own tests use (tests/real/conftest.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("real_kit", ROOT / "tests" / "real" / "conftest.py")
    assert spec is not None and spec.loader is not None
    kit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kit)
    return kit


def _episode_probe(work: Path, part: str, method: str, nth: int) -> Callable[[], tuple[bool, str]]:
    """Three deploy episodes with ``part.method`` failing (or returning NaN) on its ``nth`` call."""

    def run() -> tuple[bool, str]:
        from robosteer.policies.data import DatasetWriter, open_dataset
        from robosteer.real.robot import RobotError
        from robosteer.real.runtime import ControlLoop, RuntimeConfig, run_episodes
        from robosteer.real.safety import SafetyConfig, SafetyFilter

        kit = _real_kit()
        calls: Counter = Counter()

        def trip(name: str) -> bool:
            calls[name] += 1
            return part_name == name and calls[name] == nth

        part_name = f"{part}.{method}"

        class Robot(kit.FakeRobot):
            def reset(self, seed: int | None = None) -> Any:
                if trip("robot.reset"):
                    raise RobotError("link lost during reset")
                return super().reset(seed)

            def get_observation(self) -> Any:
                ob = super().get_observation()
                if trip("robot.get_observation"):
                    raise RobotError("link lost")
                if trip("robot.nan_observation"):
                    ob.data["state"][:] = np.nan
                return ob

            def send_action(self, action: np.ndarray, timestamp: float | None = None) -> None:
                if trip("robot.send_action"):
                    raise RobotError("command refused: link lost")
                super().send_action(action, timestamp)

        class Policy(kit.ScriptedChunkPolicy):
            def sample(self, obs: dict[str, np.ndarray], noise: Any = None) -> np.ndarray:
                if trip("policy.sample"):
                    raise ConnectionError("policy server gone")
                out = super().sample(obs, noise)
                return out * np.nan if trip("policy.nan_sample") else out

            def reset(self, env_ids: Any = None) -> None:
                if trip("policy.reset"):
                    raise ConnectionError("policy server gone between episodes")
                super().reset(env_ids)

        robot = Robot(max_steps=15)
        robot.connect()
        policy = Policy(np.array([0.0, 0.0, 0.5, 0.0]))
        safety = SafetyFilter(
            SafetyConfig.from_dict({**robot.safety_defaults(), "hold_after_s": 0.05, "stop_after_s": 0.15}),
            4,
            1 / robot.rate_hz,
        )
        loop = ControlLoop(robot, policy, safety, RuntimeConfig(lead_s=0.0, max_steps=200, mode="sync"))
        path = work / f"episodes-{part}-{method}-{nth}.hdf5"
        try:
            with DatasetWriter(path, env_args={"env_name": "fake"}) as writer:
                result = run_episodes(loop, 3, [0, 1, 2], writer=writer)
        except BaseException as e:  # escaping the deploy contract is not handled
            return False, f"raised {type(e).__name__}: {e}".splitlines()[0]
        finally:
            loop.close()
        with open_dataset(path) as demos:
            recorded = demos.num_episodes
        error = result.get("error") or ""
        # every episode that executed a step is in the file, aborted ones too
        stepped = sum(1 for ep in result["per_episode"] if ep.get("steps", 0) > 0)
        kept = stepped <= recorded <= len(result["per_episode"])
        if method.startswith("nan"):  # survived: the NaN never reached the arm (the fake asserts it)
            ok = kept and ("unsafe command" not in error)
            return ok, error or f"survived: {recorded} episodes recorded, {safety.counts}"
        steps = [ep.get("steps") for ep in result["per_episode"]]
        return (
            kept and "stopped" in error and robot.stops > 0,
            error if kept else f"{recorded} recorded, steps {steps}",
        )

    return run


def episode_probes(work: Path) -> list[Probe]:
    kind = "faults during and between episodes"
    plan = {
        ("robot", "get_observation"): (1, 5, 20, 40),
        ("robot", "send_action"): (1, 5, 20, 40),
        ("robot", "reset"): (1, 2, 3),
        ("policy", "sample"): (1, 3, 8),
        ("policy", "reset"): (1, 2, 3),
        ("policy", "nan_sample"): (1, 3),
        ("robot", "nan_observation"): (2, 10, 30),
    }
    return [
        Probe(kind, f"{part}.{method} fails on call {nth}", _episode_probe(work, part, method, nth))
        for (part, method), nths in plan.items()
        for nth in nths
    ]


# ---------------------------------------------------------------------------------------------- load
def _load_probe(clients: int, hog: bool) -> Callable[[], tuple[bool, str]]:
    """``clients`` clients × 5 small requests, optionally while one client sends maximum-size batches: every
    small request must be answered within deploy's default policy_timeout_s (2 s)."""

    def run() -> tuple[bool, str]:
        import threading
        import time

        from robosteer.real.client import PolicyClient

        srv = _Server.get()
        cap = int(srv.health()["max_batch"])
        stop, worst, failures = threading.Event(), [0.0], []

        def hogger() -> None:
            big = {"state": np.zeros((cap, 2, 39), np.float32)}
            with PolicyClient(srv.url, token=_Server.token, timeout_s=60) as c:
                while not stop.is_set():
                    c.sample(big)

        def small() -> None:
            try:
                with PolicyClient(srv.url, token=_Server.token, timeout_s=10) as c:
                    for _ in range(5):
                        t0 = time.perf_counter()
                        c.sample({"state": np.zeros((1, 2, 39), np.float32)})
                        worst[0] = max(worst[0], time.perf_counter() - t0)
            except Exception as e:
                failures.append(f"{type(e).__name__}: {e}")

        hog_thread = threading.Thread(target=hogger, daemon=True) if hog else None
        if hog_thread is not None:
            hog_thread.start()
            time.sleep(0.3)
        threads = [threading.Thread(target=small) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        stop.set()
        if hog_thread is not None:
            hog_thread.join(60)
        ok = not failures and worst[0] < 2.0 and _healthy(srv)
        return ok, failures[0] if failures else f"slowest small request {1e3 * worst[0]:.0f} ms"

    return run


def load_probes() -> list[Probe]:
    return [
        Probe(
            "load",
            f"{n} clients x 5 requests{' beside max-size batches' if hog else ''}",
            _load_probe(n, hog),
        )
        for n in (1, 10, 50)
        for hog in (False, True)
    ]


# ---------------------------------------------------------------------------------------------- run
def all_probes(work: Path) -> list[Probe]:
    return (
        cli_probes()
        + refusal_probes(work)
        + dataset_probes(work)
        + checkpoint_probes(work)
        + wire_probes()
        + episode_probes(work)
        + load_probes()
    )


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of ``rows``: tried / handled per probe class, then every probe not handled."""
    tried, handled = Counter(r["kind"] for r in rows), Counter(r["kind"] for r in rows if r["handled"])
    lines = ["| probe class | tried | handled |", "|---|---:|---:|"]
    lines += [f"| {k} | {tried[k]} | {handled[k]} |" for k in tried]
    lines.append(f"| **all** | **{sum(tried.values())}** | **{sum(handled.values())}** |")
    missed = [r for r in rows if not r["handled"]]
    if missed:
        lines += ["", "Not handled:", ""] + [f"- {r['kind']}: {r['name']} — {r['seen']}" for r in missed]
    return "\n".join(lines) + "\n"


def page(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    return (
        "# Probes: robosteer tried as a careless user and as an attacker would\n\n"
        "Written by `make probes` (`benchmarks/probes.py`, whose docstring says what each class tries and what\n"
        '"handled" means); one row per probe in `docs/results/probes.jsonl`. `tests/benchmarks/test_probes.py`\n'
        "fails when this page is stale or a probe is not handled.\n\n"
        f"Run at commit {meta['commit']} on {meta['machine']}.\n\n" + table(rows)
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="list the probes, run none")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        probes = all_probes(Path(tmp))
        if args.check:
            for p in probes:
                print(f"{p.kind}: {p.name}")
            return 0
        rows = []
        for i, p in enumerate(probes):
            try:
                ok, seen = p.run()
            except Exception as e:  # a probe that crashes the harness is not handled
                ok, seen = False, f"probe raised {type(e).__name__}: {e}".splitlines()[0]
            rows.append({"kind": p.kind, "name": p.name, "handled": bool(ok), "seen": seen[:200]})
            print(
                f"[{i + 1}/{len(probes)}] {'handled' if ok else 'NOT HANDLED'} {p.kind}: {p.name} — {seen[:120]}",
                flush=True,
            )
        if _Server.srv is not None:
            _Server.srv.stop()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    meta = {"commit": commit, "machine": f"{os.cpu_count()}-core CPU", "command": "make probes"}
    ROWS.write_text("".join(json.dumps({**r, **meta}) + "\n" for r in rows))
    TABLE.write_text(page(rows, meta))
    print(table(rows))
    return 0 if all(r["handled"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
