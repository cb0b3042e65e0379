"""The task registry: the 50 Meta-World v3 tasks, their episode limits and their scripted experts.

Default ``max_episode_steps`` per task, measured (``_TABLE`` below): each task's scripted expert was run
on 100 random initial states (episode seeds ``SeedSequence([12345, k])``, k < 100, Meta-World's limit of
500 steps), recording the step of first success. The default is 200 where 1.25 x the longest successful
expert episode fits in 200, else 1.25 x that length rounded up to a multiple of 50 (at most 500, since
Meta-World raises ValueError past its own 500-step limit). So no expert success of that sample is cut
off: the experts succeed in 4933 of 5000 episodes with these limits, exactly as with 500 steps.
The columns are (max_episode_steps, expert successes out of 100, longest successful episode in steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from robosteer.sim.errors import TaskNotFoundError

METAWORLD_MAX_STEPS = 500  # Meta-World's max_path_length: stepping past it raises ValueError
_SUFFIX = "-goal-observable"

_TABLE: dict[str, tuple[int, int, int]] = {
    "assembly-v3": (200, 100, 99),
    "basketball-v3": (200, 95, 122),
    "bin-picking-v3": (300, 100, 240),
    "box-close-v3": (200, 90, 158),
    "button-press-topdown-v3": (200, 100, 76),
    "button-press-topdown-wall-v3": (200, 100, 65),
    "button-press-v3": (200, 100, 65),
    "button-press-wall-v3": (200, 98, 71),
    "coffee-button-v3": (200, 100, 45),
    "coffee-pull-v3": (200, 100, 89),
    "coffee-push-v3": (200, 100, 62),
    "dial-turn-v3": (200, 100, 114),
    "disassemble-v3": (500, 96, 424),
    "door-close-v3": (200, 100, 77),
    "door-lock-v3": (200, 100, 129),
    "door-open-v3": (200, 98, 126),
    "door-unlock-v3": (200, 100, 82),
    "drawer-close-v3": (200, 100, 79),
    "drawer-open-v3": (200, 100, 93),
    "faucet-close-v3": (200, 100, 69),
    "faucet-open-v3": (200, 100, 67),
    "hammer-v3": (200, 100, 79),
    "hand-insert-v3": (200, 100, 69),
    "handle-press-side-v3": (200, 100, 53),
    "handle-press-v3": (200, 100, 48),
    "handle-pull-side-v3": (200, 100, 116),
    "handle-pull-v3": (200, 100, 127),
    "lever-pull-v3": (200, 100, 137),
    "peg-insert-side-v3": (400, 90, 305),
    "peg-unplug-side-v3": (250, 97, 170),
    "pick-out-of-hole-v3": (200, 100, 128),
    "pick-place-v3": (200, 100, 62),
    "pick-place-wall-v3": (200, 100, 143),
    "plate-slide-back-side-v3": (200, 100, 56),
    "plate-slide-back-v3": (200, 100, 85),
    "plate-slide-side-v3": (200, 100, 54),
    "plate-slide-v3": (200, 100, 54),
    "push-back-v3": (450, 100, 350),
    "push-v3": (200, 100, 74),
    "push-wall-v3": (200, 100, 92),
    "reach-v3": (200, 100, 86),
    "reach-wall-v3": (200, 100, 78),
    "shelf-place-v3": (350, 94, 266),
    "soccer-v3": (200, 90, 129),
    "stick-pull-v3": (500, 91, 430),
    "stick-push-v3": (200, 100, 82),
    "sweep-into-v3": (200, 94, 67),
    "sweep-v3": (200, 100, 108),
    "window-close-v3": (200, 100, 88),
    "window-open-v3": (200, 100, 96),
}


@dataclass(frozen=True)
class TaskSpec:
    """A registered task: its name, default episode limit and the measured expert figures behind it."""

    name: str
    max_episode_steps: int
    expert_successes_of_100: int
    expert_longest_success: int


TASKS: dict[str, TaskSpec] = {name: TaskSpec(name, *row) for name, row in _TABLE.items()}


def list_tasks() -> list[str]:
    """The names of the 50 Meta-World v3 tasks, sorted (e.g. "push-v3")."""
    return sorted(TASKS)


def get_task(name: str) -> TaskSpec:
    """The registered task ``name``; an unknown name raises TaskNotFoundError naming the nearest tasks."""
    spec = TASKS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise TaskNotFoundError(name, TASKS)
    return spec


def make_metaworld_env(name: str) -> Any:
    """Meta-World's goal-observable env of task ``name`` with random (seeded) initial states per reset.

    Meta-World freezes the initial state by default (``_freeze_rand_vec``) and, unfrozen, draws it from
    the global numpy RNG unless ``seeded_rand_vec``: with both switched, ``env.seed(s); env.reset()``
    gives an initial state that depends only on ``s``. Constructed with seed 0, which leaves the global
    numpy RNG as it was (Meta-World saves and restores it).
    """
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE

    env = ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE[get_task(name).name + _SUFFIX](seed=0)
    env._freeze_rand_vec = False
    env.seeded_rand_vec = True
    return env


def expert_policy_class(name: str) -> type:
    """Meta-World's scripted policy class for task ``name`` (``metaworld.policies.ENV_POLICY_MAP``)."""
    from metaworld.policies import ENV_POLICY_MAP

    return ENV_POLICY_MAP[get_task(name).name]
