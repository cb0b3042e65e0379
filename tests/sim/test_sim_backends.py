"""The ``sim=`` choice of make_env (sim/backends.py): every refusal is one message naming the choices, made before
the backend is imported. In .venv (no MuJoCo Warp) ``sim='warp'`` says where Warp lives; in .venv-gpu the
same calls build Warp worlds (tests/sim/gpu/test_sim_gpu_commands.py)."""

from __future__ import annotations

import importlib.util

import pytest

from robosteer.sim import make_env
from robosteer.sim.backends import COMMAND_SIMS, SIMS, WARP_TASKS, SimNotInstalledError, check_warp
from robosteer.sim.errors import InvalidChoiceError

NO_WARP = importlib.util.find_spec("mujoco_warp") is None


def test_the_choices_and_a_typo() -> None:
    assert SIMS == ("metaworld", "warp", "isaaclab", "isaacgym")
    assert set(COMMAND_SIMS) == set(SIMS) - {"isaacgym"}  # Isaac Gym cannot load beside Python 3.11
    with pytest.raises(InvalidChoiceError, match=r"unknown sim 'wrap'.*did you mean 'warp'"):
        make_env("push-v3", sim="wrap")


def test_a_task_warp_has_not_ported_is_refused_naming_the_ported_ones() -> None:
    with pytest.raises(InvalidChoiceError) as err:
        make_env("hammer-v3", sim="warp")
    assert "'hammer-v3'" in str(err.value) and all(t in str(err.value) for t in WARP_TASKS)
    with pytest.raises(InvalidChoiceError, match=r"did you mean 'push-v3'"):
        check_warp("push-v2", "cpu")


@pytest.mark.parametrize(
    ("option", "words"),
    [
        ({"obs": "pixels"}, "make_env(obs='pixels') is not valid with sim='warp'"),
        ({"vectorization": "async"}, "make_env(vectorization='async') is not valid with sim='warp'"),
        ({"render": "policy_steps"}, "make_env(render='policy_steps') is not valid with sim='warp'"),
        ({"headless": True}, "make_env(isaac_kwargs=['headless']) is not valid with sim='warp'"),
    ],
)
def test_options_warp_does_not_have_are_refused_not_ignored(option: dict, words: str) -> None:
    with pytest.raises(ValueError) as err:
        make_env("push-v3", sim="warp", **option)
    assert words in str(err.value)


def test_a_bad_device_is_refused_before_the_backend_is_imported() -> None:
    with pytest.raises(InvalidChoiceError, match=r"unknown device for sim='warp' 'gpu'.*\[cpu, cuda\]"):
        check_warp("push-v3", "gpu")
    with pytest.raises(ValueError, match=r"make_env\(device='cuda'\) is not valid with sim='metaworld'"):
        make_env("push-v3", device="cuda")


@pytest.mark.skipif(
    not NO_WARP, reason="MuJoCo Warp is installed here (.venv-gpu): the backend builds instead"
)
def test_without_mujoco_warp_sim_warp_says_where_it_lives() -> None:
    with pytest.raises(SimNotInstalledError) as err:
        make_env("push-v3", sim="warp", num_envs=4)
    msg = str(err.value)
    assert ".venv-gpu" in msg and "make gpu-env" in msg and "Nearest valid choice: sim='metaworld'" in msg
    assert "\n" not in msg
