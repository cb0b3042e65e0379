"""Serve any checkpoint (a robosteer-train run, or a steering run such as DSRL) over websockets + msgpack.

Modelled on openpi's policy server: one websocket per client, a version handshake first, then
request/reply messages (``sample``, ``act``, ``reset``, ``ping``); ``GET /healthz`` answers plain HTTP.
Every reply carries ``timing`` (decode, inference and total server milliseconds) so a client can split
round-trip latency into network and compute. Safety of the server itself: it binds 127.0.0.1 unless told
otherwise, requires a shared token whenever it binds anywhere else, caps message size (websockets'
``max_size``), validates every array against the policy's ``shape_meta`` before inference, and answers a
bad request with an ``error`` message instead of crashing. Inference runs in one worker thread, so the event
loop keeps answering ``/healthz`` and pings during a slow forward pass.

Many clients share that worker, so no client may hold it for long: a batch is capped at ``max_batch`` rows
(larger ones are refused with ``too_large``), and a ``sample`` batch runs as slices of at most
``slice_rows`` rows, the connections taking turns one slice at a time (:class:`FairWorker`); a small request
then waits for at most one slice per other busy client, not for another client's whole batch. ``act`` and
``reset`` keep their state per connection (a fork of the policy sharing its weights), so one client's
``reset`` never clears another's action queue. ``GET /healthz`` reports the worker: ``ok`` (idle), ``busy``
(running or queued work) or ``stuck`` (one slice running for ``stuck_after_s`` or more: HTTP 503).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hmac
import ipaddress
import itertools
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

import numpy as np

from robosteer.real.protocol import (
    MAX_MESSAGE_BYTES,
    POLICY_REQUESTS,
    PROTOCOL_VERSION,
    PROTOCOLS,
    ProtocolError,
    check_hello,
    check_obs,
    decode,
    encode,
    error_message,
    obs_specs,
)

log = logging.getLogger(__name__)

MAX_BATCH = 1024  # default cap on the rows of one request
SLICE_ROWS = 64  # default rows of one scheduling slice of a ``sample`` batch


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (127.0.0.0/8, ::1 or 'localhost')."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class PolicyBackend:
    """The policy contract (``sample``, ``act``, ``reset``) over numpy, for a plain or a steered policy.

    Why: a steered policy (a ``ChunkPolicy``: DSRL's ``SteeredPolicy``, EXPO's ``OTFPolicy``) picks its own
    noise and takes no prefix; this adapter gives the server one surface for both, and its metadata is what
    the handshake announces (shape_meta, noise_shape, To/Tp/Ta).
    """

    def __init__(self, policy: Any, name: str = "policy") -> None:
        import torch

        from robosteer.policies.acting import ChunkPolicy

        self.policy = policy
        self.name = name
        self._torch = torch
        self._steered = isinstance(policy, ChunkPolicy)
        base = policy.base if self._steered else policy
        self.base = base
        self.shape_meta: dict[str, Any] = dict(base.shape_meta)
        self.specs = obs_specs(self.shape_meta)
        cfg = base.config
        self.n_obs_steps = int(cfg.n_obs_steps)
        self.horizon = int(cfg.horizon)
        self.n_action_steps = int(cfg.n_action_steps)
        self.noise_shape = tuple(int(d) for d in base.noise_shape)
        self.task = getattr(policy, "task", None)
        # a steered policy picks its own noise and ignores a prefix; a plain diffusion/flow policy can take one
        self.supports_prefix = bool(getattr(base, "supports_prefix", False)) and not self._steered

    def metadata(self) -> dict[str, Any]:
        """What the handshake tells a client about this policy."""
        return {
            "name": self.name,
            "task": self.task,
            "steered": self._steered,
            "shape_meta": self.shape_meta,
            "noise_shape": list(self.noise_shape),
            "n_obs_steps": self.n_obs_steps,
            "horizon": self.horizon,
            "n_action_steps": self.n_action_steps,
            "action_dim": int(self.noise_shape[1]),
            "supports_prefix": self.supports_prefix,
        }

    def sample(
        self,
        obs: Mapping[str, np.ndarray],
        noise: np.ndarray | None = None,
        prefix: np.ndarray | None = None,
    ) -> np.ndarray:
        """(B, To, ...) obs window -> (B, Tp, Da) float32 actions; deterministic given ``noise``; ``prefix``
        (B, P, Da): the chunk's known first actions (``supports_prefix`` policies only)."""
        torch = self._torch
        with torch.no_grad():
            if self._steered and noise is None:
                t = {k: torch.as_tensor(v) for k, v in obs.items()}
                out = self.policy.sample(t)  # the actor picks the noise
            elif prefix is not None:
                out = self.base.sample(dict(obs), noise=noise, prefix=prefix)
            else:
                out = self.base.sample(dict(obs), noise=noise)
        return np.asarray(out.detach().cpu().numpy() if hasattr(out, "detach") else out, dtype=np.float32)

    def act(self, obs: Mapping[str, np.ndarray], policy: Any = None) -> np.ndarray:
        """(B, ...) single-step obs -> (B, Da) next action from the queue of ``policy`` (a :meth:`fork`;
        None: the shared policy's own queue)."""
        with self._torch.no_grad():
            out = (self.policy if policy is None else policy).act(dict(obs))
        return np.asarray(out, dtype=np.float32)

    def reset(self) -> None:
        self.policy.reset()

    def fork(self) -> Any:
        """A copy of the policy that shares its weights but has its own ``act``/``reset`` state (history,
        action queue, SDP buffer), so each connection acts and resets on its own."""
        clone = _fork(self.policy)
        clone.reset()
        return clone


def _fork(obj: Any) -> Any:
    """Shallow copy of a policy with a fresh action queue: the weights are shared, the act state (history,
    queue, and the planner's own state such as SDP's buffer when the policy plans for itself) is not."""
    import torch

    from robosteer.policies.acting import ActionQueue

    clone = copy.copy(obj)
    if isinstance(obj, torch.nn.Module):  # their own registries, so an assignment on the copy stays there
        for name in ("_modules", "_parameters", "_buffers"):
            object.__setattr__(clone, name, type(getattr(obj, name))(getattr(obj, name)))
    queue = getattr(obj, "acting", None)
    if isinstance(queue, ActionQueue):
        clone.acting = queue.fork(clone if queue.planner is obj else queue.planner)
    return clone


@dataclass
class _Job:
    fn: Callable[[], Any] | None = None  # runs alone, or
    payload: Any = None  # is one part of a call shared with jobs of the same group (FairWorker.merge)
    group: Any = None
    rows: int = 0
    future: Future = field(default_factory=Future)
    enqueued: float = field(default_factory=time.monotonic)


def _settle(job: _Job, result: Any) -> None:
    if isinstance(result, BaseException):
        job.future.set_exception(result)
    else:
        job.future.set_result(result)


class FairWorker:
    """One inference thread shared by all connections, which take turns one job at a time.

    Why: a single worker keeps inference serial (one model, no lock contention), but a first-come queue lets
    one client's long batch delay everyone; round robin over connections bounds a small request's wait by
    one job per other busy connection. Jobs are kept short by the caller (batches split into slices of at
    most ``max_rows``). Row jobs of one ``group`` at the head of different connections' queues run as one
    call of ``merge`` (at most ``max_rows`` rows in all): fifty one-row clients then cost one batched
    forward pass, not fifty in a row.
    """

    def __init__(
        self,
        merge: Callable[[list[Any]], list[Any]] | None = None,
        max_rows: int = SLICE_ROWS,
        name: str = "policy-infer",
    ) -> None:
        self._merge = merge
        self.max_rows = int(max_rows)
        self._cond = threading.Condition()
        self._queues: dict[Any, deque[_Job]] = {}
        self._turns: deque[Any] = deque()  # keys with queued jobs, in turn order
        self._closed = False
        self.running_since: float | None = None  # monotonic start of the running call
        self.jobs_done = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _put(self, key: Any, job: _Job) -> Future:
        with self._cond:
            if self._closed:
                raise RuntimeError("the inference worker is shut down")
            q = self._queues.setdefault(key, deque())
            if not q:
                self._turns.append(key)
            q.append(job)
            self._cond.notify()
        return job.future

    def submit(self, key: Any, fn: Callable[[], Any]) -> Future:
        """Queue ``fn`` for connection ``key``; its result (or exception) arrives in the returned future."""
        return self._put(key, _Job(fn=fn))

    def submit_rows(self, key: Any, payload: Any, group: Any, rows: int) -> Future:
        """Queue ``rows`` rows for ``merge`` (possibly together with other connections' rows of ``group``);
        the future gets this payload's entry of merge's result."""
        return self._put(key, _Job(payload=payload, group=group, rows=int(rows)))

    def cancel(self, key: Any) -> None:
        """Drop the queued (not the running) jobs of ``key``: a client that went away."""
        with self._cond:
            for job in self._queues.pop(key, ()):
                job.future.cancel()
            if key in self._turns:
                self._turns.remove(key)

    def _pop(self, key: Any) -> _Job:
        """The head job of ``key`` (already out of the turn order); the key's next job goes to the back."""
        q = self._queues[key]
        job = q.popleft()
        if q:
            self._turns.append(key)  # its next job waits for every other connection's turn
        else:
            del self._queues[key]
        return job

    def _next(self) -> list[_Job] | None:
        with self._cond:
            while not self._turns and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            first = self._pop(self._turns.popleft())
            jobs, rows = [first], first.rows
            if first.fn is None and self._merge is not None:
                for key in list(self._turns):  # the other connections' head jobs, in turn order
                    head = self._queues[key][0]
                    if head.fn is None and head.group == first.group and rows + head.rows <= self.max_rows:
                        self._turns.remove(key)
                        jobs.append(self._pop(key))
                        rows += head.rows
            self.running_since = time.monotonic()
            return jobs

    def _execute(self, jobs: list[_Job]) -> None:
        live = [j for j in jobs if j.future.set_running_or_notify_cancel()]
        if not live:
            return
        if live[0].fn is not None:
            try:
                live[0].future.set_result(live[0].fn())
            except BaseException as e:
                live[0].future.set_exception(e)
            return
        assert self._merge is not None
        try:
            results = self._merge([j.payload for j in live])
        except BaseException as e:
            if len(live) == 1:
                live[0].future.set_exception(e)
                return
            results = []
            for j in live:  # one bad part spoiled the shared call: run each alone, so errors land where due
                try:
                    results.append(self._merge([j.payload])[0])
                except BaseException as e1:
                    results.append(e1)
        for job, result in zip(live, results):
            _settle(job, result)

    def _run(self) -> None:
        while (jobs := self._next()) is not None:
            try:
                self._execute(jobs)
            finally:
                with self._cond:
                    self.running_since = None
                    self.jobs_done += len(jobs)

    def status(self) -> dict[str, Any]:
        """What ``/healthz`` reports: the running call's age, queued jobs and the oldest one's wait."""
        now = time.monotonic()
        with self._cond:
            queued = [j for q in self._queues.values() for j in q]
            running = self.running_since
            return {
                "alive": self._thread.is_alive() and not self._closed,
                "running_s": None if running is None else round(now - running, 3),
                "queued": len(queued),
                "oldest_wait_s": round(now - min(j.enqueued for j in queued), 3) if queued else 0.0,
                "jobs_done": self.jobs_done,
            }

    def close(self) -> None:
        """Stop taking jobs and cancel the queued ones (a running call finishes in its daemon thread)."""
        with self._cond:
            self._closed = True
            for q in self._queues.values():
                for job in q:
                    job.future.cancel()
            self._queues.clear()
            self._turns.clear()
            self._cond.notify_all()


def load_backend(
    path: str | Path, which: str = "best", deterministic: bool = True, device: str = "cpu"
) -> PolicyBackend:
    """A run directory of robosteer-train or robosteer-steer (DSRL, EXPO) -> a servable backend on ``device``
    (a steered run's base, actor and critic all)."""
    from robosteer.policies.loading import ACTING_KINDS, load, run_kind

    kind = run_kind(path)
    if kind not in ACTING_KINDS:
        raise ValueError(f"{path} is a {kind} run, which does not act: serve a robosteer-train or -steer run")
    return PolicyBackend(load(path, which=which, deterministic=deterministic, device=device), name=str(path))


class PolicyServer:
    """A websocket policy server; ``start()`` runs it in a background thread, ``serve_forever()`` in front.

    Args:
        backend: the policy (see :class:`PolicyBackend`).
        host, port: bind address; port 0 picks a free port (read ``.port`` after ``start``).
        token: shared secret every client must send in ``hello``; required when ``host`` is not loopback.
        max_message_bytes: cap on one incoming message (larger frames close the connection, code 1009).
        idle_timeout_s: a connection that sends nothing for this long is closed.
        max_batch: cap on the rows (B) of one ``sample``/``act`` request; larger ones get ``too_large``.
        slice_rows: a ``sample`` batch runs in slices of at most this many rows, connections taking turns.
        stuck_after_s: ``/healthz`` reports ``stuck`` (HTTP 503) when one slice has run this long.
        protocol: ``robosteer`` (``real/protocol.py``) or ``openpi`` (openpi's wire, ``real/openpi.py``;
            its clients send the token as ``Authorization: Api-Key <token>``).
    """

    def __init__(
        self,
        backend: PolicyBackend,
        host: str = "127.0.0.1",
        port: int = 8000,
        token: str | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        idle_timeout_s: float = 300.0,
        max_batch: int = MAX_BATCH,
        slice_rows: int = SLICE_ROWS,
        stuck_after_s: float = 10.0,
        protocol: str = "robosteer",
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol={protocol!r} is not known: expected one of {', '.join(PROTOCOLS)}")
        if not is_loopback(host) and not token:
            raise ValueError(
                f"host={host!r} exposes the policy beyond this machine: pass token=<shared secret> "
                "(clients then send it in their handshake), or bind host=127.0.0.1"
            )
        if token is not None and (not isinstance(token, str) or not token):
            raise ValueError(f"token must be a non-empty string, got {type(token).__name__}")
        if int(max_batch) < 1 or int(slice_rows) < 1 or not float(stuck_after_s) > 0:
            raise ValueError(
                f"max_batch, slice_rows and stuck_after_s must be > 0, got {max_batch}, {slice_rows}, {stuck_after_s}"
            )
        self.backend = backend
        self.protocol = protocol
        self.host = host
        self.port = int(port)
        self.token = token
        # compared as UTF-8 bytes: hmac.compare_digest refuses non-ASCII str (it raised for every client)
        self._token_bytes = None if token is None else token.encode("utf-8", "surrogatepass")
        self.max_message_bytes = int(max_message_bytes)
        self.idle_timeout_s = float(idle_timeout_s)
        self.max_batch = int(max_batch)
        self.slice_rows = int(slice_rows)
        self.stuck_after_s = float(stuck_after_s)
        self._worker = FairWorker(merge=self._sample_parts, max_rows=self.slice_rows)
        self._conn_ids = itertools.count()
        self._act_policies: dict[int, Any] = {}  # connection -> its fork of the policy (None until it acts)
        self._act_lock = threading.Lock()  # the worker stores forks, the event loop drops them
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.requests = 0

    # ------------------------------------------------------------------ request handling
    def _check_batch(self, obs: Mapping[str, np.ndarray]) -> int:
        batch = int(next(iter(obs.values())).shape[0]) if obs else 0
        if batch > self.max_batch:
            raise ProtocolError(
                "too_large",
                f"batch of {batch} rows exceeds max_batch={self.max_batch}: send at most {self.max_batch} "
                "rows per request (robosteer-serve max_batch=N raises the cap)",
            )
        return batch

    def _check_sample(
        self, msg: Mapping[str, Any]
    ) -> tuple[dict[str, np.ndarray], np.ndarray | None, np.ndarray | None]:
        """Validate a ``sample`` request (obs window, optional noise and prefix) before it is queued."""
        b = self.backend
        obs = check_obs(msg.get("obs"), b.specs, steps=b.n_obs_steps)
        batch = self._check_batch(obs)
        noise = msg.get("noise")
        if noise is not None:
            want = (batch, *b.noise_shape)
            if not isinstance(noise, np.ndarray) or noise.shape != want or noise.dtype.kind != "f":
                got = noise.shape if isinstance(noise, np.ndarray) else type(noise).__name__
                raise ProtocolError("bad_shape", f"'noise' has shape {got}, expected float {want}")
        prefix = msg.get("prefix")
        if prefix is not None:
            tp, da = b.noise_shape
            if not b.supports_prefix:
                raise ProtocolError(
                    "bad_message", f"policy {b.name!r} does not take a 'prefix' (supports_prefix is false)"
                )
            if (
                not isinstance(prefix, np.ndarray)
                or prefix.ndim != 3
                or prefix.shape[0] != batch
                or prefix.shape[1] > tp
                or prefix.shape[2] != da
                or prefix.dtype.kind != "f"
            ):
                got = prefix.shape if isinstance(prefix, np.ndarray) else type(prefix).__name__
                raise ProtocolError(
                    "bad_shape", f"'prefix' has shape {got}, expected float ({batch}, P <= {tp}, {da})"
                )
            if not np.isfinite(prefix).all():
                raise ProtocolError("bad_value", "'prefix' holds NaN/Inf")
        return obs, noise, prefix

    @staticmethod
    def _finite(actions: np.ndarray) -> np.ndarray:
        if not np.isfinite(actions).all():
            # Never forward non-finite actions: the client's safety filter would catch them, but the
            # error here names the source.
            raise ProtocolError("policy_nan", "the policy returned NaN/Inf actions; nothing was sent")
        return actions

    def _sample_parts(
        self, parts: list[tuple[dict[str, np.ndarray], np.ndarray | None, np.ndarray | None]]
    ) -> list[tuple[np.ndarray, float] | BaseException]:
        """Slices of sample requests (possibly of several connections, same noise/prefix layout) as one
        batched call on the worker; per slice its actions and the call's compute ms, or its error."""
        t0 = time.perf_counter()
        obs, noise, prefix = parts[0]
        if len(parts) > 1:
            obs = {k: np.concatenate([p[0][k] for p in parts]) for k in obs}
            noise = None if noise is None else np.concatenate([p[1] for p in parts])  # type: ignore[misc]
            prefix = None if prefix is None else np.concatenate([p[2] for p in parts])  # type: ignore[misc]
        actions = self.backend.sample(obs, noise=noise, prefix=prefix)
        ms = 1e3 * (time.perf_counter() - t0)
        out: list[tuple[np.ndarray, float] | BaseException] = []
        lo = 0
        for part in parts:
            n = next(iter(part[0].values())).shape[0]
            rows = actions[lo : lo + n]
            lo += n
            try:
                out.append((self._finite(rows), ms))
            except ProtocolError as e:
                out.append(e)
        return out

    def _act_job(self, conn: int, obs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, float]:
        """One ``act`` on the connection's own fork of the policy (runs on the worker)."""
        t0 = time.perf_counter()
        policy = self._act_policies.get(conn)
        if policy is None:
            policy = self.backend.fork()
            with self._act_lock:
                if conn in self._act_policies:  # not if the connection closed meanwhile
                    self._act_policies[conn] = policy
        return self._finite(self.backend.act(obs, policy)), 1e3 * (time.perf_counter() - t0)

    async def _run_request(
        self, conn: int, kind: str, msg: Mapping[str, Any]
    ) -> tuple[dict[str, Any], float]:
        """Validate, queue and await one request; returns (reply without timing, compute ms)."""
        if kind == "reset":
            self._act_policies[conn] = None  # this connection's act state only; a fresh fork on its next act
            return {"type": "reset_ok"}, 0.0
        if kind == "act":
            obs = check_obs(msg.get("obs"), self.backend.specs, steps=None)
            self._check_batch(obs)
            fut = self._worker.submit(conn, lambda: self._act_job(conn, obs))
            actions, ms = await asyncio.wrap_future(fut)
            return {"type": "act_result", "actions": actions}, ms
        obs, noise, prefix = self._check_sample(msg)
        batch = next(iter(obs.values())).shape[0]
        group = ("sample", noise is not None, None if prefix is None else prefix.shape[1])
        futs = []
        for lo in range(0, batch, self.slice_rows):
            hi = min(lo + self.slice_rows, batch)
            part = (
                {k: v[lo:hi] for k, v in obs.items()},
                None if noise is None else noise[lo:hi],
                None if prefix is None else prefix[lo:hi],
            )
            futs.append(self._worker.submit_rows(conn, part, group, hi - lo))
        try:
            parts = await asyncio.gather(*(asyncio.wrap_future(f) for f in futs))
        except BaseException:
            for f in futs:  # the rest of a failed batch is not computed
                f.cancel()
            raise
        actions = parts[0][0] if len(parts) == 1 else np.concatenate([a for a, _ in parts])
        return {"type": "sample_result", "actions": actions}, sum(ms for _, ms in parts)

    async def _refuse(self, ws: Any, code: str, message: str, close_code: int) -> None:
        """Tell the peer why, then close with the reason (never a silent disconnect)."""
        with contextlib.suppress(Exception):
            await ws.send(encode(error_message(code, message)))
        with contextlib.suppress(Exception):
            await ws.close(code=close_code, reason=f"{code}: {message}"[:120])

    def _check_token(self, hello: Mapping[str, Any]) -> str | None:
        """None if ``hello`` carries the token (or none is required), else the reason it is refused."""
        if self._token_bytes is None:
            return None
        got = hello.get("token")
        if got is None:
            return "missing token in hello"
        if not isinstance(got, str):
            return f"token must be a string, got {type(got).__name__}"
        if not hmac.compare_digest(got.encode("utf-8", "surrogatepass"), self._token_bytes):
            return "wrong token in hello"
        return None

    async def _handler(self, ws: Any) -> None:
        if self.protocol == "openpi":  # its token, if any, was checked on the HTTP upgrade
            from robosteer.real.openpi import serve_openpi

            await serve_openpi(self, ws)
            return
        try:
            raw = await asyncio.wait_for(ws.recv(), timeout=self.idle_timeout_s)
        except Exception as e:  # connection closed or idle before the handshake
            log.debug("handshake failed: %s", e)
            return
        try:
            hello = decode(raw, self.max_message_bytes, allowed_types=("hello",))
            check_hello(hello)
            refused = self._check_token(hello)
        except ProtocolError as e:
            await self._refuse(ws, e.code, str(e), 1002)
            return
        except Exception as e:  # anything else in a hello is refused by name, never dropped silently
            await self._refuse(ws, "bad_message", f"hello refused: {type(e).__name__}: {e}", 1002)
            return
        if refused is not None:
            await self._refuse(ws, "unauthorized", refused, 1008)
            return
        try:
            await ws.send(
                encode({"type": "hello_ok", "version": PROTOCOL_VERSION, "policy": self.backend.metadata()})
            )
        except Exception:
            return
        conn = next(self._conn_ids)
        self._act_policies[conn] = None
        try:
            await self._serve_connection(ws, conn)
        finally:
            with self._act_lock:
                self._act_policies.pop(conn, None)
            self._worker.cancel(conn)

    async def _serve_connection(self, ws: Any, conn: int) -> None:
        while True:
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=self.idle_timeout_s)
            except Exception:  # idle timeout or closed connection (websockets' ConnectionClosed)
                return
            t0 = time.perf_counter()
            try:
                msg = decode(raw, self.max_message_bytes, allowed_types=POLICY_REQUESTS)
                kind = msg["type"]
                if kind == "hello":
                    raise ProtocolError("bad_message", "hello was already exchanged on this connection")
                t1 = time.perf_counter()
                if kind == "ping":
                    reply: dict[str, Any] = {"type": "pong"}
                    compute_ms = 0.0
                else:
                    reply, compute_ms = await self._run_request(conn, kind, msg)
                t2 = time.perf_counter()
                reply["id"] = msg.get("id")
                reply["timing"] = {
                    "decode_ms": 1e3 * (t1 - t0),
                    "infer_ms": compute_ms,  # the policy's own compute for this request
                    "queue_ms": max(1e3 * (t2 - t1) - compute_ms, 0.0),  # waiting for the shared worker
                    "server_ms": 1e3 * (time.perf_counter() - t0),
                }
                self.requests += 1
            except ProtocolError as e:
                reply = error_message(e.code, str(e))
            except Exception as e:  # the policy itself failed: report, keep serving
                log.exception("policy request failed")
                reply = error_message("policy_error", f"{type(e).__name__}: {e}")
            try:
                await ws.send(encode(reply))
            except Exception:
                return

    def health(self) -> dict[str, Any]:
        """``ok`` (worker idle), ``busy`` (running or queued work) or ``stuck`` (one job running for
        ``stuck_after_s`` or more, or the worker gone), with the figures behind it."""
        w = self._worker.status()
        running = w["running_s"]
        if not w["alive"] or (running is not None and running >= self.stuck_after_s):
            status = "stuck"
        elif running is not None or w["queued"]:
            status = "busy"
        else:
            status = "ok"
        return {
            "status": status,
            **w,
            "connections": len(self._act_policies),
            "requests": self.requests,
            "max_batch": self.max_batch,
            "slice_rows": self.slice_rows,
            "stuck_after_s": self.stuck_after_s,
        }

    def _process_request(self, connection: Any, request: Any) -> Any:
        """Plain HTTP ``GET /healthz`` (load balancers, `curl`): JSON health, HTTP 503 when stuck;
        everything else upgrades to a websocket."""
        if request.path == "/healthz":
            h = self.health()
            code = HTTPStatus.SERVICE_UNAVAILABLE if h["status"] == "stuck" else HTTPStatus.OK
            return connection.respond(code, json.dumps(h) + "\n")
        if (
            self.protocol == "openpi" and self._token_bytes is not None
        ):  # openpi: `Authorization: Api-Key <token>`
            got = request.headers.get("Authorization", "")
            key = got[len("Api-Key ") :] if got.startswith("Api-Key ") else ""
            if not hmac.compare_digest(key.encode("utf-8", "surrogatepass"), self._token_bytes):
                return connection.respond(HTTPStatus.UNAUTHORIZED, "missing or wrong Api-Key\n")
        return None

    # ------------------------------------------------------------------ lifecycle
    async def _serve(self) -> None:
        from websockets.asyncio.server import serve

        self._stop = asyncio.Event()
        async with serve(
            self._handler,
            self.host,
            self.port,
            max_size=self.max_message_bytes,
            process_request=self._process_request,
            ping_interval=None,
        ) as server:
            self.port = int(next(iter(server.sockets)).getsockname()[1])
            self._ready.set()
            await self._stop.wait()

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as e:
            self._error = e
            self._ready.set()
        finally:
            self._loop.close()

    def start(self, timeout_s: float = 10.0) -> PolicyServer:
        """Serve in a daemon thread; returns once the socket is bound (``self.port`` is then the real port)."""
        self._thread = threading.Thread(target=self._run, name="policy-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise TimeoutError(f"policy server did not start within {timeout_s} s")
        if self._error is not None:
            raise RuntimeError(f"policy server failed to start on {self.host}:{self.port}: {self._error}")
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Close every connection and the listening socket."""
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._worker.close()

    def serve_forever(self) -> None:
        """Block until interrupted (starting the server unless ``start()`` already did)."""
        if self._thread is None:
            self.start()
        try:
            assert self._thread is not None
            while self._thread.is_alive():
                self._thread.join(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
