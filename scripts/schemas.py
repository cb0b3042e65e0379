"""Config dataclasses as Hydra structured configs (group ``schema``): one source of defaults, and every key a
plain override.

A config file names its schema in its defaults list (``- /schema@dsrl: dsrl``) and overrides only what it
means to change, with the reason; every field can be set from the command line (``dsrl.tau=0.01``), and a
misspelt or mistyped one is refused by name. ``robosteer-steer --cfg job`` prints the values in force.
"""

from __future__ import annotations

from typing import Any


def register(eval_sources: bool = False) -> None:
    """Store every schema in Hydra's ConfigStore (idempotent; call before composing a config that uses one);
    ``eval_sources``: also robosteer-eval's ``policy`` options (only its process sees them)."""
    from hydra.core.config_store import ConfigStore

    from robosteer.policies.steering.dsrl import DSRLConfig, DSRLRunConfig
    from robosteer.policies.steering.expo import EXPOConfig, EXPORunConfig
    from robosteer.policies.value.calql import CalQLConfig
    from robosteer.policies.value.iql import IQLConfig
    from robosteer.real.steering import ArmEvalConfig

    register_resolvers()
    store = ConfigStore.instance()
    schemas = {
        "dsrl": without(DSRLConfig, TOP_LEVEL["dsrl"]),
        "dsrl_run": without(DSRLRunConfig, TOP_LEVEL["run"] + LIBRARY_ONLY["run"]),
        "expo": EXPOConfig,
        "expo_run": without(EXPORunConfig, TOP_LEVEL["run"] + LIBRARY_ONLY["run"]),
        "calql": CalQLConfig,
        "iql": IQLConfig,
        "arm_eval": ArmEvalConfig,
    }
    for name, node in schemas.items():
        store.store(group="schema", name=name, node=node)
    store.store(group="schema", name="safety", node=safety_overrides())
    store.store(group="schema", name="train", node=train_schema())
    for (group, name), node in policy_nodes().items():  # plain nodes: the policy keys vary by case
        store.store(group=group, name=name, node=node)
    if eval_sources:  # robosteer-eval's policy=<source>: what is evaluated, not an architecture
        for name in EVAL_SOURCES:
            store.store(group="policy", name=name, node={"name": name})


# One name per setting: these fields are typed once, at the top level (``seed=``, not ``run.seed=``), and the
# command hands them to the dataclass (scripts/steer.py); the nested copies are refused naming the top key.
TOP_LEVEL = {"dsrl": ("variant",), "run": ("env_steps", "seed", "device")}
# W&B's own environment variables name these (its convention; one name per setting): the command line has no
# copy, the dataclass field stays for the Python API (unset: the variable, else W&B's default).
ENV_NAMED = {"wandb_project": "WANDB_PROJECT", "wandb_mode": "WANDB_MODE"}
LIBRARY_ONLY = {"run": tuple(ENV_NAMED)}
# Keys a command took before that are now an environment variable: {command: {key: variable}}.
TO_ENVIRONMENT = {
    "steer": {f"run.{k}": v for k, v in ENV_NAMED.items()},
    "train": dict(ENV_NAMED),
}
# Names a command took before, refused in one line that names today's (cli.py): {command: {old: new}}.
RENAMED = {
    "steer": {
        **{f"{group}.{key}": key for group, keys in TOP_LEVEL.items() for key in keys},
        "reward": "robot_reward",  # who judges on a robot; run.reward is the shaping
    },
}
# Keys that record a config group's choice (printed, and saved with the run): chosen with the group, never set.
ECHOES = {
    command: {"randomization.name": "randomization", **extra}
    for command, extra in {
        "train": {"policy.name": "policy", "policy.backbone": "backbone"},
        "steer": {"robot.name": "robot"},
        "deploy": {"robot.name": "robot"},
        "collect": {},
        "eval": {"policy.name": "policy"},
    }.items()
}


def _field_spec(name: str, typ: Any, default: Any) -> tuple[str, Any, Any]:
    """A ``make_dataclass`` field: OmegaConf holds lists, so a tuple default becomes a list factory."""
    import dataclasses

    if isinstance(default, tuple | list):
        kind = list[float] if isinstance(default, tuple) else typ
        return name, kind, dataclasses.field(default_factory=lambda v=default: list(v))
    return name, typ, dataclasses.field(default=default)


def without(cls: type, hidden: tuple[str, ...]) -> type:
    """``cls``'s fields, types and defaults, less ``hidden`` (the keys a command takes at its top level)."""
    import dataclasses
    import typing

    hints, defaults = typing.get_type_hints(cls), cls()
    specs = [
        _field_spec(f.name, hints[f.name], getattr(defaults, f.name))
        for f in dataclasses.fields(cls)
        if f.name not in hidden
    ]
    return dataclasses.make_dataclass(cls.__name__, specs)


def obs_keys(*parts: Any) -> list[str]:
    """``${obs_keys:proprio,${cameras}}`` -> ``[proprio, image/<camera>, ...]``: configs/obs/ names the cameras
    once and the policy's inputs follow (a string is a key as it is, a list holds camera names)."""
    keys: list[str] = []
    for part in parts:
        if isinstance(part, str):
            keys.append(part)
        else:
            keys.extend(f"image/{camera}" for camera in part)
    return keys


def register_resolvers() -> None:
    """OmegaConf resolvers the configs use (idempotent)."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("obs_keys"):
        OmegaConf.register_new_resolver("obs_keys", obs_keys)


# robosteer-eval policy=...: a robosteer-train checkpoint, Meta-World's scripted expert, or a dataset's
# actions replayed from its episode seeds (configs/policy/ holds only model architectures).
EVAL_SOURCES = ("checkpoint", "expert", "replay")


# robosteer-train keys that take a number or one word: {key: word} (typed Any here; cli.py checks the value)
TRAIN_NUMBER_OR_WORD = {"action_noise_std": "auto"}  # auto: policies/train/auto_noise.py chooses σ

# robosteer-train's nested groups of TrainConfig's flat fields: {group: {key: TrainConfig field}}
TRAIN_GROUPS = {"optim": {"lr": "lr", "weight_decay": "weight_decay"}, "ema": {"enable": "ema"}}
# TrainConfig fields the command line leaves at the dataclass's value (the Python API sets them): the
# reference's AdamW and EMA constants (diffusion_policy's), loader and compiler switches, W&B's variables.
TRAIN_HIDDEN = (
    "eval_at_end",
    "find_unused_parameters",
    "betas",
    "eps",
    *(f"ema_{k}" for k in ("power", "max_decay", "min_decay", "update_after_step", "inv_gamma")),
    "num_workers",
    "compile",
    *ENV_NAMED,
)

# robosteer-train's policy keys, sized for the case at hand: a policy's own fields (configs/policy/), the
# backbone's only for the backbone in use (backbone=mlp | unet), the image encoder's only with cameras
# (configs/train_obs/); the rest stay the dataclass's value (the reference's constants, multi-task fields).
BACKBONE_KEYS = {
    "mlp": ("mlp_hidden_dim", "mlp_n_blocks"),
    "unet": ("unet_down_dims", "unet_kernel_size", "unet_n_groups", "unet_cond_predict_scale"),
}
ENCODER_KEYS = ("rgb_arch", "rgb_channels", "rgb_crop")
POLICY_HIDDEN = (
    "backbone",  # chosen by the backbone group
    "mlp_cond_mode",
    "lowdim_hidden",
    "level_embed_dim",
    "rgb_num_kp",
    "rgb_feature_dim",
    "share_rgb_encoder",
    "image_range",
    "task_names",
    "task_embed_dim",
    "beta_schedule",
    "beta_start",
    "beta_end",
    "clip_sample_range",
    "time_embed_scale",
    "prefix_train_prob",  # training-time action conditioning: scored lower than inpainting (README, deploy)
    "prefix_max",
)
# streaming: DDIM only (StreamingConfig.validate)
POLICY_HIDDEN_FOR = {"streaming": ("scheduler",)}


def _defaults_of(
    cls: type, names: tuple[str, ...] | None = None, skip: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``cls()``'s field values by name (tuples as lists, as OmegaConf holds them): a plain node whose keys
    are the command's and whose values are the dataclass's, written nowhere else."""
    import dataclasses

    obj = cls()
    fields = [f.name for f in dataclasses.fields(cls)] if names is None else list(names)
    values = {n: getattr(obj, n) for n in fields if n not in skip}
    return {n: list(v) if isinstance(v, tuple) else v for n, v in values.items()}


def policy_nodes() -> dict[tuple[str, str], dict[str, Any]]:
    """{(group, name): node}: ``policy_schema/<name>``, ``backbone_schema/<mlp|unet>``, ``encoder_schema/rgb``
    (groups of their own: each lands in the ``policy`` package beside the others)."""
    from robosteer.policies.base import PolicyConfig
    from robosteer.policies.registry import get_policy_class

    sized = {k for keys in BACKBONE_KEYS.values() for k in keys} | set(ENCODER_KEYS)
    nodes: dict[tuple[str, str], dict[str, Any]] = {}
    for name in ("diffusion", "flow", "streaming"):
        skip = (*sized, *POLICY_HIDDEN, *POLICY_HIDDEN_FOR.get(name, ()))
        nodes["policy_schema", name] = {
            "name": name,
            **_defaults_of(get_policy_class(name).config_class, skip=tuple(skip)),
        }
    for backbone, keys in BACKBONE_KEYS.items():
        nodes["backbone_schema", backbone] = {"backbone": backbone, **_defaults_of(PolicyConfig, keys)}
    nodes["encoder_schema", "rgb"] = _defaults_of(PolicyConfig, ENCODER_KEYS)
    return nodes


def train_schema() -> type:
    """robosteer-train's loop keys, built from ``TrainConfig`` so each default is written once: its fields as
    they are, the optimizer's under ``optim.``, the EMA's under ``ema.`` (``ema.enable`` is ``ema``)."""
    import dataclasses
    import typing

    from robosteer.policies.train import TrainConfig

    hints = typing.get_type_hints(TrainConfig)
    defaults = TrainConfig()

    def spec(key: str, name: str) -> tuple[str, Any, Any]:
        kind = Any if name in TRAIN_NUMBER_OR_WORD else hints[name]
        return _field_spec(key, kind, getattr(defaults, name))

    grouped = {name for group in TRAIN_GROUPS.values() for name in group.values()}
    top = [
        spec(f.name, f.name)
        for f in dataclasses.fields(TrainConfig)
        if f.name not in grouped | set(TRAIN_HIDDEN)
    ]
    for group, keys in TRAIN_GROUPS.items():
        node = dataclasses.make_dataclass(f"Train{group.title()}", [spec(k, n) for k, n in keys.items()])
        top.append((group, node, dataclasses.field(default_factory=node)))
    return dataclasses.make_dataclass("TrainSchema", top)


def train_config(cfg: Any, **overrides: Any) -> Any:
    """The ``TrainConfig`` of a composed robosteer-train config (the inverse of :func:`train_schema`)."""
    import dataclasses

    from omegaconf import OmegaConf

    from robosteer.policies.train import TrainConfig

    c = OmegaConf.to_container(cfg, resolve=True)
    flat = {
        f.name: c[f.name]
        for f in dataclasses.fields(TrainConfig)
        if f.name in c and f.name not in TRAIN_GROUPS
    }
    for group, keys in TRAIN_GROUPS.items():
        flat.update({name: c[group][k] for k, name in keys.items()})
    return TrainConfig.from_dict({**flat, **overrides})


def safety_overrides() -> dict[str, str]:
    """robosteer-deploy's ``safety`` node: every ``SafetyConfig`` key, unset (``???``) until given, so the
    command-line layer of the filter's settings holds only what is given and a misspelt key is refused."""
    import dataclasses

    from robosteer.real.safety import SafetyConfig

    return {f.name: "???" for f in dataclasses.fields(SafetyConfig)}
