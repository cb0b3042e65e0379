"""Task registry and argument validation: every bad choice names itself and the nearest valid one."""

from __future__ import annotations

import pytest

from robosteer import sim
from robosteer.sim.tasks import METAWORLD_MAX_STEPS, TASKS


def test_registry_matches_metaworld() -> None:
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE
    from metaworld.policies import ENV_POLICY_MAP

    names = sim.list_tasks()
    assert len(names) == 50
    assert names == sorted(names)
    assert set(names) == {k.removesuffix("-goal-observable") for k in ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE}
    assert set(names) == set(ENV_POLICY_MAP)


def test_default_episode_limits_fit_metaworld_and_expert() -> None:
    for spec in TASKS.values():
        assert 1 <= spec.max_episode_steps <= METAWORLD_MAX_STEPS, spec
        assert spec.expert_longest_success < spec.max_episode_steps, spec
    assert sim.get_task("push-v3").max_episode_steps == 200
    assert sim.get_task("push-back-v3").max_episode_steps > 200


def test_unknown_task_names_nearest() -> None:
    with pytest.raises(sim.TaskNotFoundError) as err:
        sim.make_env("push-v2")
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)
    message = str(err.value)
    assert "'push-v2'" in message and "'push-v3'" in message
    assert not message.startswith('"')  # not KeyError's repr-quoted message
    with pytest.raises(KeyError):
        sim.get_task("no-such-task")


@pytest.mark.parametrize(
    ("kwargs", "bad", "nearest"),
    [
        ({"obs": "images"}, "'images'", "'image'"),
        ({"obs": "image", "cameras": ("corner5",)}, "'corner5'", "'corner'"),
        ({"vectorization": "asynch"}, "'asynch'", "'async'"),
        ({"reward": "sparce"}, "'sparce'", "'sparse'"),
    ],
)
def test_invalid_choices_name_value_and_nearest(kwargs: dict, bad: str, nearest: str) -> None:
    with pytest.raises(sim.InvalidChoiceError) as err:
        sim.make_env("reach-v3", **kwargs)
    assert isinstance(err.value, ValueError)
    assert bad in str(err.value) and nearest in str(err.value)


def test_invalid_numbers_are_rejected() -> None:
    with pytest.raises(ValueError, match="max_episode_steps=501"):
        sim.make_env("reach-v3", max_episode_steps=501)
    with pytest.raises(ValueError, match="num_envs=0"):
        sim.make_env("reach-v3", num_envs=0)
    with pytest.raises(ValueError, match="action_chunk=0"):
        sim.make_env("reach-v3", action_chunk=0)
    with pytest.raises(ValueError, match="seed -1"):
        sim.make_env("reach-v3", seed=-1)
