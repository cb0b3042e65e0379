"""The steering loop's training device: validation of ``device=``, and every tensor where it was asked."""

from __future__ import annotations

import pytest
import torch
from policy_testkit import tiny_steering_base

import robosteer.policies.rl
from robosteer import sim
from robosteer.policies.engine import DEVICES, resolve_device
from robosteer.policies.rl import ReplayBuffer
from robosteer.policies.steering.dsrl import DSRL, DSRLConfig, DSRLRunConfig, run_dsrl
from robosteer.policies.steering.expo import EXPO, EXPOConfig
from robosteer.policies.steering.loop import OnlineRunConfig

torch.set_num_threads(1)
TO, TA, TP, DA, SD = 2, 4, 8, 4, 39


def _base() -> torch.nn.Module:
    return tiny_steering_base(to=TO, tp=TP, ta=TA, state_dim=SD, action_dim=DA)


def _agent(base: torch.nn.Module, device: str | torch.device = "cpu") -> DSRL:
    cfg = DSRLConfig(variant="na", hidden=[32, 32], batch_size=16, noise_critic_steps=1)
    return DSRL(base, obs_dim=TO * SD, exec_slice=slice(TO - 1, TO - 1 + TA), config=cfg, device=device)


def _tensors(agent: torch.nn.Module, buffers: list[ReplayBuffer]) -> list[tuple[str, torch.Tensor]]:
    """Every parameter and buffer of the agent (and DSRL's shared base) and every replay field."""
    out = [(n, t) for n, t in agent.named_parameters()] + [(n, t) for n, t in agent.named_buffers()]
    base = getattr(agent, "base", None)
    if isinstance(base, torch.nn.Module):
        out += [(f"base.{n}", t) for n, t in [*base.named_parameters(), *base.named_buffers()]]
    for i, b in enumerate(buffers):
        out += [(f"replay{i}/{k}", v) for k, v in b.data.items()]
    return out


@pytest.mark.parametrize("bad", ["tpu", "gpu", "cpu:0", "auto:1"])
def test_an_unknown_device_names_the_value_and_the_choices(bad):
    with pytest.raises(ValueError, match=rf"device='{bad}' is not known.*'cpu', 'cuda', 'auto'"):
        resolve_device(bad)
    with pytest.raises(ValueError, match=rf"device='{bad}'"):
        OnlineRunConfig(device=bad)


def test_cuda_without_cuda_is_a_clear_error_and_auto_falls_back_to_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for want in ("cuda", "cuda:0"):
        with pytest.raises(ValueError, match=rf"device='{want}' needs CUDA.*'cpu', 'cuda', 'auto'"):
            resolve_device(want)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    assert DEVICES == ("cpu", "cuda", "auto")


def test_dsrl_on_cpu_keeps_every_tensor_there():
    agent = _agent(_base(), "cpu")
    tensors = _tensors(agent, [])
    assert any(n.startswith("base.") for n, _ in tensors)
    assert all(t.device == torch.device("cpu") for _, t in tensors)


def test_expo_on_cpu_keeps_every_tensor_there():
    cfg = EXPOConfig(hidden=[32, 32], batch_size=8)
    windows = {"obs/state": torch.randn(20, TO, SD), "action": torch.rand(20, TP, DA) * 2 - 1}
    agent = EXPO(_base(), TO * SD, cfg, bc_offline=windows, device="cpu")
    assert agent.bc_offline is not None
    buffers = [agent.bc_online] + ([agent.bc_offline] if agent.bc_offline is not None else [])
    tensors = _tensors(agent, buffers)
    assert tensors and all(t.device == torch.device("cpu") for _, t in tensors)
    assert agent.device == torch.device("cpu")


def test_a_learner_on_another_device_than_the_run_is_refused(tmp_path):
    agent = _agent(_base())
    agent.device = torch.device("meta")  # stands in for a GPU-built learner on this CPU machine
    with pytest.raises(ValueError, match="lives on meta"):
        run_dsrl(agent, None, DSRLRunConfig(device="cpu", progress=False), str(tmp_path))


def test_tiny_dsrl_run_with_device_auto_keeps_agent_and_replays_on_that_device(tmp_path, monkeypatch):
    made: list[ReplayBuffer] = []

    class Recording(ReplayBuffer):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(
        robosteer.policies.rl, "ReplayBuffer", Recording
    )  # run_online imports it at call time
    device = resolve_device("auto")  # cpu on this machine, cuda where there is one
    base = _base()
    agent = _agent(base, device)
    run = DSRLRunConfig(
        env_steps=48,
        warmup_chunks=4,
        eval_every=0,
        checkpoint_every=48,
        log_every=24,
        progress=False,
        device="auto",
    )
    with sim.make_env(
        "reach-v3", num_envs=2, seed=0, action_chunk=TA, obs_history=TO, max_episode_steps=20
    ) as env:
        m = run_dsrl(agent, env, run, str(tmp_path))
    assert m["updates"] > 0 and len(made) == 1 and len(made[0]) > 0
    tensors = _tensors(agent, made)
    assert all(t.device.type == device.type for _, t in tensors), [
        n for n, t in tensors if t.device != device
    ]
    # and it resumes onto the configured device from its (device-independent) checkpoint
    resumed = _agent(base, device)
    run.env_steps = 64
    with sim.make_env(
        "reach-v3", num_envs=2, seed=0, action_chunk=TA, obs_history=TO, max_episode_steps=20
    ) as env:
        m2 = run_dsrl(resumed, env, run, str(tmp_path), resume=True)
    assert m2["updates"] > m["updates"]
    assert all(p.device.type == device.type for p in resumed.parameters())
