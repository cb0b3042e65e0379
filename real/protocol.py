"""The wire format shared by the policy server/client and the sim twin: msgpack messages with numpy arrays.

Why its own module: every byte that crosses a socket is decoded here, with hard limits, before anything
else sees it. A message is a msgpack map with a ``type`` string; numpy arrays travel as msgpack
extension type 1 (a small header with dtype and shape, then the raw little-endian bytes) — not openpi's
``msgpack_numpy`` maps (``real/openpi.py`` speaks that wire, ``robosteer-serve protocol=openpi``) — restricted
to a whitelist of plain numeric dtypes (no object arrays, so decoding can never execute code). The first message of every connection is ``hello`` carrying
``PROTOCOL_VERSION``; a peer of another version is refused with an ``error`` naming both versions.
"""

from __future__ import annotations

import difflib
import struct
from collections.abc import Mapping
from typing import Any

import msgpack
import numpy as np

PROTOCOL_VERSION = 1
PROTOCOLS = (
    "robosteer",
    "openpi",
)  # wires a server speaks / a client dials: this one, or openpi's (real/openpi.py)
MAX_MESSAGE_BYTES = 16 * 2**20  # default cap on one encoded message (server and client)
MAX_ARRAY_NDIM = 6
MAX_ARRAY_ELEMENTS = 8 * 2**20
_ARRAY_EXT = 1
# dtype names allowed on the wire: numeric only, no object/void/string arrays
ALLOWED_DTYPES = (
    "bool",
    "uint8",
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "float16",
    "float32",
    "float64",
)

# Message types of the policy protocol (client -> server) and their replies.
POLICY_REQUESTS = ("hello", "sample", "act", "reset", "ping")
# Message types of the sim-twin link (driver <-> twin).
TWIN_REQUESTS = ("hello", "reset", "scene", "command", "stop", "ping", "close")


class ProtocolError(ValueError):
    """A message broke the protocol (size, type, array shape/dtype, version); ``code`` is machine-readable."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class RemoteError(RuntimeError):
    """The peer answered with an ``error`` message (its code and text are kept)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


# --------------------------------------------------------------------------------------------------
# Encoding


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.name not in ALLOWED_DTYPES:
            raise ProtocolError(
                "bad_dtype", f"cannot send an array of dtype {obj.dtype}: allowed {ALLOWED_DTYPES}"
            )
        arr = np.ascontiguousarray(obj)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        name = arr.dtype.name.encode()
        header = struct.pack("<B", len(name)) + name + struct.pack("<B", arr.ndim)
        header += struct.pack(f"<{arr.ndim}Q", *arr.shape)
        return msgpack.ExtType(_ARRAY_EXT, header + arr.tobytes())
    if isinstance(obj, np.generic):
        return obj.item()
    if hasattr(obj, "detach") and hasattr(obj, "numpy"):  # a torch tensor
        return _default(obj.detach().cpu().numpy())
    raise ProtocolError("bad_value", f"cannot encode a value of type {type(obj).__name__}")


def encode(message: Mapping[str, Any]) -> bytes:
    """A message dict (with a ``type`` key) -> msgpack bytes; numpy arrays become extension values."""
    if "type" not in message:
        raise ProtocolError("bad_message", f"message lacks a 'type' key: {sorted(message)}")
    return msgpack.packb(dict(message), default=_default, use_bin_type=True)


def _ext_hook(code: int, data: bytes) -> Any:
    if code != _ARRAY_EXT:
        raise ProtocolError("bad_message", f"unknown msgpack extension type {code} (arrays use {_ARRAY_EXT})")
    try:
        n = data[0]
        name = data[1 : 1 + n].decode()
        ndim = data[1 + n]
        off = 2 + n
        shape = struct.unpack_from(f"<{ndim}Q", data, off)
        off += 8 * ndim
    except (IndexError, struct.error, UnicodeDecodeError) as e:
        raise ProtocolError("bad_array", f"truncated array header: {e}") from None
    if name not in ALLOWED_DTYPES:
        near = difflib.get_close_matches(name, ALLOWED_DTYPES, n=1)
        hint = f"; nearest allowed: {near[0]!r}" if near else ""
        raise ProtocolError(
            "bad_dtype", f"array dtype {name!r} is not allowed{hint} (allowed {ALLOWED_DTYPES})"
        )
    if ndim > MAX_ARRAY_NDIM:
        raise ProtocolError("bad_array", f"array has {ndim} dims, at most {MAX_ARRAY_NDIM} allowed")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if count > MAX_ARRAY_ELEMENTS:
        raise ProtocolError("too_large", f"array of shape {shape} exceeds {MAX_ARRAY_ELEMENTS} elements")
    dtype = np.dtype(name).newbyteorder("<")
    payload = data[off:]
    if len(payload) != count * dtype.itemsize:
        raise ProtocolError(
            "bad_array",
            f"array of dtype {name} and shape {tuple(shape)} needs {count * dtype.itemsize} bytes, got {len(payload)}",
        )
    return np.frombuffer(payload, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="), copy=True)


def decode(
    data: bytes | str, max_bytes: int = MAX_MESSAGE_BYTES, allowed_types: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """msgpack bytes -> message dict, enforcing the size cap, the array whitelist and (optionally) the type."""
    if isinstance(data, str):
        raise ProtocolError("bad_message", "text frames are not part of the protocol: send binary msgpack")
    if len(data) > max_bytes:
        raise ProtocolError(
            "too_large", f"message of {len(data)} bytes exceeds the limit of {max_bytes} bytes"
        )
    try:
        msg = msgpack.unpackb(data, ext_hook=_ext_hook, raw=False, strict_map_key=True)
    except ProtocolError:
        raise
    except Exception as e:  # msgpack raises several unrelated exception types on garbage
        raise ProtocolError("bad_message", f"not a msgpack message ({type(e).__name__}: {e})") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise ProtocolError(
            "bad_message", f"a message must be a map with a string 'type', got {type(msg).__name__}"
        )
    if allowed_types is not None and msg["type"] not in allowed_types:
        near = difflib.get_close_matches(msg["type"], allowed_types, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise ProtocolError(
            "unknown_type", f"unknown message type {msg['type']!r}{hint} (expected one of {allowed_types})"
        )
    return msg


def error_message(code: str, message: str) -> dict[str, Any]:
    """The ``error`` reply every peer sends on a bad request (the connection stays usable unless noted)."""
    return {"type": "error", "code": code, "message": message}


def raise_if_error(msg: Mapping[str, Any]) -> None:
    """Turn an ``error`` reply into :class:`RemoteError`."""
    if msg.get("type") == "error":
        raise RemoteError(str(msg.get("code", "error")), str(msg.get("message", "")))


def check_hello(msg: Mapping[str, Any]) -> None:
    """Refuse a handshake from another protocol version (the message names both versions)."""
    version = msg.get("version")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            "version_mismatch",
            f"peer speaks protocol version {version!r}, this side speaks {PROTOCOL_VERSION}: upgrade the older side",
        )


def check_obs(
    obs: Any, specs: Mapping[str, tuple[tuple[int, ...], str]], steps: int | None
) -> dict[str, np.ndarray]:
    """Validate an observation dict against ``{key: (shape, dtype kind)}``; leading dims (B[, To]) are free.

    ``steps``: the required To (second dim) or None for a single-step obs (B, *shape). Returns float32 (or
    uint8 for images) arrays. Errors name the key, the shape/dtype seen and the one expected.
    """
    if not isinstance(obs, Mapping):
        raise ProtocolError("bad_obs", f"'obs' must be a map of arrays, got {type(obs).__name__}")
    out: dict[str, np.ndarray] = {}
    lead = 1 if steps is None else 2
    batch = None
    for key, (shape, kind) in specs.items():
        if key not in obs:
            raise ProtocolError(
                "bad_obs", f"obs lacks key {key!r}: expected keys {sorted(specs)}, got {sorted(obs)}"
            )
        arr = obs[key]
        if not isinstance(arr, np.ndarray):
            raise ProtocolError("bad_obs", f"obs[{key!r}] must be an array, got {type(arr).__name__}")
        want = ("B", *(() if steps is None else (steps,)), *shape)
        if (
            arr.ndim != lead + len(shape)
            or tuple(arr.shape[lead:]) != tuple(shape)
            or (steps is not None and arr.shape[1] != steps)
        ):
            raise ProtocolError("bad_shape", f"obs[{key!r}] has shape {arr.shape}, expected {want}")
        if batch is None:
            batch = arr.shape[0]
        elif arr.shape[0] != batch:
            raise ProtocolError(
                "bad_shape", f"obs[{key!r}] has batch {arr.shape[0]}, other keys have {batch}"
            )
        if kind == "rgb":
            if arr.dtype != np.uint8:
                raise ProtocolError("bad_dtype", f"obs[{key!r}] has dtype {arr.dtype}, expected uint8 images")
        elif arr.dtype.kind not in "fiu":
            raise ProtocolError("bad_dtype", f"obs[{key!r}] has dtype {arr.dtype}, expected a float array")
        else:
            arr = arr.astype(np.float32, copy=False)
            if not np.isfinite(arr).all():
                raise ProtocolError("bad_value", f"obs[{key!r}] holds NaN or Inf")
        out[key] = arr
    if batch is not None and batch < 1:
        raise ProtocolError("bad_shape", "obs has an empty batch")
    return out


def obs_specs(shape_meta: Mapping[str, Any]) -> dict[str, tuple[tuple[int, ...], str]]:
    """``{key: (shape, type)}`` of a policy's ``shape_meta['obs']`` (what :func:`check_obs` takes)."""
    return {
        k: (tuple(int(d) for d in m["shape"]), m.get("type", "low_dim")) for k, m in shape_meta["obs"].items()
    }
