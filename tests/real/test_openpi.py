"""openpi's wire protocol: ``robosteer-serve protocol=openpi`` driven by the real ``openpi_client`` package, the
encoding byte-compatible with openpi's ``msgpack_numpy`` both ways, and robosteer's own openpi client."""

from __future__ import annotations

import http.client
from typing import Any

import numpy as np
import pytest
from conftest import STATE_DIM, tiny_policy

from robosteer.real.openpi import NOISE_KEY, OpenpiClient, packb, unpackb
from robosteer.real.protocol import ProtocolError, RemoteError
from robosteer.real.server import PolicyBackend, PolicyServer

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


def test_robosteers_client_samples_batches_with_noise_and_the_server_stays_healthy(
    server: PolicyServer, tiny: Any
) -> None:
    noise = np.random.default_rng(2).normal(size=(3, 8, 4)).astype(np.float32)
    window = {"state": np.stack([obs(i)["state"] for i in range(3)])}  # (B, To, D)
    with OpenpiClient(server.url) as client:
        assert client.noise_shape == (8, 4) and (client.n_obs_steps, client.n_action_steps) == (2, 4)
        chunk = client.sample(window, noise=noise)
        local = tiny.sample(window, noise=noise).numpy()
        assert chunk.shape == (3, 8, 4) and np.allclose(chunk, local, atol=1e-6)
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


def test_dsrl_and_vgps_steer_a_policy_served_over_openpis_wire(server: PolicyServer, tiny: Any) -> None:
    """DSRL decodes its latents through the openpi client exactly as through the local policy, and V-GPS
    re-ranks the remote samples as it ranks local ones (same seed, same critic: the same chunk)."""
    import torch

    from robosteer.policies.steering.dsrl import DSRL
    from robosteer.policies.steering.vgps import VGPSPolicy

    window = {"state": torch.as_tensor(np.stack([obs(i)["state"] for i in range(2)]))}  # (2, To, D)
    torch.manual_seed(0)
    with OpenpiClient(server.url) as client:
        remote = DSRL(client, obs_dim=2 * STATE_DIM, exec_slice=slice(1, 5))
        local = DSRL(tiny, obs_dim=2 * STATE_DIM, exec_slice=slice(1, 5))
        local.load_state_dict(remote.state_dict())
        latent = torch.randn(2, *remote.latent_shape)
        assert torch.allclose(remote.decode(window, latent), local.decode(window, latent), atol=1e-5)

        def critic(
            o: Any, a: torch.Tensor, task_id: Any = None
        ) -> torch.Tensor:  # prefers small first actions
            return -a[:, 0].abs().sum(-1) if a.dim() == 3 else -a.abs().sum(-1)

        kw = {"samples": 4, "n_obs_steps": 2, "n_action_steps": 4, "seed": 7}
        noise = torch.randn(2, 4, 8, 4)  # (B, K, Tp, Da): the same K candidates remotely and locally
        picked_remote = VGPSPolicy(client, critic, **kw).sample(window, noise=noise)
        picked_local = VGPSPolicy(tiny, critic, **kw).sample(window, noise=noise)
        assert picked_remote.shape == (2, 8, 4)
        assert torch.allclose(torch.as_tensor(picked_remote), torch.as_tensor(picked_local), atol=1e-5)
