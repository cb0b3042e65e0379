"""openpi's wire protocol: ``robosteer-serve protocol=openpi`` driven by the real ``openpi_client`` package, the
encoding byte-compatible with openpi's ``msgpack_numpy`` both ways, and robosteer's own openpi client."""

from __future__ import annotations

import http.client
from typing import Any

import numpy as np
import pytest
from conftest import STATE_DIM, tiny_policy

from real.openpi import NOISE_KEY, OpenpiClient, packb, unpackb
from real.protocol import ProtocolError, RemoteError
from real.server import PolicyBackend, PolicyServer

openpi_msgpack = pytest.importorskip("openpi_client.msgpack_numpy")
websocket_client_policy = pytest.importorskip("openpi_client.websocket_client_policy")


@pytest.fixture(scope="module")
def tiny() -> Any:
    return tiny_policy()


@pytest.fixture(scope="module")
def server(tiny: Any) -> Any:
    srv = PolicyServer(PolicyBackend(tiny), port=0, protocol="openpi").start()
    yield srv
    srv.stop()


def obs(seed: int = 0) -> dict[str, np.ndarray]:
    return {"state": np.random.default_rng(seed).normal(size=(2, STATE_DIM)).astype(np.float32)}  # (To, D)


def test_the_encoding_is_openpis_both_ways() -> None:
    msg = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "i": np.array([1, -2], np.int64),
        "u8": np.zeros((2, 2, 3), np.uint8),
        "flag": np.bool_(True),
        "x": np.float32(1.5),
        "nested": {"t": [1, 2.5, "s"]},
        "prompt": "pick the cube",
    }
    for data, decode in ((packb(msg), openpi_msgpack.unpackb), (openpi_msgpack.packb(msg), None)):
        got = decode(data) if decode else unpackb(data, 2**20)
        assert np.array_equal(got["a"], msg["a"]) and got["a"].dtype == np.float32
        assert np.array_equal(got["i"], msg["i"]) and got["u8"].shape == (2, 2, 3)
        assert bool(got["flag"]) and float(got["x"]) == 1.5 and got["prompt"] == "pick the cube"
        assert got["nested"] == {"t": [1, 2.5, "s"]}
    assert unpackb(openpi_msgpack.packb({"a": msg["a"]}), 2**20)["a"].flags.writeable  # ours may be edited


def test_decoding_refuses_object_arrays_lies_about_size_and_oversized_frames() -> None:
    fake = {b"__ndarray__": True, b"data": b"\0" * 8, b"dtype": "|O", b"shape": [1]}
    with pytest.raises(ProtocolError, match="cannot travel"):
        unpackb(openpi_msgpack.packb({"a": fake}), 2**20)
    short = {b"__ndarray__": True, b"data": b"\0" * 4, b"dtype": "<f4", b"shape": [2, 2]}
    with pytest.raises(ProtocolError, match=r"does not hold \(2, 2\) values of float32"):
        unpackb(openpi_msgpack.packb({"a": short}), 2**20)
    with pytest.raises(ProtocolError, match="exceeds the 10-byte cap"):
        unpackb(packb({"a": np.zeros(8, np.float32)}), 10)


def test_openpi_client_gets_metadata_and_the_chunk_robosteer_samples(server: PolicyServer, tiny: Any) -> None:
    client = websocket_client_policy.WebsocketClientPolicy(host="127.0.0.1", port=server.port)
    meta = client.get_server_metadata()
    assert meta["protocol"] == "openpi" and meta["noise_key"] == NOISE_KEY
    assert meta["noise_shape"] == [8, 4] and meta["n_obs_steps"] == 2 and meta["n_action_steps"] == 4
    noise = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)
    out = client.infer({**obs(), NOISE_KEY: noise, "prompt": "push the puck"})  # extra keys are ignored
    local = tiny.sample({"state": obs()["state"][None]}, noise=noise[None]).numpy()[0]
    assert out["actions"].shape == (8, 4) and np.allclose(out["actions"], local, atol=1e-6)
    assert out["policy_timing"]["infer_ms"] > 0 and out["server_timing"]["infer_ms"] > 0
    again = client.infer({**obs(), NOISE_KEY: noise})
    assert np.array_equal(again["actions"], out["actions"])  # deterministic given the noise
    assert "prev_total_ms" in again["server_timing"]  # openpi adds it from the second request on


def test_a_bad_request_is_openpis_error_frame_naming_the_problem(server: PolicyServer) -> None:
    client = websocket_client_policy.WebsocketClientPolicy(host="127.0.0.1", port=server.port)
    with pytest.raises(
        RuntimeError, match=r"Error in inference server:\nbad_shape: obs\['state'\] has shape"
    ):
        client.infer({"state": np.zeros((3, STATE_DIM), np.float32)})  # To is 2
    with OpenpiClient(server.url) as ours, pytest.raises(RemoteError, match="obs lacks array 'state'"):
        ours.infer({"image": np.zeros((2, 2), np.float32)})


def test_robosteers_client_samples_with_noise_and_the_server_stays_healthy(
    server: PolicyServer, tiny: Any
) -> None:
    noise = np.random.default_rng(2).normal(size=(8, 4)).astype(np.float32)
    with OpenpiClient(server.url) as client:
        chunk = client.sample(obs(3), noise=noise)
        local = tiny.sample({"state": obs(3)["state"][None]}, noise=noise[None]).numpy()[0]
        assert np.allclose(chunk, local, atol=1e-6)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/healthz")
    assert conn.getresponse().status == 200


def test_token_travels_as_openpis_api_key(tiny: Any) -> None:
    with PolicyServer(PolicyBackend(tiny), port=0, protocol="openpi", token="s3cret") as srv:
        assert (
            websocket_client_policy.WebsocketClientPolicy(
                host="127.0.0.1", port=srv.port, api_key="s3cret"
            ).get_server_metadata()["protocol"]
            == "openpi"
        )
        with pytest.raises(Exception, match="401"):
            websocket_client_policy.WebsocketClientPolicy(host="127.0.0.1", port=srv.port, api_key="wrong")


def test_unknown_protocol_names_the_choices(tiny: Any) -> None:
    with pytest.raises(ValueError, match="protocol='openpy' is not known: expected one of robosteer, openpi"):
        PolicyServer(PolicyBackend(tiny), port=0, protocol="openpy")
