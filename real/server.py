"""Serve any checkpoint (a robosteer-train run, or a steering run such as DSRL) over websockets + msgpack.

Modelled on openpi's policy server: one websocket per client, a version handshake first, then
request/reply messages (``sample``, ``act``, ``reset``, ``ping``); ``GET /healthz`` answers plain HTTP.
Every reply carries ``timing`` (decode, inference and total server milliseconds) so a client can split
round-trip latency into network and compute. Safety of the server itself: it binds 127.0.0.1 unless told
otherwise, requires a shared token whenever it binds anywhere else, caps message size (websockets'
``max_size``), validates every array against the policy's ``shape_meta`` before inference, and answers a
bad request with an ``error`` message instead of crashing. Inference runs in one worker thread under a lock,
so the event loop keeps answering ``/healthz`` and pings during a slow forward pass.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from pathlib import Path
from typing import Any

import numpy as np

from real.protocol import (
    MAX_MESSAGE_BYTES,
    POLICY_REQUESTS,
    PROTOCOL_VERSION,
    ProtocolError,
    check_hello,
    check_obs,
    decode,
    encode,
    error_message,
    obs_specs,
)

log = logging.getLogger(__name__)


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

    Why: steering wrappers (DSRL's ``SteeredPolicy``) plan chunks through their actor but do not define
    ``sample``; this adapter gives the server one surface for both, and its metadata is what the
    handshake announces (shape_meta, noise_shape, To/Tp/Ta).
    """

    def __init__(self, policy: Any, name: str = "policy") -> None:
        import torch

        self.policy = policy
        self.name = name
        self._torch = torch
        self._steered = (
            hasattr(policy, "agent") and hasattr(policy, "policy") and not hasattr(policy, "sample")
        )
        base = policy.policy if self._steered else policy
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
                out = self.policy._plan(t, None)  # the actor picks the noise
            elif prefix is not None:
                out = self.base.sample(dict(obs), noise=noise, prefix=prefix)
            else:
                out = self.base.sample(dict(obs), noise=noise)
        return np.asarray(out.detach().cpu().numpy() if hasattr(out, "detach") else out, dtype=np.float32)

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """(B, ...) single-step obs -> (B, Da) next action from the policy's own queue."""
        return np.asarray(self.policy.act(dict(obs)), dtype=np.float32)

    def reset(self) -> None:
        self.policy.reset()


def load_backend(path: str | Path, which: str = "best", deterministic: bool = True) -> PolicyBackend:
    """A run directory of robosteer-train or robosteer-steer (DSRL) -> a servable backend."""
    from policies import load_policy
    from policies.steering import is_steering_run, load_steered_policy

    if is_steering_run(path):
        policy = load_steered_policy(
            path, deterministic=deterministic, which="best" if which == "best" else "latest"
        )
    else:
        policy = load_policy(path, which=which)
    policy.eval()
    return PolicyBackend(policy, name=str(path))


class PolicyServer:
    """A websocket policy server; ``start()`` runs it in a background thread, ``serve_forever()`` in front.

    Args:
        backend: the policy (see :class:`PolicyBackend`).
        host, port: bind address; port 0 picks a free port (read ``.port`` after ``start``).
        token: shared secret every client must send in ``hello``; required when ``host`` is not loopback.
        max_message_bytes: cap on one incoming message (larger frames close the connection, code 1009).
        idle_timeout_s: a connection that sends nothing for this long is closed.
    """

    def __init__(
        self,
        backend: PolicyBackend,
        host: str = "127.0.0.1",
        port: int = 8000,
        token: str | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        idle_timeout_s: float = 300.0,
    ) -> None:
        if not is_loopback(host) and not token:
            raise ValueError(
                f"host={host!r} exposes the policy beyond this machine: pass token=<shared secret> "
                "(clients then send it in their handshake), or bind host=127.0.0.1"
            )
        self.backend = backend
        self.host = host
        self.port = int(port)
        self.token = token
        self.max_message_bytes = int(max_message_bytes)
        self.idle_timeout_s = float(idle_timeout_s)
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="policy-infer")
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.requests = 0

    # ------------------------------------------------------------------ request handling
    def _infer(self, kind: str, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and run one request under the lock; returns the reply (without timing)."""
        b = self.backend
        with self._lock:
            if kind == "reset":
                b.reset()
                return {"type": "reset_ok"}
            if kind == "sample":
                obs = check_obs(msg.get("obs"), b.specs, steps=b.n_obs_steps)
                noise = msg.get("noise")
                if noise is not None:
                    batch = next(iter(obs.values())).shape[0]
                    want = (batch, *b.noise_shape)
                    if not isinstance(noise, np.ndarray) or noise.shape != want or noise.dtype.kind != "f":
                        got = noise.shape if isinstance(noise, np.ndarray) else type(noise).__name__
                        raise ProtocolError("bad_shape", f"'noise' has shape {got}, expected float {want}")
                prefix = msg.get("prefix")
                if prefix is not None:
                    batch = next(iter(obs.values())).shape[0]
                    tp, da = b.noise_shape
                    if not b.supports_prefix:
                        raise ProtocolError(
                            "bad_message",
                            f"policy {b.name!r} does not take a 'prefix' (supports_prefix is false)",
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
                            "bad_shape",
                            f"'prefix' has shape {got}, expected float ({batch}, P <= {tp}, {da})",
                        )
                    if not np.isfinite(prefix).all():
                        raise ProtocolError("bad_value", "'prefix' holds NaN/Inf")
                actions = b.sample(obs, noise=noise, prefix=prefix)  # (B, Tp, Da)
            else:  # act
                obs = check_obs(msg.get("obs"), b.specs, steps=None)
                actions = b.act(obs)  # (B, Da)
            if not np.isfinite(actions).all():
                # Never forward non-finite actions: the client's safety filter would catch them, but the
                # error here names the source.
                raise ProtocolError("policy_nan", "the policy returned NaN/Inf actions; nothing was sent")
            return {"type": f"{kind}_result", "actions": actions}

    async def _handler(self, ws: Any) -> None:
        loop = asyncio.get_running_loop()
        try:
            raw = await asyncio.wait_for(ws.recv(), timeout=self.idle_timeout_s)
            hello = decode(raw, self.max_message_bytes, allowed_types=("hello",))
            check_hello(hello)
            if self.token is not None and not hmac.compare_digest(str(hello.get("token") or ""), self.token):
                await ws.send(encode(error_message("unauthorized", "missing or wrong token in hello")))
                await ws.close(code=1008, reason="unauthorized")
                return
            await ws.send(
                encode({"type": "hello_ok", "version": PROTOCOL_VERSION, "policy": self.backend.metadata()})
            )
        except ProtocolError as e:
            await ws.send(encode(error_message(e.code, str(e))))
            await ws.close(code=1002, reason=e.code)
            return
        except Exception as e:  # connection closed or idle before the handshake
            log.debug("handshake failed: %s", e)
            return
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
                else:
                    reply = await loop.run_in_executor(self._executor, self._infer, kind, msg)
                t2 = time.perf_counter()
                reply["id"] = msg.get("id")
                reply["timing"] = {
                    "decode_ms": 1e3 * (t1 - t0),
                    "infer_ms": 1e3 * (t2 - t1),
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

    def _process_request(self, connection: Any, request: Any) -> Any:
        """Plain HTTP ``GET /healthz`` (load balancers, `curl`); everything else upgrades to a websocket."""
        if request.path == "/healthz":
            return connection.respond(HTTPStatus.OK, "ok\n")
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
        self._executor.shutdown(wait=False, cancel_futures=True)

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
