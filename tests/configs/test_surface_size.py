"""The command surface stays sized for the case at hand: the keys robosteer-steer accepts for DSRL and EXPO in
simulation (<= 60) and robosteer-train for a state and a pixel policy (<= 50). Every key the command accepts
counts (a list is one leaf): the composed config holds exactly those, each accepted as given, and a key of
another case (a robot's, a served base's, the other backbone's, the encoder's without cameras) is refused
naming where it belongs."""

from __future__ import annotations

import pytest
from omegaconf import DictConfig, OmegaConf

from robosteer.scripts.cli import CliError, implied, problems
from robosteer.scripts.schemas import ECHOES

CAPS = {
    ("steer", "algo=dsrl"): 60,
    ("steer", "algo=expo"): 60,
    ("train", "obs=state"): 50,
    ("train", "obs=pixels"): 50,
}
NEEDS = {"steer": ["base=runs/dp"], "train": ["dataset=d.hdf5"]}


def _leaves(node: object, prefix: str = "") -> dict[str, object]:
    if isinstance(node, dict):
        out: dict[str, object] = {}
        for k, v in node.items():
            out.update(_leaves(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


def _value(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list):
        return "[" + ",".join(_value(x) for x in v) + "]"
    return f"'{v}'" if isinstance(v, str) and not v.startswith("${") else str(v)


def _compose(command: str, args: list[str]) -> DictConfig:
    return problems(command, args + implied(command, args))


@pytest.mark.parametrize(("command", "case"), sorted(CAPS))
def test_the_surface_holds_its_cap_and_every_key_in_it_is_accepted(command: str, case: str) -> None:
    args = [case, *NEEDS[command]]
    cfg = _compose(command, args)
    leaves = _leaves(OmegaConf.to_container(cfg, resolve=False))
    assert len(leaves) <= CAPS[command, case], sorted(leaves)
    echoes = ECHOES[command]  # a group's choice, printed and counted, chosen with the group (refused below)
    derived = {k for k, v in leaves.items() if isinstance(v, str) and v.startswith("${")}  # obs_keys of obs=
    given = [f"{k}={_value(v)}" for k, v in leaves.items() if k not in {"base", "dataset", *echoes, *derived}]
    again = _compose(command, [*args, *given])  # every other printed key is one the command takes, as printed
    assert _leaves(OmegaConf.to_container(again, resolve=False)) == leaves


@pytest.mark.parametrize(
    ("command", "args", "words"),
    [
        ("steer", ["robot_reward=operator"], "a run on a robot"),
        ("steer", ["classifier.steps=5"], "a run on a robot"),
        ("steer", ["safety.max_delta=0.1"], "a run on a robot"),
        ("steer", ["learner=ray"], "a run on a robot"),
        ("steer", ["protocol=openpi"], "a served base (base=ws://HOST:PORT)"),
        ("steer", ["scratch_chunk=4"], "base=scratch"),
        ("steer", ["randomization.friction=[0.5,1.5]"], "randomization=default"),
        ("steer", ["dsrl.latent=shared"], "unknown key 'dsrl.latent'"),
        ("steer", ["dsrl.actor_lr_decay=cosine"], "unknown key 'dsrl.actor_lr_decay'"),
        ("steer", ["dsrl.backup_latent=mean"], "unknown key 'dsrl.backup_latent'"),
        ("steer", ["run.wandb_mode=offline"], "W&B's own WANDB_MODE"),
        ("steer", ["dsrl.gama=0.9"], "nearest valid choice: 'dsrl.gamma'"),
        ("train", ["policy.unet_down_dims=[32,64]"], "backbone=unet"),
        ("train", ["policy.backbone=unet"], "records the choice backbone=: choose it with backbone=unet"),
        ("train", ["policy.name=flow"], "choose it with policy=flow"),
        ("train", ["policy.rgb_crop=1.0"], "reads cameras only"),
        ("train", ["policy.beta_start=0.001"], "not a command-line setting"),
        ("train", ["ema.power=0.5"], "nearest valid choice: 'ema.enable'"),
        ("train", ["wandb_project=x"], "W&B's own WANDB_PROJECT"),
        ("train", ["eval_vectorization=async"], "unknown key 'eval_vectorization'"),
    ],
)
def test_a_key_of_another_case_is_refused_naming_where_it_belongs(
    command: str, args: list[str], words: str
) -> None:
    with pytest.raises(CliError) as err:
        _compose(command, [*NEEDS[command], *args])
    assert words in str(err.value)


@pytest.mark.parametrize(
    ("args", "keys"),
    [
        (["base=ws://127.0.0.1:8000"], {"protocol", "token", "policy_timeout_s"}),
        (["base=scratch", "variant=sac"], {"scratch_chunk"}),
        (["base=runs/dp", "robot=sim_twin"], {"robot_reward", "resets", "unsafe_ack", "learner.mode"}),
    ],
)
def test_a_cases_keys_exist_in_that_case(args: list[str], keys: set[str]) -> None:
    leaves = _leaves(OmegaConf.to_container(_compose("steer", args), resolve=False))
    assert keys <= set(leaves)
