"""Policy server + client on loopback: the contract over the wire, and every bad input or fault."""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

import numpy as np
import pytest
import torch
from conftest import STATE_DIM, ServablePolicy, tiny_policy

from robosteer.real.client import PolicyClient, PolicyConnectionError, PolicyTimeout
from robosteer.real.protocol import PROTOCOL_VERSION, RemoteError, encode
from robosteer.real.server import PolicyBackend, PolicyServer


@pytest.fixture(scope="module")
def tiny() -> Any:
    return tiny_policy()


@pytest.fixture(scope="module")
def server(tiny: Any) -> Any:
    srv = PolicyServer(PolicyBackend(tiny), port=0).start()
    yield srv
    srv.stop()


def window(b: int = 1, seed: int = 0) -> dict[str, np.ndarray]:
    return {"state": np.random.default_rng(seed).normal(size=(b, 2, STATE_DIM)).astype(np.float32)}


def test_handshake_and_remote_sample_equals_local(server: PolicyServer, tiny: Any) -> None:
    with PolicyClient(server.url) as client:
        assert client.noise_shape == tuple(tiny.noise_shape) and client.n_obs_steps == 2
        assert client.task == "push-v3" and client.shape_meta["obs"]["state"]["shape"] == [STATE_DIM]
        noise = np.random.default_rng(1).normal(size=(2, *client.noise_shape)).astype(np.float32)
        remote = client.sample(window(2), noise=noise)
        local = tiny.sample(window(2), noise=noise).numpy()
        assert remote.shape == (2, 8, 4) and np.allclose(remote, local, atol=1e-6)
        timing = client.last_timing
        assert timing["infer_ms"] > 0 and timing["round_trip_ms"] >= timing["server_ms"] > 0
        # torch in -> torch out: steering code can wrap the client as a black-box decoder
        out = client.sample({"state": torch.as_tensor(window(1)["state"])}, noise=torch.as_tensor(noise[:1]))
        assert isinstance(out, torch.Tensor) and torch.allclose(out, torch.as_tensor(local[:1]), atol=1e-6)


def test_act_keeps_the_queue_client_side(tiny: Any) -> None:
    backend = PolicyBackend(ServablePolicy())
    with PolicyServer(backend, port=0) as srv, PolicyClient(srv.url) as client:
        obs = {"state": np.zeros((1, STATE_DIM), np.float32)}
        actions = [client.act(obs) for _ in range(8)]
        assert backend.policy.calls == 2  # one round trip per Ta = 4 steps
        # the executed actions are indices To-1 .. To-1+Ta-1 of the chunk
        assert np.allclose([a[0, 0] for a in actions[:4]], 0.1 + 0.01 * np.arange(1, 5))
        client.reset()
        client.act(obs)
        assert backend.policy.calls == 3


def healthz(port: int) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/healthz")
    resp = conn.getresponse()
    return resp.status, json.loads(resp.read())


def test_healthz(server: PolicyServer) -> None:
    status, body = healthz(server.port)
    assert status == 200 and body["status"] == "ok" and body["running_s"] is None and body["queued"] == 0
    assert body["max_batch"] == 1024


def test_bad_requests_get_errors_and_the_connection_survives(server: PolicyServer) -> None:
    with PolicyClient(server.url) as client:
        with pytest.raises(RemoteError, match="bad_shape"):
            client.sample({"state": np.zeros((1, 2, 38), np.float32)})
        with pytest.raises(RemoteError, match="bad_shape"):
            client.sample({"state": np.zeros((1, 3, STATE_DIM), np.float32)})
        with pytest.raises(RemoteError, match="bad_dtype"):
            client.sample({"state": np.zeros((1, 2, STATE_DIM), bool)})
        with pytest.raises(RemoteError, match="noise"):
            client.sample(window(), noise=np.zeros((1, 3, 4), np.float32))
        with pytest.raises(RemoteError, match="unknown_type"):
            client._roundtrip({"type": "teleport"}, expect="x")
        # raw garbage bytes on the same socket
        client._ws.send(b"\xc1garbage")
        from robosteer.real.protocol import decode

        assert decode(client._ws.recv(timeout=5))["code"] == "bad_message"
        assert client.sample(window()).shape == (1, 8, 4)  # still serving


def test_oversized_message_closes_the_connection(tiny: Any) -> None:
    with (
        PolicyServer(PolicyBackend(tiny), port=0, max_message_bytes=4096) as srv,
        PolicyClient(srv.url) as client,
        pytest.raises(PolicyConnectionError, match="closed the connection"),
    ):
        client.sample({"state": np.zeros((64, 2, STATE_DIM), np.float32)})


def test_other_protocol_version_is_refused(server: PolicyServer) -> None:
    with pytest.raises(PolicyConnectionError, match=f"version {PROTOCOL_VERSION + 1}"):
        PolicyClient(server.url, version=PROTOCOL_VERSION + 1)


def test_token_auth(tiny: Any) -> None:
    with pytest.raises(ValueError, match="token"):
        PolicyServer(PolicyBackend(tiny), host="0.0.0.0", port=0)
    with PolicyServer(PolicyBackend(tiny), port=0, token="s3cret") as srv:
        with pytest.raises(PolicyConnectionError, match="unauthorized"):
            PolicyClient(srv.url, token="wrong")
        with PolicyClient(srv.url, token="s3cret") as client:
            assert client.ping() > 0


def test_policy_returning_nan_is_never_forwarded() -> None:
    policy = ServablePolicy()
    policy.nan_after = 0
    with (
        PolicyServer(PolicyBackend(policy), port=0) as srv,
        PolicyClient(srv.url) as client,
        pytest.raises(RemoteError, match="policy_nan"),
    ):
        client.sample(window())


def test_stalled_policy_times_out_and_healthz_still_answers() -> None:
    policy = ServablePolicy()
    policy.stall_after = 0
    with PolicyServer(PolicyBackend(policy), port=0) as srv, PolicyClient(srv.url, timeout_s=0.3) as client:
        t0 = time.perf_counter()
        with pytest.raises(PolicyTimeout, match=r"did not answer 'sample' within 0\.3 s"):
            client.sample(window())
        assert time.perf_counter() - t0 < 2.0
        status, body = healthz(srv.port)  # still answers while the worker is busy
        assert status == 200 and body["status"] == "busy"
        policy.release.set()


def test_server_dying_raises_connection_error(tiny: Any) -> None:
    srv = PolicyServer(PolicyBackend(tiny), port=0).start()
    client = PolicyClient(srv.url, timeout_s=2.0)
    assert client.sample(window()).shape == (1, 8, 4)
    srv.stop()
    with pytest.raises(PolicyConnectionError):
        client.sample(window())
    with pytest.raises(PolicyConnectionError):
        PolicyClient(srv.url, connect_timeout_s=1.0)


def test_client_refuses_non_websocket_urls() -> None:
    with pytest.raises(ValueError, match="ws://"):
        PolicyClient("http://127.0.0.1:1")


def test_hello_must_come_first(server: PolicyServer) -> None:
    from websockets.sync.client import connect

    from robosteer.real.protocol import decode

    with connect(server.url) as ws:
        ws.send(encode({"type": "sample", "obs": window()}))
        reply = decode(ws.recv(timeout=5))
        assert reply["type"] == "error" and reply["code"] == "unknown_type"
    assert PROTOCOL_VERSION == 1


def test_steering_wraps_a_remote_policy_and_steered_policies_serve(server: PolicyServer, tiny: Any) -> None:
    """DSRL treats the client as a black-box noise decoder; a DSRL SteeredPolicy can itself be served."""
    from robosteer.policies.steering.dsrl import DSRL, SteeredPolicy

    torch.manual_seed(0)
    with PolicyClient(server.url) as client:
        remote_agent = DSRL(client, obs_dim=2 * STATE_DIM, exec_slice=slice(1, 5))
        local_agent = DSRL(tiny, obs_dim=2 * STATE_DIM, exec_slice=slice(1, 5))
        local_agent.load_state_dict(remote_agent.state_dict())
        obs = {"state": torch.as_tensor(window(2)["state"])}
        latent = torch.randn(2, *remote_agent.latent_shape)
        assert torch.allclose(remote_agent.decode(obs, latent), local_agent.decode(obs, latent), atol=1e-5)

    steered = SteeredPolicy(tiny, local_agent).eval()
    backend = PolicyBackend(steered)
    assert backend.metadata()["steered"] and backend.noise_shape == tuple(tiny.noise_shape)
    with PolicyServer(backend, port=0) as srv, PolicyClient(srv.url) as client:
        w = window(1)
        want = steered.sample({"state": torch.as_tensor(w["state"])}).numpy()
        assert np.allclose(client.sample(w), want, atol=1e-5)  # the actor picks the noise server-side


def test_prefix_over_the_wire(server: PolicyServer, tiny: Any) -> None:
    """A chunk conditioned on committed actions (async real-time chunking) samples remotely as locally."""
    with PolicyClient(server.url) as client:
        assert client.supports_prefix
        noise = np.random.default_rng(1).normal(size=(1, *client.noise_shape)).astype(np.float32)
        prefix = np.full((1, 3, 4), 0.2, np.float32)
        remote = client.sample(window(), noise=noise, prefix=prefix)
        local = tiny.sample(window(), noise=noise, prefix=prefix).numpy()
        assert np.allclose(remote, local, atol=1e-6) and np.allclose(remote[0, :3], 0.2, atol=1e-5)
        with pytest.raises(RemoteError, match=r"bad_shape.*prefix"):
            client.sample(window(), prefix=np.zeros((1, 9, 4), np.float32))  # longer than Tp = 8
        with pytest.raises(RemoteError, match=r"bad_value.*prefix"):
            client.sample(window(), prefix=np.full((1, 2, 4), np.nan, np.float32))
        assert client.sample(window()).shape == (1, 8, 4)  # still serving
    srv = PolicyServer(PolicyBackend(ServablePolicy()), port=0).start()  # a policy without prefixes
    try:
        with PolicyClient(srv.url) as client:
            assert not client.supports_prefix
            with pytest.raises(ValueError, match="does not take a prefix"):
                client.sample(window(), prefix=np.zeros((1, 2, 4), np.float32))
            msg = {"type": "sample", "obs": window(), "prefix": np.zeros((1, 2, 4), np.float32)}
            with pytest.raises(RemoteError, match="does not take a 'prefix'"):
                client._roundtrip(msg, expect="sample_result")
    finally:
        srv.stop()


# ---------------------------------------------------------------- many clients on one server
class SlowPolicy(ServablePolicy):
    """Takes ``per_row_s`` per batch row (sleeping, as a GPU wait does); action[:, :, 0] = the row's
    state[-1, 0], so a reassembled batch shows its row order."""

    def __init__(self, per_row_s: float) -> None:
        super().__init__()
        self.per_row_s = per_row_s
        self.per_call_s = 0.0

    def sample(self, obs: dict[str, np.ndarray], noise: Any = None) -> np.ndarray:
        out = super().sample(obs, noise)
        time.sleep(self.per_call_s + self.per_row_s * out.shape[0])
        out[:, :, 0] = np.asarray(obs["state"])[:, -1, :1]
        return out


def test_a_max_size_batch_does_not_starve_a_small_request() -> None:
    """Client A sends the largest batch allowed (~2 s of compute); client B's one-row requests meanwhile are
    answered well within deploy's policy_timeout_s (2 s), and A's batch comes back whole and in order."""
    policy = SlowPolicy(per_row_s=0.002)
    with PolicyServer(PolicyBackend(policy), port=0) as srv, PolicyClient(srv.url, timeout_s=30) as a:
        rows = 1024  # the default max_batch
        big = {"state": np.zeros((rows, 2, STATE_DIM), np.float32)}
        big["state"][:, :, 0] = np.arange(rows)[:, None]
        out: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: out.setdefault("a", a.sample(big)))
        thread.start()
        deadline = time.time() + 10
        while policy.calls == 0 and time.time() < deadline:
            time.sleep(0.005)
        with PolicyClient(srv.url, timeout_s=5) as b:
            waits = []
            for _ in range(3):
                t0 = time.perf_counter()
                assert b.sample(window()).shape == (1, 8, 4)
                waits.append(time.perf_counter() - t0)
        assert max(waits) < 1.0, waits  # one slice of A (64 rows, ~0.13 s) at most, not A's ~2 s
        assert thread.is_alive(), "A's batch finished before B was measured: the test proves nothing"
        status, body = healthz(srv.port)
        assert status == 200 and body["status"] == "busy" and body["running_s"] is not None
        thread.join(30)
        assert out["a"].shape == (rows, 8, 4) and np.array_equal(out["a"][:, 0, 0], np.arange(rows))


def test_batch_cap_refuses_larger_batches_with_a_clear_error(tiny: Any) -> None:
    with (
        PolicyServer(PolicyBackend(tiny), port=0, max_batch=8, slice_rows=3) as srv,
        PolicyClient(srv.url) as client,
    ):
        with pytest.raises(RemoteError, match=r"too_large: batch of 9 rows exceeds max_batch=8"):
            client.sample(window(9))
        with pytest.raises(RemoteError, match="max_batch=8"):
            client._roundtrip(
                {"type": "act", "obs": {"state": np.zeros((9, STATE_DIM), np.float32)}}, "act_result"
            )
        # a batch of 8 is served in slices of 3 and equals the local result
        noise = np.random.default_rng(2).normal(size=(8, *client.noise_shape)).astype(np.float32)
        remote = client.sample(window(8), noise=noise)
        assert np.allclose(remote, tiny.sample(window(8), noise=noise).numpy(), atol=1e-5)
    with PolicyServer(PolicyBackend(tiny), port=0) as srv, PolicyClient(srv.url) as client:
        with pytest.raises(RemoteError, match="max_batch=1024"):  # the default cap
            client.sample(window(1025))
        assert client.sample(window()).shape == (1, 8, 4)  # still serving


def test_act_and_reset_state_is_per_connection() -> None:
    """One client's reset (or its acts) never touches another client's action queue."""
    policy = tiny_policy()
    plans: list[int] = []

    class CountingPlanner:  # the policy's own planner, counting chunk plans
        def plan(self, obs, rows):
            plans.append(1)
            return policy.plan(obs, rows)

        def reset_rows(self, rows):
            policy.reset_rows(rows)

    policy.acting = policy.acting.fork(CountingPlanner())
    obs = {"state": np.zeros((1, STATE_DIM), np.float32)}

    def act(client: PolicyClient) -> np.ndarray:
        return client._roundtrip({"type": "act", "obs": obs}, expect="act_result")["actions"]

    with PolicyServer(PolicyBackend(policy), port=0) as srv:
        with PolicyClient(srv.url) as a, PolicyClient(srv.url) as b:
            act(a)
            assert len(plans) == 1
            act(b)
            assert len(plans) == 2  # B plans its own chunk instead of eating A's queue
            b.reset()
            for _ in range(3):  # Ta = 4: A's queue still holds 3 actions
                act(a)
            assert len(plans) == 2
            act(a)
            assert len(plans) == 3
            a.reset()
            act(a)
            assert len(plans) == 4
            assert healthz(srv.port)[1]["connections"] == 2
        deadline = time.time() + 5
        while srv._act_policies and time.time() < deadline:
            time.sleep(0.01)
        assert not srv._act_policies  # closed connections leave no state behind
    assert policy.acting.hist is None  # the shared policy's own act state was never used


def test_healthz_reports_a_stuck_worker() -> None:
    policy = ServablePolicy()
    policy.stall_after = 0
    with (
        PolicyServer(PolicyBackend(policy), port=0, stuck_after_s=0.2) as srv,
        PolicyClient(srv.url, timeout_s=0.1) as client,
    ):
        with pytest.raises(PolicyTimeout):
            client.sample(window())
        time.sleep(0.25)
        status, body = healthz(srv.port)
        assert status == 503 and body["status"] == "stuck" and body["running_s"] >= 0.2
        policy.release.set()
        deadline = time.time() + 5
        while healthz(srv.port)[1]["status"] != "ok" and time.time() < deadline:
            time.sleep(0.02)
        assert healthz(srv.port)[0] == 200


def test_invalid_tokens_are_refused_with_a_reason(tiny: Any) -> None:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    from robosteer.real.protocol import decode

    with (
        PolicyServer(PolicyBackend(tiny), port=0, token="s3cret") as srv,
        PolicyClient(srv.url, token="s3cret") as ok,
    ):
        with pytest.raises(PolicyConnectionError, match="unauthorized: wrong token"):
            PolicyClient(srv.url, token="sécret")  # non-ASCII
        for token in (None, [1, 2], b"\xff"):
            with connect(srv.url) as ws:
                ws.send(encode({"type": "hello", "version": PROTOCOL_VERSION, "token": token}))
                assert decode(ws.recv(timeout=5))["code"] == "unauthorized"
                with pytest.raises(ConnectionClosed) as closed:
                    ws.recv(timeout=5)
                assert closed.value.rcvd is not None and closed.value.rcvd.reason.startswith("unauthorized")
        assert ok.ping() > 0  # the authorised client is untouched
    with PolicyServer(PolicyBackend(tiny), port=0, token="pässwörd") as srv:  # a non-ASCII server token
        with PolicyClient(srv.url, token="pässwörd") as client:
            assert client.ping() > 0
        with pytest.raises(PolicyConnectionError, match="unauthorized"):
            PolicyClient(srv.url, token="password")
    with pytest.raises(ValueError, match="non-empty string"):
        PolicyServer(PolicyBackend(tiny), port=0, token="")


def test_concurrent_small_requests_share_a_forward_pass_and_get_their_own_rows() -> None:
    """Clients' one-row requests queued together run as one batched call; each reply holds its own row."""
    policy = SlowPolicy(per_row_s=0.0)
    policy.per_call_s = 0.05
    clients, requests = 8, 5
    with PolicyServer(PolicyBackend(policy), port=0) as srv:
        errors: list[str] = []
        barrier = threading.Barrier(clients)

        def run(i: int) -> None:
            with PolicyClient(srv.url, timeout_s=20) as c:
                barrier.wait(10)
                for r in range(requests):
                    w = np.zeros((1, 2, STATE_DIM), np.float32)
                    w[0, :, 0] = 1000 * i + r
                    got = c.sample({"state": w})[0, 0, 0]
                    if got != 1000 * i + r:
                        errors.append(f"client {i} request {r} got row {got}")

        threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors, errors[:5]
    assert policy.calls < clients * requests / 2, policy.calls  # merged, not one call per request
