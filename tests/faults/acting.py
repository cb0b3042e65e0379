"""Planted faults in the one action queue (``policies/acting.py``); ``run.py -k acting``."""

ACTING = "policies/acting.py"
TESTS = ["tests/policies/test_diffusion_policy.py", "tests/policies/test_streaming_policy.py"]


def _f(name: str, old: str, new: str) -> dict:
    return {"name": name, "file": ACTING, "old": old, "new": new, "tests": TESTS}


FAULTS = [
    _f(
        "acting: a chunk executed from row 0 instead of row To − 1",
        "                start = self._first_row(plan)\n",
        "                start = self._first_row(plan) * 0\n",
    ),
    _f(
        "acting: a row reset keeps its observation history",
        "        self.restart[ids] = True\n",
        "        self.restart[ids] = False\n",
    ),
    _f(
        "acting: a row reset keeps its queued actions",
        "        self.qpos[ids] = self.n_action_steps\n",
        "        self.qpos[ids] = self.qpos[ids]\n",
    ),
]
