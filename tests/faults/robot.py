"""Planted faults in steering on a robot (``real/steering.py``, the control loop's held steps in
``real/runtime.py``, the reward switch in ``scripts/steer.py``); ``python tests/faults/run.py -k robot``."""

STEERING = "real/steering.py"
T_PARTS = "tests/real/test_steering.py"
T_CLI = "tests/scripts/test_steer.py::test_dsrl_steers_on_the_sim_twin_survives_its_kill_and_resumes"

FAULTS = [
    {
        "name": "robot steering: the steps the arm held are learned as actions",
        "file": STEERING,
        "old": "    if held is not None and not all(held):\n",
        "new": "    if False:\n",
        "tests": [T_PARTS],
    },
    {
        "name": "robot steering: a hold's success is dropped with it",
        "file": STEERING,
        "old": '"dones": np.array([np.any(ep["dones"][sp]) for sp in spans]),',
        "new": '"dones": np.array([ep["dones"][sp][0] for sp in spans]),',
        "tests": [T_PARTS],
    },
    {
        "name": "robot steering: a transition starts at every recorded step, not at every executed chunk",
        "file": STEERING,
        "old": "ep, keys, n_obs_steps, exec_steps, cfg.reward, cfg.reward_scale, stride=exec_steps",
        "new": "ep, keys, n_obs_steps, exec_steps, cfg.reward, cfg.reward_scale, stride=1",
        "tests": [T_PARTS],
    },
    {
        "name": "robot steering: the learner's chunk lands one row early in the control loop's plan",
        "file": STEERING,
        "old": "        before = self.n_obs_steps - 1  # the plan's row To - 1 is the first executed one\n",
        "new": "        before = self.n_obs_steps - 2\n",
        "tests": [T_PARTS],
    },
    {
        "name": "robot steering: a resumed run records over the first session's file",
        "file": STEERING,
        "old": '    k = len({p.name.split(".")[0] for p in record_dir.glob("session_*.hdf5*")})\n',
        "new": "    k = 0\n",
        "tests": [T_PARTS],
    },
    {
        "name": "robot steering: the control loop marks no step held",
        "file": "real/runtime.py",
        "old": "s + 1 not in self.acted for s in rec.slots",
        "new": "False for s in rec.slots",
        "tests": ["tests/real/test_runtime.py"],
    },
    {
        "name": "robot steering: robot_reward=success leaves the shaped simulator reward in force",
        "file": "scripts/steer_robot.py",
        "old": '        cfg.run.reward = "sparse"\n',
        "new": "        pass\n",
        "tests": [T_CLI],
    },
]

T_OPERATOR = (
    "tests/scripts/test_steer.py::test_reward_operator_pays_the_answers_and_the_twin_runs_to_its_time_limit"
)
FAULTS += [
    {
        "name": "robot steering: the operator's verdict keeps the robot's own terminations",
        "file": STEERING,
        "old": '    dones = np.zeros(len(arrays["actions"]), dtype=bool)  # (T,)\n',
        "new": '    dones = np.asarray(arrays["dones"]).astype(bool).copy()  # (T,)\n',
        "tests": [T_PARTS],
    },
    {
        "name": "robot steering: the operator is not asked again after an answer that is not y or n",
        "file": STEERING,
        "old": "            if answer in choices:\n                return choices[answer]\n",
        "new": "            return choices.get(answer, False)\n",
        "tests": [T_PARTS],
    },
    {
        "name": "robot steering: an unanswered episode is not recorded",
        "file": STEERING,
        "old": "            raise self._stopped(e, arrays, ep) from e\n",
        "new": "            raise self._stopped(e, None, ep) from e\n",
        "tests": [T_OPERATOR],
    },
    {
        "name": "robot steering: under robot_reward=operator the twin still ends episodes at its success",
        "file": "scripts/steer_robot.py",
        "old": "        cfg.robot.driver.end_on_success = False",
        "new": "        cfg.robot.driver.end_on_success = True",
        "tests": [T_OPERATOR],
    },
]

T_RESETS = (
    "tests/scripts/test_steer.py::test_resets_operator_asks_before_each_episode_and_stop_ends_the_run_cleanly"
)
FAULTS += [
    {
        "name": "robot steering: typing stop at a reset does not stop the run",
        "file": STEERING,
        "old": '"stop": False, "q": False, "quit": False}  # resets=operator',
        "new": '"stop": True, "q": True, "quit": True}  # resets=operator',
        "tests": [T_PARTS],
    },
    {
        "name": "robot steering: resets=operator never asks for the scene's reset",
        "file": STEERING,
        "old": "        if self.confirm_reset is not None:\n",
        "new": "        if False:\n",
        "tests": [T_RESETS],
    },
]
