"""The wire format: arrays round-trip exactly; every malformed message is refused with a named error."""

from __future__ import annotations

import struct

import msgpack
import numpy as np
import pytest

from robosteer.real.protocol import (
    PROTOCOL_VERSION,
    ProtocolError,
    check_hello,
    check_obs,
    decode,
    encode,
)


def test_arrays_round_trip_exactly() -> None:
    msg = {
        "type": "sample",
        "obs": {
            "state": np.arange(12, dtype=np.float32).reshape(1, 2, 6),
            "image/cam": np.full((1, 2, 4, 4, 3), 7, np.uint8),
        },
        "noise": np.random.default_rng(0).normal(size=(1, 8, 4)),
        "scalar": np.float32(1.5),
    }
    out = decode(encode(msg))
    assert out["type"] == "sample"
    for key, arr in msg["obs"].items():
        assert out["obs"][key].dtype == arr.dtype and np.array_equal(out["obs"][key], arr)
    assert np.array_equal(out["noise"], msg["noise"]) and out["noise"].dtype == np.float64
    assert out["scalar"] == 1.5
    out["noise"][0, 0, 0] = 99.0  # decoded arrays are writable copies, not views of the message buffer


def test_oversized_message_is_refused() -> None:
    data = encode({"type": "sample", "x": np.zeros(1000, np.float64)})
    with pytest.raises(ProtocolError, match="exceeds the limit") as e:
        decode(data, max_bytes=1000)
    assert e.value.code == "too_large"


@pytest.mark.parametrize(
    "data", [b"\xc1\xff\x00garbage", b"", msgpack.packb([1, 2, 3]), msgpack.packb({"no_type": 1})]
)
def test_malformed_messages_are_refused(data: bytes) -> None:
    with pytest.raises(ProtocolError) as e:
        decode(data)
    assert e.value.code == "bad_message"


def test_text_frames_are_refused() -> None:
    with pytest.raises(ProtocolError, match="binary msgpack"):
        decode('{"type": "sample"}')


def test_unknown_type_names_the_nearest() -> None:
    with pytest.raises(ProtocolError, match="did you mean 'sample'") as e:
        decode(encode({"type": "sampel"}), allowed_types=("hello", "sample"))
    assert e.value.code == "unknown_type"


def _ext(dtype: str, shape: tuple[int, ...], payload: bytes) -> bytes:
    name = dtype.encode()
    header = (
        struct.pack("<B", len(name))
        + name
        + struct.pack("<B", len(shape))
        + struct.pack(f"<{len(shape)}Q", *shape)
    )
    return msgpack.packb({"type": "sample", "x": msgpack.ExtType(1, header + payload)})


def test_disallowed_dtypes_and_bad_arrays_are_refused() -> None:
    with pytest.raises(ProtocolError, match="not allowed") as e:
        decode(_ext("object", (1,), b"\x00" * 8))
    assert e.value.code == "bad_dtype"
    with pytest.raises(ProtocolError, match="needs 32 bytes, got 8") as e:
        decode(_ext("float64", (4,), b"\x00" * 8))
    assert e.value.code == "bad_array"
    with pytest.raises(ProtocolError, match="exceeds"):
        decode(_ext("uint8", (1 << 20, 1 << 10), b""))
    with pytest.raises(ProtocolError, match="cannot send an array of dtype"):
        encode({"type": "x", "a": np.array(["a"], dtype=object)})


def test_version_handshake() -> None:
    check_hello({"type": "hello", "version": PROTOCOL_VERSION})
    with pytest.raises(ProtocolError, match="version 99") as e:
        check_hello({"type": "hello", "version": 99})
    assert e.value.code == "version_mismatch"


def test_check_obs_shapes_dtypes_and_values() -> None:
    specs = {"state": ((39,), "low_dim")}
    ok = check_obs({"state": np.zeros((2, 2, 39), np.float64)}, specs, steps=2)
    assert ok["state"].dtype == np.float32 and ok["state"].shape == (2, 2, 39)
    with pytest.raises(ProtocolError, match=r"shape \(1, 2, 38\), expected \('B', 2, 39\)"):
        check_obs({"state": np.zeros((1, 2, 38), np.float32)}, specs, steps=2)
    with pytest.raises(ProtocolError, match="shape"):
        check_obs({"state": np.zeros((1, 3, 39), np.float32)}, specs, steps=2)
    with pytest.raises(ProtocolError, match="lacks key 'state'"):
        check_obs({"sate": np.zeros((1, 2, 39), np.float32)}, specs, steps=2)
    with pytest.raises(ProtocolError, match="expected a float array"):
        check_obs({"state": np.zeros((1, 2, 39), bool)}, specs, steps=2)
    with pytest.raises(ProtocolError, match="NaN or Inf"):
        bad = np.zeros((1, 2, 39), np.float32)
        bad[0, 1, 3] = np.inf
        check_obs({"state": bad}, specs, steps=2)
    with pytest.raises(ProtocolError, match="uint8 images"):
        check_obs(
            {"image/c": np.zeros((1, 4, 4, 3), np.float32)}, {"image/c": ((4, 4, 3), "rgb")}, steps=None
        )
