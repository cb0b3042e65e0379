"""openpi's wire protocol, both ways: ``robosteer-serve protocol=openpi`` and a client for openpi servers.

Why: openpi's ``openpi_client`` (and any robot stack written against it) talks to a policy as a websocket that
sends its metadata on connect, then answers each observation dict with an action dict, every frame msgpack
with numpy arrays in openpi's ``msgpack_numpy`` encoding (``{b"__ndarray__": True, b"data", b"dtype",
b"shape"}``). robosteer's own protocol (``real/protocol.py``: a handshake, typed requests, batches) is not
that, so an openpi client could not reach ``robosteer-serve``. In openpi mode a request is one observation:
each key of the policy's ``shape_meta`` as one step ``*shape`` (the server keeps each connection's last To, so
openpi's runtime, which sends one observation per step, needs no change) or a window ``(To, *shape)``, optionally the
initial noise under ``"__noise__"`` as ``(Tp, Da)`` — openpi's own websocket server carries no noise, so this
reserved key is robosteer's, announced in the metadata (``noise_key``) for DSRL and V-GPS. The reply holds
``"actions"`` ``(Tp, Da)`` (the whole sampled chunk; execute ``n_action_steps`` of it, as openpi's
``ActionChunkBroker`` does with its ``action_horizon``) and openpi's ``policy_timing`` / ``server_timing``.
A bad request gets openpi's error behaviour: one text frame naming the problem, then close code 1011.
Decoding is as strict as robosteer's own: numeric dtypes only, sizes checked before any array is built.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np

from robosteer.policies.acting import ActionQueue
from robosteer.real.client import PolicyConnectionError, RemotePlanner
from robosteer.real.protocol import (
    ALLOWED_DTYPES,
    MAX_ARRAY_ELEMENTS,
    MAX_ARRAY_NDIM,
    ProtocolError,
    RemoteError,
)

if TYPE_CHECKING:
    from robosteer.real.server import PolicyServer

NOISE_KEY = "__noise__"
_ALLOWED = {np.dtype(d) for d in ALLOWED_DTYPES}


def _pack_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray | np.generic) and obj.dtype not in _ALLOWED:
        raise ProtocolError("bad_dtype", f"dtype {obj.dtype} cannot travel: numeric arrays only")
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        return {b"__ndarray__": True, b"data": arr.tobytes(), b"dtype": arr.dtype.str, b"shape": arr.shape}
    if isinstance(obj, np.generic):
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"cannot pack {type(obj).__name__}")


def packb(obj: Any) -> bytes:
    """``obj`` (dicts, lists, numbers, strings, numpy arrays and scalars) in openpi's msgpack encoding."""
    return msgpack.packb(obj, default=_pack_default)


def _unpack_hook(obj: dict) -> Any:
    if b"__ndarray__" in obj:
        dtype = _dtype(obj.get(b"dtype"))
        shape = obj.get(b"shape")
        data = obj.get(b"data")
        if not isinstance(shape, list | tuple) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ProtocolError("bad_message", f"array shape {shape!r} is not a list of sizes")
        if len(shape) > MAX_ARRAY_NDIM or int(np.prod(shape)) > MAX_ARRAY_ELEMENTS:
            raise ProtocolError("too_large", f"array of shape {tuple(shape)} exceeds the size limits")
        if not isinstance(data, bytes) or len(data) != int(np.prod(shape)) * dtype.itemsize:
            raise ProtocolError("bad_message", f"array data does not hold {tuple(shape)} values of {dtype}")
        return np.frombuffer(data, dtype=dtype).reshape(shape).copy()  # writable, unlike openpi's
    if b"__npgeneric__" in obj:
        return _dtype(obj.get(b"dtype")).type(obj.get(b"data"))
    return obj


def _dtype(name: Any) -> np.dtype:
    try:
        dtype = np.dtype(name.decode() if isinstance(name, bytes) else name)
    except TypeError:
        raise ProtocolError("bad_dtype", f"dtype {name!r} is not a numpy dtype") from None
    if dtype.newbyteorder("=") not in _ALLOWED and dtype not in _ALLOWED:
        raise ProtocolError("bad_dtype", f"dtype {dtype} cannot travel: expected one of {ALLOWED_DTYPES}")
    return dtype


def unpackb(data: bytes, max_bytes: int) -> Any:
    """openpi msgpack bytes -> objects with numpy arrays; refuses oversized frames and non-numeric arrays."""
    if isinstance(data, str):
        raise ProtocolError("bad_message", "text frames are not requests: send binary msgpack")
    if len(data) > max_bytes:
        raise ProtocolError("too_large", f"message of {len(data)} bytes exceeds the {max_bytes}-byte cap")
    try:
        return msgpack.unpackb(data, object_hook=_unpack_hook, strict_map_key=False)
    except ProtocolError:
        raise
    except Exception as e:  # msgpack raises several unrelated exception types on garbage
        raise ProtocolError("bad_message", f"not a msgpack message ({type(e).__name__}: {e})") from None


RESET_KEY = "__reset__"


def _shape(shape: tuple[int, ...]) -> str:
    return f"({', '.join(map(str, shape))}{',' if len(shape) == 1 else ''})"


class ObsHistory:
    """One connection's last ``To`` observations, so an openpi client can send one observation per step.

    openpi's runtime sends exactly one observation per inference (``Runtime`` -> ``PolicyAgent`` ->
    ``ActionChunkBroker``), while a robosteer policy with To > 1 conditions on a window; so the server keeps
    the window. Each request holds, per key, either one step ``(*shape)`` (appended; the first step of a
    connection fills the whole window with itself, as the policy's own ``act`` pads) or a full window
    ``(To, *shape)`` (taken as is, robosteer's windowed requests; it also becomes the history). openpi's
    ``reset()`` sends nothing, so episode boundaries are invisible: a new connection starts empty, and a
    request holding ``"__reset__": true`` (announced as ``reset_key``) empties it before its observation.
    Errors are in the client's terms: the key, the shape it sent (no server batch dimension), the one expected.
    """

    def __init__(self, specs: Mapping[str, tuple[tuple[int, ...], str]], n_obs_steps: int) -> None:
        self.specs, self.steps = dict(specs), int(n_obs_steps)
        self.frames: dict[str, list[np.ndarray]] = {}

    def _expected(self, shape: tuple[int, ...]) -> str:
        one = _shape(shape)
        if self.steps == 1:
            return one
        return f"{one} (one step; the server keeps the last {self.steps}) or {_shape((self.steps, *shape))}"

    def _check(self, key: str, arr: Any, shape: tuple[int, ...], kind: str) -> bool:
        """Is ``arr`` a single step (True) or a window (False)? Raises naming key, shape and expectation."""
        if not isinstance(arr, np.ndarray):
            shown = repr(arr) if isinstance(arr, str | bytes | int | float | bool) else ""
            raise ProtocolError(
                "bad_obs",
                f"obs[{key!r}] is a {type(arr).__name__}{f' ({shown[:40]})' if shown else ''}, not an array: "
                f"expected a numeric array of shape {self._expected(shape)}",
            )
        if tuple(arr.shape) == tuple(shape):
            single = True
        elif self.steps > 1 and tuple(arr.shape) == (self.steps, *shape):
            single = False
        else:
            raise ProtocolError(
                "bad_shape", f"obs[{key!r}] has shape {_shape(arr.shape)}, expected {self._expected(shape)}"
            )
        if kind == "rgb" and arr.dtype != np.uint8:
            raise ProtocolError("bad_dtype", f"obs[{key!r}] has dtype {arr.dtype}, expected uint8 images")
        if kind != "rgb" and arr.dtype.kind not in "fiu":
            raise ProtocolError("bad_dtype", f"obs[{key!r}] has dtype {arr.dtype}, expected a numeric array")
        return single

    def window(self, obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The policy's ``(1, To, *shape)`` window for this request, updating the history."""
        missing = [k for k in self.specs if k not in obs]
        if missing:
            raise ProtocolError(
                "bad_obs",
                f"obs lacks key {missing[0]!r}: expected keys {sorted(self.specs)}, got {sorted(obs)}",
            )
        if obs.get(RESET_KEY):
            self.frames = {}
        kinds = {k: self._check(k, obs[k], shape, kind) for k, (shape, kind) in self.specs.items()}
        if len(set(kinds.values())) > 1:
            singles = sorted(k for k, v in kinds.items() if v)
            raise ProtocolError(
                "bad_shape",
                f"obs mixes single steps ({singles}) with {self.steps}-step windows "
                f"({sorted(k for k, v in kinds.items() if not v)}): send every key one way",
            )
        out: dict[str, np.ndarray] = {}
        for key, single in kinds.items():
            arr = np.asarray(obs[key])
            if single:
                past = self.frames.get(key) or [arr] * self.steps
                self.frames[key] = [*past, arr][-self.steps :]
            else:
                self.frames[key] = list(arr)
            out[key] = np.stack(self.frames[key])[None]
        return out


def _window(
    server: PolicyServer, obs: Any, history: ObsHistory
) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """An openpi request -> robosteer's (1, To, ...) window and (1, Tp, Da) noise (or None)."""
    b = server.backend
    if not isinstance(obs, Mapping):
        raise ProtocolError("bad_obs", f"a request is a map of observation arrays, got {type(obs).__name__}")
    obs = _text_keys(obs)
    noise = obs.get(NOISE_KEY)
    if noise is not None:
        want = tuple(b.noise_shape)
        if not isinstance(noise, np.ndarray) or tuple(noise.shape) != want or noise.dtype.kind != "f":
            got = _shape(noise.shape) if isinstance(noise, np.ndarray) else f"a {type(noise).__name__}"
            raise ProtocolError(
                "bad_shape", f"obs[{NOISE_KEY!r}] is {got}, expected a float array {_shape(want)}"
            )
        noise = noise[None]
    return history.window(obs), noise


async def serve_openpi(server: PolicyServer, ws: Any) -> None:
    """One connection in openpi's protocol: metadata, then lockstep observation -> actions."""
    b = server.backend
    meta = {**b.metadata(), "protocol": "openpi", "noise_key": NOISE_KEY, "reset_key": RESET_KEY}
    conn = next(server._conn_ids)
    history = ObsHistory(b.specs, b.n_obs_steps)
    try:
        await ws.send(packb(meta))
        prev_total_ms: float | None = None
        while True:
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=server.idle_timeout_s)
            except Exception:  # idle timeout or closed connection
                return
            t0 = time.perf_counter()
            try:
                window, noise = _window(server, unpackb(raw, server.max_message_bytes), history)
                msg = {"obs": window, "noise": noise}
                reply, compute_ms = await server._run_request(conn, "sample", msg)
            except Exception as e:  # openpi's behaviour: the error as a text frame, then close 1011
                text = f"{getattr(e, 'code', 'policy_error')}: {e}"
                with contextlib.suppress(Exception):
                    await ws.send(text)
                    await ws.close(code=1011, reason=text[:120])
                return
            server.requests += 1
            timing = {"infer_ms": 1e3 * (time.perf_counter() - t0)}
            if prev_total_ms is not None:
                timing["prev_total_ms"] = prev_total_ms
            out = {
                "actions": reply["actions"][0],
                "policy_timing": {"infer_ms": compute_ms},
                "server_timing": timing,
            }
            await ws.send(packb(out))
            prev_total_ms = 1e3 * (time.perf_counter() - t0)
    finally:
        server._worker.cancel(conn)


class OpenpiClient:
    """A client of any server speaking openpi's protocol (openpi's own, or ``robosteer-serve
    protocol=openpi``): ``infer(obs) -> dict`` as openpi's client; ``sample(obs, noise)`` as a robosteer chunk
    sampler, so DSRL (``noise_shape``) and V-GPS (``n_obs_steps`` / ``n_action_steps``) take it as a base."""

    def __init__(self, url: str, api_key: str | None = None, max_message_bytes: int = 64 * 2**20) -> None:
        from websockets.sync.client import connect

        self.url = url if url.startswith("ws") else f"ws://{url}"
        self.max_message_bytes = max_message_bytes
        headers = {"Authorization": f"Api-Key {api_key}"} if api_key else None
        try:
            self._ws = connect(
                self.url, compression=None, max_size=max_message_bytes, additional_headers=headers
            )
        except Exception as e:  # refused, unreachable, not a websocket: as robosteer's own client reports it
            raise PolicyConnectionError(
                f"cannot connect to openpi server {url}: {type(e).__name__}: {e}"
            ) from e
        self.metadata: dict[str, Any] = _text_keys(unpackb(self._ws.recv(), max_message_bytes))
        m = self.metadata  # robosteer's servers announce these; openpi's own announce none of them
        self.noise_key: str | None = m.get("noise_key")
        self.noise_shape = tuple(m["noise_shape"]) if "noise_shape" in m else None
        self.n_obs_steps, self.n_action_steps = m.get("n_obs_steps"), m.get("n_action_steps")
        self.shape_meta, self.task = m.get("shape_meta"), m.get("task")
        self.acting: ActionQueue | None = None
        if self.n_obs_steps and self.n_action_steps:
            self.acting = ActionQueue(RemotePlanner(self), int(self.n_obs_steps), int(self.n_action_steps))

    def infer(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        self._ws.send(packb(dict(obs)))
        reply = self._ws.recv()
        if isinstance(reply, str):  # the server's error frame; it closes the connection after it
            raise RemoteError("server_error", reply)
        return _text_keys(unpackb(reply, self.max_message_bytes))

    def sample(self, obs: Mapping[str, Any], noise: Any = None) -> Any:
        """Chunks (B, Tp, Da) for obs windows {key: (B, To, ...)}, one request per row (openpi's protocol
        has no batch); ``noise`` (B, Tp, Da) travels under the announced noise key. Torch in -> torch out."""
        torch_in = any(hasattr(v, "detach") for v in obs.values()) or hasattr(noise, "detach")
        rows = {k: np.asarray(v.detach().cpu() if hasattr(v, "detach") else v) for k, v in obs.items()}
        if noise is not None:
            if self.noise_key is None:
                raise ValueError(
                    f"{self.url} announces no noise key: this openpi server cannot take initial noise"
                )
            noise = np.asarray(noise.detach().cpu() if hasattr(noise, "detach") else noise, dtype=np.float32)
        chunks = []
        for i in range(len(next(iter(rows.values())))):
            request: dict[str, Any] = {k: v[i] for k, v in rows.items()}
            if noise is not None:
                request[self.noise_key] = noise[i]  # type: ignore[index]
            chunks.append(np.asarray(self.infer(request)["actions"], dtype=np.float32))
        out = np.stack(chunks)
        if torch_in:
            import torch

            return torch.from_numpy(out)
        return out

    def act(self, obs: Mapping[str, Any]) -> np.ndarray:
        """Next action (B, Da) for a single-step obs {key: (B, ...)}: one chunk per row every Ta calls."""
        if self.acting is None:
            raise ValueError(
                f"{self.url} announces no n_obs_steps / n_action_steps (openpi's own servers do not): "
                "its chunks can be sampled, but acting step by step needs them"
            )
        return self.acting.act({k: np.asarray(v) for k, v in obs.items()})  # numpy in -> numpy out

    def reset(self, env_ids: Any = None) -> None:
        if self.acting is not None:
            self.acting.reset(env_ids)

    def eval(self) -> OpenpiClient:
        return self

    def close(self) -> None:
        self._ws.close()

    def __enter__(self) -> OpenpiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _text_keys(obj: Any) -> Any:
    """openpi packs dict keys as str or bytes depending on the peer: str keys throughout."""
    if isinstance(obj, dict):
        return {(k.decode() if isinstance(k, bytes) else k): _text_keys(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_text_keys(v) for v in obj]
    return obj
