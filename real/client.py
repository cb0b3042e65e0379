"""A remote policy with the policy contract's surface: ``sample(obs, noise=None)``, ``reset()``, ``act(obs)``.

Why: steering code (DSRL, V-GPS) and the deploy runtime treat a policy as a black box with that surface;
this client makes a policy served by :mod:`real.server` (on another machine, a GPU host) look exactly
like a local one. ``sample`` returns torch tensors when given torch tensors and numpy otherwise; ``act``
keeps the To-step observation history and Ta-step action queue on the client side, in the action queue
every local policy acts through (:mod:`policies.acting`), so a remote policy costs one round trip per Ta steps.

Every failure surfaces as :class:`PolicyConnectionError` (server gone, handshake refused) or
:class:`PolicyTimeout` (no reply within ``timeout_s``), never as a hang: the runtime turns both into a
hold-then-stop of the arm.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

from robosteer.policies.acting import ActionQueue
from robosteer.real.protocol import (
    MAX_MESSAGE_BYTES,
    PROTOCOL_VERSION,
    PROTOCOLS,
    ProtocolError,
    RemoteError,
    decode,
    encode,
    raise_if_error,
)


class PolicyConnectionError(ConnectionError):
    """The policy server cannot be reached, refused the handshake, or closed the connection."""


class PolicyTimeout(TimeoutError):
    """The policy server did not answer within the request deadline."""


class PolicyClient:
    """Connects to ``ws://HOST:PORT`` and performs the version handshake (optionally with a token).

    Attributes after connecting: ``metadata`` (the server's policy description), ``shape_meta``,
    ``noise_shape`` (Tp, Da), ``n_obs_steps``, ``n_action_steps``, ``horizon``, ``task``, and
    ``last_timing`` (the server's timing of the latest reply plus the measured ``round_trip_ms``).
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout_s: float = 10.0,
        connect_timeout_s: float = 10.0,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        version: int = PROTOCOL_VERSION,
    ) -> None:
        if not url.startswith(("ws://", "wss://")):
            raise ValueError(
                f"policy url {url!r} is not valid: expected ws://HOST:PORT, e.g. ws://127.0.0.1:8000"
            )
        self.url = url
        self.timeout_s = float(timeout_s)
        self.max_message_bytes = int(max_message_bytes)
        self._ids = itertools.count()
        self.last_timing: dict[str, float] = {}
        self._ws: Any = None
        from websockets.sync.client import connect

        try:
            self._ws = connect(
                url, open_timeout=connect_timeout_s, close_timeout=1.0, max_size=self.max_message_bytes
            )
        except Exception as e:
            raise PolicyConnectionError(
                f"cannot connect to policy server {url}: {type(e).__name__}: {e}"
            ) from e
        # a config may hand over a number (token=1234): the server compares strings
        hello = {"type": "hello", "version": int(version), "token": None if token is None else str(token)}
        reply = self._roundtrip(hello, expect="hello_ok")
        self.metadata: dict[str, Any] = dict(reply["policy"])
        self.shape_meta: dict[str, Any] = self.metadata["shape_meta"]
        self.noise_shape: tuple[int, int] = tuple(int(d) for d in self.metadata["noise_shape"])  # type: ignore[assignment]
        self.n_obs_steps = int(self.metadata["n_obs_steps"])
        self.n_action_steps = int(self.metadata["n_action_steps"])
        self.horizon = int(self.metadata["horizon"])
        self.action_dim = int(self.metadata["action_dim"])
        self.task = self.metadata.get("task")
        self.supports_prefix = bool(self.metadata.get("supports_prefix", False))  # absent: an older server
        self.acting = ActionQueue(RemotePlanner(self), self.n_obs_steps, self.n_action_steps)

    # ------------------------------------------------------------------ transport
    def _roundtrip(self, msg: dict[str, Any], expect: str) -> dict[str, Any]:
        import time

        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            raise PolicyConnectionError(f"policy client for {self.url} is closed")
        msg_id = next(self._ids)
        msg["id"] = msg_id
        t0 = time.perf_counter()
        try:
            self._ws.send(encode(msg))
            while True:
                reply = decode(self._ws.recv(timeout=self.timeout_s), self.max_message_bytes)
                if reply.get("id") in (msg_id, None):
                    break  # an older reply (after a timeout) is skipped
        except TimeoutError as e:
            raise PolicyTimeout(
                f"policy server {self.url} did not answer {msg['type']!r} within {self.timeout_s} s"
            ) from e
        except ConnectionClosed as e:
            self._ws = None
            raise PolicyConnectionError(f"policy server {self.url} closed the connection: {e}") from e
        except OSError as e:
            self._ws = None
            raise PolicyConnectionError(f"policy server {self.url} connection failed: {e}") from e
        try:
            raise_if_error(reply)
        except RemoteError as e:
            if e.code in ("version_mismatch", "unauthorized"):
                self.close()
                raise PolicyConnectionError(f"policy server {self.url} refused the handshake: {e}") from e
            raise
        if reply["type"] != expect:
            raise ProtocolError(
                "bad_message", f"expected a {expect!r} reply from {self.url}, got {reply['type']!r}"
            )
        self.last_timing = dict(reply.get("timing") or {})
        self.last_timing["round_trip_ms"] = 1e3 * (time.perf_counter() - t0)
        return reply

    def ping(self) -> float:
        """Round trip of an empty request, in milliseconds."""
        self._roundtrip({"type": "ping"}, expect="pong")
        return self.last_timing["round_trip_ms"]

    # ------------------------------------------------------------------ the policy contract
    def sample(self, obs: Mapping[str, Any], noise: Any = None, prefix: Any = None) -> Any:
        """Action chunk (B, Tp, Da) for an obs window {key: (B, To, ...)}; torch in -> torch out.
        ``prefix`` (B, P, Da): the chunk's known first actions, for servers announcing ``supports_prefix``."""
        torch_in = any(hasattr(v, "detach") for v in obs.values()) or hasattr(noise, "detach")
        msg: dict[str, Any] = {"type": "sample", "obs": {k: _numpy(v) for k, v in obs.items()}}
        if noise is not None:
            msg["noise"] = _numpy(noise).astype(np.float32, copy=False)
        if prefix is not None:
            if not self.supports_prefix:
                raise ValueError(
                    f"the policy served at {self.url} does not take a prefix (supports_prefix false)"
                )
            msg["prefix"] = _numpy(prefix).astype(np.float32, copy=False)
        actions = np.asarray(self._roundtrip(msg, expect="sample_result")["actions"], dtype=np.float32)
        if torch_in:
            import torch

            return torch.from_numpy(actions)
        return actions

    def reset(self, env_ids: Any = None) -> None:
        """Clear the act() state of every row (or of ``env_ids``) and the server's per-episode state."""
        self.acting.reset(env_ids)
        self._roundtrip({"type": "reset"}, expect="reset_ok")

    def act(self, obs: Mapping[str, Any]) -> np.ndarray:
        """Next action (B, Da) for a single-step obs {key: (B, ...)} through the one action queue
        (:class:`policies.acting.ActionQueue`): one round trip every Ta calls."""
        return self.acting.act({k: _numpy(v) for k, v in obs.items()})  # numpy in -> numpy out

    def eval(self) -> PolicyClient:
        """No-op (the served policy is already in inference mode); lets callers treat it like a module."""
        return self

    def close(self) -> None:
        if self._ws is not None:
            try:
                self._ws.close()
            finally:
                self._ws = None

    def __enter__(self) -> PolicyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(url: str, protocol: str = "robosteer", token: str | None = None, timeout_s: float = 10.0) -> Any:
    """The policy served at ``url`` as a local one (``sample`` / ``act`` / ``reset`` / ``shape_meta``), over
    robosteer's wire (:class:`PolicyClient`) or openpi's (:class:`real.openpi.OpenpiClient`)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol={protocol!r} is not known: expected one of {', '.join(PROTOCOLS)}")
    if protocol == "robosteer":
        return PolicyClient(url, token=token, timeout_s=timeout_s)
    from robosteer.real.openpi import OpenpiClient

    return OpenpiClient(url, api_key=token)


class RemotePlanner:
    """A remote client (anything with ``sample(obs)``) as the action queue's chunk planner; the server keeps
    no per-row state for it to forget."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def plan(self, obs: dict[str, Any], rows: Any) -> Any:
        return self.client.sample(obs)  # (n, Tp, Da)

    def reset_rows(self, rows: Any) -> None:
        pass


def _numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def is_url(path: Any) -> bool:
    """A policy given as ``ws://HOST:PORT`` (or ``wss://``) rather than a run directory."""
    return str(path).startswith(("ws://", "wss://"))
