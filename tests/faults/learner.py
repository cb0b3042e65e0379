"""Planted faults in robot steering's learner process (``real/learner.py``) and the episodes a resumed run
re-sends to it (``real/steering.py``); ``python tests/faults/run.py -k learner``."""

LEARNER = "real/learner.py"
STEERING = "real/steering.py"
T_WORKER = "tests/real/test_learner.py"
T_RAY = "tests/scripts/test_steer.py::test_learner_on_ray_survives_kill_of_the_learner_and_of_the_actor"

FAULTS = [
    {
        "name": "learner: a resent episode is learned twice",
        "file": LEARNER,
        "old": '            if index == self.counters["episodes"]:\n',
        "new": '            if index >= self.counters["episodes"]:\n',
        "tests": [T_WORKER],
    },
    {
        "name": "learner: updates are owed during the warm-up",
        "file": LEARNER,
        "old": '                if c["transitions"] >= self.cfg.warmup_chunks:',
        "new": "                if True:",
        "tests": [T_WORKER],
    },
    {
        "name": "learner: a slice's transitions are not all taken off the backlog",
        "file": LEARNER,
        "old": '                c["backlog"] -= k\n',
        "new": '                c["backlog"] -= min(k, 1)\n',
        "tests": [T_WORKER],
    },
    {
        "name": "learner: weights are published after every update",
        "file": LEARNER,
        "old": '                if c["updates"] - self.published[0] >= self.weights_every:\n',
        "new": "                if True:\n",
        "tests": [T_WORKER],
    },
    {
        "name": "learner: a non-finite loss trains on",
        "file": LEARNER,
        "old": "                if bad:  # nothing past the last good checkpoint is kept",
        "new": "                if False:  # nothing past the last good checkpoint is kept",
        "tests": [T_WORKER],
    },
    {
        "name": "learner: a resumed learner starts its counters from zero",
        "file": LEARNER,
        "old": '            self.counters.update({k: state["counters"][k] for k in self.counters if k in state["counters"]})\n',
        "new": "",
        "tests": [T_WORKER],
    },
    {
        "name": "resume: the checkpoint's last learned episode is re-sent too",
        "file": STEERING,
        "old": "                if index is None or int(index) < first:\n",
        "new": "                if index is None or int(index) + 1 < first:\n",
        "tests": [T_WORKER],
    },
    {
        "name": "resume: a re-sent episode is learned past its judged success",
        "file": STEERING,
        "old": "                    _, arrays, held = judged_episode(arrays, at, held)\n",
        "new": "                    _, _, held = judged_episode(arrays, at, held)\n",
        "tests": [T_WORKER],
    },
    {
        "name": "resume: a re-sent episode's held steps are learned as actions",
        "file": STEERING,
        "old": '                held = held_from_attr(attrs["held_steps"], n) if "held_steps" in attrs else None\n',
        "new": "                held = None\n",
        "tests": [T_WORKER],
    },
    {
        "name": "resume: the episodes recorded after the checkpoint are not re-sent",
        "file": STEERING,
        "old": '        self.resend = recorded_unlearned(record_dir, int(counters["episodes"]), o.keys) if resume else []\n',
        "new": "        self.resend = []\n",
        "tests": [T_RAY],
    },
    {
        "name": "learner=ray: a dead learner's stale copy is saved over its last checkpoint",
        "file": STEERING,
        "old": "        if self.remote is not None and self.remote.dead:\n",
        "new": "        if False:\n",
        "tests": [T_RAY],
    },
]
