"""Planted faults in robot_reward=classifier: the success classifier's labels, threshold, error rates and training
(``policies/success_classifier.py``), its judge and the episode it cuts (``real/steering.py``), and the
twin's camera for it (``scripts/steer_robot.py``); ``python tests/faults/run.py -k classifier``."""

CLASSIFIER = "policies/success_classifier.py"
STEERING = "real/steering.py"
T_CLASSIFIER = "tests/policies/test_success_classifier.py"
T_PARTS = "tests/real/test_steering.py"
T_CLI = (
    "tests/scripts/test_steer.py::"
    "test_reward_classifier_reports_its_errors_first_and_pays_its_first_success_frame"
)

FAULTS = [
    {
        "name": "classifier: the first success frame is taken to be the flagged step's own",
        "file": CLASSIFIER,
        "old": "    first = int(flags[0]) + 1 if len(flags) and flags[0] + 1 < n else max(n - final_frames, 0)\n",
        "new": "    first = int(flags[0]) if len(flags) and flags[0] + 1 < n else max(n - final_frames, 0)\n",
        "tests": [T_CLASSIFIER],
    },
    {
        "name": "classifier: the frames just before a success are labelled negative",
        "file": CLASSIFIER,
        "old": "    labels[: max(first - before_success + 1, 0)] = 0\n",
        "new": "    labels[:first] = 0\n",
        "tests": [T_CLASSIFIER],
    },
    {
        "name": "classifier: a tie goes to the lower threshold",
        "file": CLASSIFIER,
        "old": "    best = int(np.flatnonzero(np.isclose(errors, np.min(errors)))[-1])\n",
        "new": "    best = int(np.flatnonzero(np.isclose(errors, np.min(errors)))[0])\n",
        "tests": [T_CLASSIFIER],
    },
    {
        "name": "classifier: the threshold sits on a held-out score, not in the gap",
        "file": CLASSIFIER,
        "old": "    return float((below + candidates[best]) / 2)\n",
        "new": "    return float(candidates[best])\n",
        "tests": [T_CLASSIFIER],
    },
    {
        "name": "classifier: an episode is called a success on its last frame only",
        "file": CLASSIFIER,
        "old": "    called = np.array([bool(np.any(f[0] >= threshold)) for f in frames])\n",
        "new": "    called = np.array([bool(f[0][-1] >= threshold) for f in frames])\n",
        "tests": [T_CLASSIFIER],
    },
    {
        "name": "classifier: the positives of a batch are drawn from the negatives",
        "file": CLASSIFIER,
        "old": "        pos = pools[1][torch.randint(len(pools[1]), (half,), generator=gen)]\n",
        "new": "        pos = pools[0][torch.randint(len(pools[0]), (half,), generator=gen)]\n",
        "tests": [T_CLASSIFIER],
    },
    {
        "name": "classifier judge: the reset's frame can be a success",
        "file": STEERING,
        "old": "        hits = np.flatnonzero(p[1:] >= self.threshold)\n        return int(hits[0]) if len(hits) else None\n",
        "new": "        hits = np.flatnonzero(p >= self.threshold)\n        return int(hits[0]) if len(hits) else None\n",
        "tests": [T_PARTS],
    },
    {
        "name": "classifier judge: a success frame is credited to the step after the one that reached it",
        "file": STEERING,
        "old": "        return int(hits[0]) if len(hits) else None\n",
        "new": "        return int(hits[0]) + 1 if len(hits) else None\n",
        "tests": [T_PARTS],
    },
    {
        "name": "robot steering: a judged success does not end the learner's episode",
        "file": STEERING,
        "old": "    n = at + 1\n",
        "new": '    n = len(arrays["actions"])\n',
        "tests": [T_PARTS],
    },
    {
        "name": "robot_reward=classifier: the twin does not record the classifier's camera",
        "file": "scripts/steer_robot.py",
        "old": "        record = [judge.camera]\n",
        "new": "        record = []\n",
        "tests": [T_CLI],
    },
    {
        "name": "robot_reward=classifier: a resumed run trains a new classifier",
        "file": "scripts/steer_robot.py",
        "old": "    if c.path or own.exists():\n",
        "new": "    if c.path:\n",
        "tests": [T_CLI],
    },
]
