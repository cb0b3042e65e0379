"""openpi's wire protocol: ``robosteer-serve protocol=openpi`` driven by the real ``openpi_client`` package, the
encoding byte-compatible with openpi's ``msgpack_numpy`` both ways, and robosteer's own openpi client."""

from __future__ import annotations

import http.client
import importlib.util
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
    with OpenpiClient(server.url) as ours, pytest.raises(RemoteError, match="obs lacks key 'state'"):
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


def test_openpis_runtime_drives_a_to2_policy_with_single_observations(tiny: Any, monkeypatch: Any) -> None:
    """openpi's own loop (Runtime + PolicyAgent + ActionChunkBroker + WebsocketClientPolicy), unchanged, sends
    one (D,) observation per query; the server keeps the connection's window. The broker queries every
    ``action_horizon`` steps, so the window holds the observations it sent: [s0, s0], then [s0, s4]."""
    import sys
    import types

    if importlib.util.find_spec("tree") is None:  # dm-tree (openpi-client's dep, not ours): its one call used
        stand_in = types.ModuleType("tree")
        stand_in.map_structure = lambda fn, d: (
            {k: stand_in.map_structure(fn, v) for k, v in d.items()} if (isinstance(d, dict)) else fn(d)
        )
        monkeypatch.setitem(sys.modules, "tree", stand_in)
    from openpi_client import action_chunk_broker
    from openpi_client.runtime import environment, runtime
    from openpi_client.runtime.agents import policy_agent

    states = np.random.default_rng(7).normal(size=(8, STATE_DIM)).astype(np.float32)
    noise = np.random.default_rng(8).normal(size=(8, 4)).astype(np.float32)

    class Env(environment.Environment):
        def __init__(self) -> None:
            self.t, self.actions = 0, []

        def reset(self) -> None:
            self.t = 0

        def is_episode_complete(self) -> bool:
            return self.t >= len(states)

        def get_observation(self) -> dict:
            return {"state": states[self.t], NOISE_KEY: noise}  # one step, as a robot sends it

        def apply_action(self, action: dict) -> None:
            self.actions.append(np.asarray(action["actions"]))
            self.t += 1

    with PolicyServer(PolicyBackend(tiny), port=0, protocol="openpi") as srv:
        client = websocket_client_policy.WebsocketClientPolicy(host="127.0.0.1", port=srv.port)
        env = Env()
        agent = policy_agent.PolicyAgent(action_chunk_broker.ActionChunkBroker(client, action_horizon=4))
        runtime.Runtime(env, agent, [], max_hz=0, num_episodes=1, max_episode_steps=8).run()
    got = np.stack(env.actions)  # (8, 4)
    first = tiny.sample({"state": states[[0, 0]][None]}, noise=noise[None]).numpy()[0]
    second = tiny.sample({"state": states[[0, 4]][None]}, noise=noise[None]).numpy()[0]
    assert got.shape == (8, 4)
    assert np.allclose(got[:4], first[:4], atol=1e-6) and np.allclose(got[4:], second[:4], atol=1e-6)


def test_single_steps_and_windows_share_the_history(server: PolicyServer, tiny: Any) -> None:
    """A window replaces the history; single steps then slide it; __reset__ empties it."""
    noise = np.random.default_rng(3).normal(size=(8, 4)).astype(np.float32)
    s = np.random.default_rng(4).normal(size=(3, STATE_DIM)).astype(np.float32)
    client = websocket_client_policy.WebsocketClientPolicy(host="127.0.0.1", port=server.port)

    def local(rows: list[int]) -> np.ndarray:
        return tiny.sample({"state": s[rows][None]}, noise=noise[None]).numpy()[0]

    out = client.infer({"state": s[[0, 1]], NOISE_KEY: noise})  # robosteer's window (To, D)
    assert np.allclose(out["actions"], local([0, 1]), atol=1e-6)
    out = client.infer({"state": s[2], NOISE_KEY: noise})  # one step after it
    assert np.allclose(out["actions"], local([1, 2]), atol=1e-6)
    out = client.infer({"state": s[0], NOISE_KEY: noise, "__reset__": True})  # a new episode
    assert np.allclose(out["actions"], local([0, 0]), atol=1e-6)


@pytest.mark.parametrize(
    ("request_obs", "message"),
    [
        (
            {"state": "not an array"},
            "bad_obs: obs['state'] is a str ('not an array'), not an array: expected a numeric array of shape "
            f"({STATE_DIM},) (one step; the server keeps the last 2) or (2, {STATE_DIM})",
        ),
        (
            {"state": np.zeros((3, STATE_DIM), np.float32)},
            f"bad_shape: obs['state'] has shape (3, {STATE_DIM}), expected ({STATE_DIM},) (one step; the server "
            f"keeps the last 2) or (2, {STATE_DIM})",
        ),
        (
            {"state": np.zeros(STATE_DIM, np.float32), NOISE_KEY: np.zeros((1, 8, 4), np.float32)},
            f"bad_shape: obs['{NOISE_KEY}'] is (1, 8, 4), expected a float array (8, 4)",
        ),
        ({"image": np.zeros(3, np.float32)}, "bad_obs: obs lacks key 'state': expected keys ['state'], got"),
    ],
)
def test_error_replies_are_in_the_clients_terms(
    server: PolicyServer, request_obs: dict, message: str
) -> None:
    """The key, the shape as the client sent it (no server batch dimension), what was expected."""
    client = websocket_client_policy.WebsocketClientPolicy(host="127.0.0.1", port=server.port)
    with pytest.raises(RuntimeError) as err:
        client.infer(request_obs)
    assert message in str(err.value), str(err.value)
