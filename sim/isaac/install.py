"""The import guard: which Isaac package a ``sim`` needs, and how to install it when it is missing.

Isaac Sim / Isaac Lab and Isaac Gym are not on this project's package index and need an NVIDIA GPU, so
they are never dependencies of robosteer; ``import sim`` never imports them. Asking for an Isaac backend
without them raises ``IsaacNotInstalledError`` with the install steps and the nearest sim that works.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

ISAAC_SIMS = ("isaaclab", "isaacgym")

_PY = f"Python {sys.version_info.major}.{sys.version_info.minor}"

INSTALL_HELP = {
    "isaaclab": (
        "Isaac Lab runs on Linux (or Windows) x86_64 with an NVIDIA RTX GPU. Isaac Lab 2.2+ needs Isaac Sim 5.x "
        "and Python 3.11 (Isaac Lab 2.0-2.1: Isaac Sim 4.5, Python 3.10). pip: in a fresh venv, "
        '`pip install "isaacsim[all,extscache]==5.1.0"` from NVIDIA\'s pip index, then '
        "`git clone https://github.com/isaac-sim/IsaacLab && cd IsaacLab && ./isaaclab.sh --install`; "
        "conda: `./isaaclab.sh --conda` creates the env first. Guide: "
        "https://isaac-sim.github.io/IsaacLab/main/source/setup/installation/index.html. "
        "Then install robosteer into that env (`pip install --no-deps -e .` plus requirements.txt without torch)."
    ),
    "isaacgym": (
        "Isaac Gym Preview 4 is not on any package index: download IsaacGym_Preview_4_Package.tar.gz from "
        "https://developer.nvidia.com/isaac-gym (NVIDIA account), extract it and run "
        "`pip install -e isaacgym/python` in a Python 3.6-3.8 env (its bindings are built only for those; "
        f"this is {_PY}, and robosteer needs 3.11+, so the official bindings cannot load beside it), with an "
        "NVIDIA GPU and driver 470+; VecTask tasks come from IsaacGymEnvs "
        "(`git clone https://github.com/isaac-sim/IsaacGymEnvs && pip install -e IsaacGymEnvs`). "
        "Import isaacgym before torch (`import isaacgym` first in your script). Isaac Gym is deprecated: "
        "NVIDIA's successor is Isaac Lab (sim='isaaclab')."
    ),
}

# The packages each Isaac sim imports (first one is the one whose absence is reported).
PACKAGES = {"isaaclab": ("isaaclab", "isaaclab_tasks"), "isaacgym": ("isaacgym", "isaacgymenvs")}
# Found but not imported by ``require``: Isaac Lab's task registry imports Isaac Sim's modules, which exist only
# once the simulation app runs (make_isaaclab_env starts it, then imports this).
AFTER_APP = ("isaaclab_tasks",)


class IsaacNotInstalledError(ImportError):
    """An Isaac backend was asked for, but its package is missing (or failed to import) in this env."""

    def __init__(self, sim: str, package: str, cause: BaseException | None = None) -> None:
        nearest = "'metaworld'" if sim == "isaaclab" else "'isaaclab' (or 'metaworld' without a GPU)"
        why = (
            f"failed to import ({type(cause).__name__}: {cause})"
            if cause
            else f"is not installed in this {_PY}"
        )
        self.sim = sim
        self.package = package
        self.message = (
            f"sim={sim!r} needs the package {package!r}, which {why}. {INSTALL_HELP[sim]} "
            f"Nearest valid sim: {nearest}; sim='metaworld' runs Meta-World on MuJoCo."
        )
        super().__init__(self.message, name=package)

    def __str__(self) -> str:
        return self.message


def require(sim: str) -> dict[str, ModuleType]:
    """Import the packages of ``sim`` ("isaaclab" | "isaacgym") but those imported only once the app runs
    (``AFTER_APP``: found, not imported), or raise IsaacNotInstalledError."""
    modules = {}
    for package in PACKAGES[sim]:
        if importlib.util.find_spec(package) is None:
            raise IsaacNotInstalledError(sim, package)
        if package in AFTER_APP:
            continue
        try:
            modules[package] = importlib.import_module(package)
        except ImportError as err:  # e.g. isaacgym imported after torch, or a missing Isaac Sim
            raise IsaacNotInstalledError(sim, package, err) from err
    return modules


def available(sim: str) -> bool:
    """Whether every package of ``sim`` can be found (without importing it)."""
    return all(importlib.util.find_spec(p) is not None for p in PACKAGES.get(sim, ()))
