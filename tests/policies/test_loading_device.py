"""``load(run, device=)`` puts every module a run acts with on that device, a steered run's base, actor and
critic included (``robosteer-eval`` / ``robosteer-serve device=``); a value run's critic too. PyTorch's
``meta`` device stands in for a GPU on this CPU-only machine: a module left behind stays on the CPU."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from robosteer.policies.engine import restore_generator
from robosteer.policies.loading import load
from robosteer.policies.value import load_critic

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs_fa6b6cd"


@pytest.mark.parametrize("kind", ["dp", "dsrl", "expo"])
def test_a_run_loads_whole_onto_the_device(kind: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # copying weights into meta tensors is a no-op, and torch says so
        policy = load(RUNS / kind, which="latest", device="meta")
    modules = [
        m for m in (policy, getattr(policy, "base", None), getattr(policy, "agent", None)) if m is not None
    ]
    tensors = [t for m in modules if isinstance(m, torch.nn.Module) for t in (*m.parameters(), *m.buffers())]
    assert len(tensors) > 10 and {t.device.type for t in tensors} == {"meta"}
    if kind != "dp":  # a steered run: base and agent both moved, and its action queue acts there
        assert all(isinstance(m, torch.nn.Module) for m in modules[1:]) and len(modules) == 3
        assert policy.acting.device == torch.device("meta")


def test_a_critic_loads_onto_the_device() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        critic = load_critic(RUNS / "calql", device="meta")
    assert critic.device == torch.device("meta")
    assert {t.device.type for t in (*critic.parameters(), *critic.buffers())} == {"meta"}


def test_a_generator_state_from_another_device_kind_reseeds_with_a_warning(caplog) -> None:
    gen = torch.Generator().manual_seed(3)
    saved = gen.get_state()
    expected = torch.rand(4, generator=gen)
    restore_generator(gen, saved, reseed=99)
    assert torch.equal(torch.rand(4, generator=gen), expected)  # the same kind: exact
    philox = torch.zeros(16, dtype=torch.uint8)  # a CUDA generator's state is 16 bytes
    with caplog.at_level("WARNING"):
        restore_generator(gen, philox, reseed=99)
    assert "another device kind" in caplog.text
    assert torch.equal(
        torch.rand(4, generator=gen), torch.rand(4, generator=torch.Generator().manual_seed(99))
    )
