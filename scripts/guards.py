"""Checks that refuse a run before it does any work: a device this machine lacks, an output that would replace
a user's data, a logger that cannot start.

They run on the composed config, before Hydra starts the command, before torch is imported and before any
output directory exists, so a refused run costs a second and leaves the tree as it was (exit 2, one line).
Kept apart from ``cli.py``, which checks the overrides' spelling and types: these check what the values mean
on this machine.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import re
import shutil
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from robosteer.policies.data.hdf5 import PARTIAL_SUFFIX
from robosteer.scripts.common import UsageError, dataset_paths, nearest_choice

DEVICES = ("cpu", "cuda", "cuda:N", "auto")
# Commands that write a run directory at ``out`` and what in it marks their own run (robosteer-dataset
# checks its own ``out``, a file or a LeRobot folder, with its ``overwrite=``).
WRITERS = ("collect", "train", "steer", "value", "eval", "deploy")
RUN_MARKERS = ("config.yaml", "metrics.json")


def preflight(config_name: str, cfg: DictConfig) -> None:
    """Raise :class:`UsageError` for the first setting this machine or this output cannot take."""
    if "device" in cfg:
        check_device(str(cfg.device))
    check_inputs(cfg)
    if "sim" in cfg:
        check_sim(config_name, cfg)
    check_logger(cfg)
    if config_name == "steer":
        check_steer_base(cfg)
    if config_name in WRITERS:
        check_output(cfg)


def cuda_available() -> bool:
    """True when a CUDA GPU can be used, told without importing torch (about 2 s): torch is a CUDA build
    (``torch/version.py`` names a CUDA version) and the NVIDIA driver exposes a device."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    version = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    built = (
        re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]", version.read_text(), re.M) if version.is_file() else None
    )
    return built is not None and (Path("/dev/nvidiactl").exists() or Path("/dev/nvidia0").exists())


def check_device(value: str) -> None:
    """``device=`` is one of :data:`DEVICES`, and ``cuda`` only where a GPU is."""
    if value in ("cpu", "auto"):
        return
    if value == "cuda" or re.fullmatch(r"cuda:\d+", value):
        if not cuda_available():
            raise UsageError(
                f"device={value}: no CUDA GPU is usable here (a CPU build of torch, or no NVIDIA driver): "
                "use device=cpu, or device=auto to take a GPU where there is one"
            )
        return
    near = difflib.get_close_matches(value, ["cpu", "cuda", "auto", "gpu"], n=1, cutoff=0.3)
    hint = {"gpu": "cuda"}.get(near[0], near[0]) if near else "cpu"
    raise UsageError(
        f"device={value} is not known: expected one of {' | '.join(DEVICES)}; nearest valid choice: {hint!r}"
    )


# Keys naming a run directory (or one of its checkpoints) that the command reads; besides a path, ``base``
# takes ``scratch`` and every one a served policy at ws://HOST:PORT.
RUN_INPUTS = ("base", "checkpoint", "policy_source", "critic", "embed")
SCRATCH = "scratch"  # base=scratch (the SCRATCH of policies/steering/scratch.py, named here without importing torch)
SERVED = ("ws://", "wss://")  # a served policy's address (what is_url in real/client.py accepts)


def check_inputs(cfg: DictConfig) -> None:
    """The datasets and runs the command reads exist (a typo is found now, not after the run has started)."""
    if cfg.get("dataset") is not None and not OmegaConf.is_missing(cfg, "dataset"):
        dataset_paths(cfg)
    for key in RUN_INPUTS:
        if key not in cfg or OmegaConf.is_missing(cfg, key) or cfg[key] is None:
            continue
        value = str(cfg[key])
        if value == SCRATCH or value.startswith(SERVED) or Path(value).expanduser().exists():
            continue
        name = "policy" if key == "policy_source" else key
        raise UsageError(
            f"{name}={value}: no such run directory or checkpoint (a robosteer-train or -steer run)"
        )


def check_steer_base(cfg: DictConfig) -> None:
    """robosteer-steer: the chosen algorithm can steer this base. EXPO trains a copy of its base, so it needs a
    run directory (not scratch, not a server); preset=reference holds DSRL's values only."""
    algo = "expo" if "expo" in cfg else "dsrl"  # the algo group adds its own key
    base = str(cfg.get("base") or "")
    if algo != "dsrl" and "dsrl" in cfg:  # only preset=reference adds DSRL's keys to another algorithm
        raise UsageError(
            f"preset=reference holds ajwagen/dsrl's values: use it with algo=dsrl, not algo={algo}"
        )
    if not base:
        raise UsageError("steering needs base=<run directory of robosteer-train>, e.g. base=runs/dp")
    if algo == "expo" and base == SCRATCH:
        raise UsageError(
            "algo=expo needs base=<run directory of robosteer-train> (a diffusion or flow policy)"
        )
    if algo == "expo" and base.startswith(SERVED):
        raise UsageError(
            f"base={base}: a served base is steered by algo=dsrl (through its initial noise); EXPO trains "
            "a copy of its base, which a server cannot lend: give EXPO a run directory"
        )


# The commands' sim= choices and Warp's ported tasks (sim/backends.py's COMMAND_SIMS and WARP_TASKS, named here
# without importing the sim package, which imports torch; a test pins the copies).
SIMS = ("metaworld", "warp", "isaaclab")
WARP_TASKS = (
    "reach-v3",
    "push-v3",
    "pick-place-v3",
    "door-open-v3",
    "drawer-open-v3",
    "drawer-close-v3",
    "button-press-topdown-v3",
    "window-open-v3",
    "window-close-v3",
    "peg-insert-side-v3",
)
SIM_PACKAGES = {"warp": "mujoco_warp", "isaaclab": "isaaclab"}
SIM_HOMES = {  # where a simulator's packages live, said when this environment lacks them
    "warp": ".venv-gpu (`make gpu-env`: MuJoCo Warp needs mujoco 4.0, Meta-World pins 3.3.0 here)",
    "isaaclab": "an Isaac Lab environment with an NVIDIA GPU (docs/gpu.md)",
}


def check_sim(config_name: str, cfg: DictConfig) -> None:
    """``sim=``: a simulator this environment has, a task it has ported, options it has (state only, no
    domain randomization, no replay of another sim's episodes)."""
    sim = str(cfg.sim)
    if sim not in SIMS:
        raise UsageError(f"sim={sim!r} is not known: expected one of {list(SIMS)}{nearest_choice(sim, SIMS)}")
    if sim == "metaworld":
        return
    if config_name == "collect" and sim != "warp":
        raise UsageError(
            f"sim={sim}: the scripted experts that collect demos run on Meta-World and its Warp ports only; "
            "collect with sim=metaworld or sim=warp (the datasets train policies for any sim)"
        )
    task = cfg.get("task")
    if sim == "warp" and task is not None and str(task) not in WARP_TASKS:
        raise UsageError(
            f"task={task} is not ported to sim=warp: expected one of {list(WARP_TASKS)}, or sim=metaworld for "
            "every Meta-World task"
        )
    policy = cfg.get("policy")
    if isinstance(policy, DictConfig) and policy.get("name") == "replay":
        raise UsageError(
            f"policy=replay sim={sim}: recorded episodes replay only in the sim that recorded them "
            "(sim=metaworld); initial states differ between sims for the same seed"
        )
    if cfg.get("cameras"):  # obs=pixels / image (configs/obs/): a policy that reads cameras
        raise UsageError(
            f"cameras={list(cfg.cameras)} sim={sim}: this backend renders no cameras; use a state policy"
        )
    randomization = cfg.get("randomization")
    if isinstance(randomization, DictConfig) and str(randomization.get("name", "none")) != "none":
        raise UsageError(
            f"randomization={randomization.name} sim={sim}: domain randomization is Meta-World's"
        )
    if importlib.util.find_spec(SIM_PACKAGES[sim]) is None:
        raise UsageError(
            f"sim={sim} needs the package {SIM_PACKAGES[sim]!r}, which this Python lacks: it lives in "
            f"{SIM_HOMES[sim]}. Nearest valid choice: sim=metaworld"
        )


def _wandb_key_known() -> bool:
    """W&B's own ways of holding a key: ``WANDB_API_KEY`` or a ``~/.netrc`` entry (``wandb login``)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    netrc = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    return netrc.is_file() and "api.wandb.ai" in netrc.read_text(errors="replace")


def check_logger(cfg: DictConfig) -> None:
    """``logger=wandb``: the package is installed and, online, a key is known (else W&B asks at the terminal,
    or fails after the run has started). The mode is ``WANDB_MODE`` (robosteer-value's ``wandb_mode`` first)."""
    for where in ("", "run."):
        if OmegaConf.select(cfg, f"{where}logger", default=None) != "wandb":
            continue
        if importlib.util.find_spec("wandb") is None:
            raise UsageError(
                "logger=wandb needs the wandb package: pip install wandb==0.31.0 (or logger=tensorboard)"
            )
        mode = OmegaConf.select(cfg, f"{where}wandb_mode", default=None) or os.environ.get(
            "WANDB_MODE", "online"
        )
        if mode == "online" and not _wandb_key_known():
            raise UsageError(
                "logger=wandb online, but no W&B key is known: run `wandb login` (or set WANDB_API_KEY), or log "
                "offline with WANDB_MODE=offline"
            )


def _is_run(path: Path) -> bool:
    return any((path / marker).exists() for marker in RUN_MARKERS)


def check_output(cfg: DictConfig) -> None:
    """An ``out`` that holds anything is refused unless ``resume=true`` continues it or ``overwrite=true``
    replaces it; only a robosteer run (it holds ``config.yaml`` or ``metrics.json``) is ever replaced."""
    out = Path(str(cfg.out)).expanduser()
    if not out.exists():
        return
    if not out.is_dir():
        raise UsageError(f"out={cfg.out} is a file, expected a run directory: choose another out=")
    if not any(out.iterdir()):
        return
    partial = sorted(out.glob(f"*{PARTIAL_SUFFIX}"))
    if partial:  # refused, never resumed or replaced: its episodes are all a killed collection kept
        raise UsageError(
            f"{partial[0]} holds an interrupted collection (its finished episodes read with open_dataset): "
            "move or delete it first, or choose another out= (nothing was changed)"
        )
    if bool(cfg.get("resume", False)):
        return
    resume = " continue it with resume=true," if "resume" in cfg else ""
    if not bool(cfg.get("overwrite", False)):
        raise UsageError(
            f"out={cfg.out} already holds files (a previous run?):{resume} replace it with overwrite=true, "
            "or choose another out="
        )
    if not _is_run(out):
        raise UsageError(
            f"out={cfg.out} holds files that are not a robosteer run (no {' or '.join(RUN_MARKERS)}): "
            "overwrite=true replaces only a run; choose an empty or new out="
        )


def replace_output(cfg: DictConfig) -> None:
    """``overwrite=true`` on a run :func:`check_output` accepted: the old run goes, so nothing of it mixes
    with the new one (its checkpoints would otherwise be taken for the new run's)."""
    out = Path(str(cfg.out)).expanduser()
    if (
        bool(cfg.get("overwrite", False))
        and not bool(cfg.get("resume", False))
        and out.is_dir()
        and _is_run(out)
    ):
        shutil.rmtree(out)


def check_all(config_name: str, cfg: Any) -> None:
    """:func:`preflight`, then the replacement ``overwrite=true`` asked for (only once every check passed)."""
    preflight(config_name, cfg)
    if config_name in WRITERS:
        replace_output(cfg)
