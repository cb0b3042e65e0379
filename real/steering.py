"""Online steering on a robot: the learner acts through the deploy control loop, and learns from what the
robot recorded.

Why this shape (SERL's actor loop, with the learner in the same process for now):
- Acting is ``robosteer-deploy``'s :class:`~robosteer.real.runtime.ControlLoop`, unchanged: the same safety
  filter, sync/async execution, command lead for the link's latency, watchdog and fault contract. The
  learner only takes the policy's place (:class:`LearnerActing`): each chunk request gets its warm-up or
  exploration chunk.
- Learning data come from the episode *as recorded* (robomimic layout, what deploy writes): the actions
  the robot applied after the safety filter, cut into chunks of the executed length. For a critic over
  executed actions (DSRL-NA) these are exact transitions whatever the loop did to the plan (a clipped
  action, a hold while the next chunk was planned).
- The learner trains between episodes, while the scene resets, never while the arm waits for a chunk: the
  updates an episode owes run after it, in slices as the simulator loop makes them (``learn_slice``
  transitions per call, its ``num_envs``), so the update ratios match ``robosteer-steer`` without a robot.
- Every episode is written to ``episodes/session_<k>.hdf5`` as it ends (aborted ones too), and
  ``checkpoints/latest`` is saved after it: a fault stops the arm and loses at most the episode it hit;
  ``resume=true`` continues from the last saved episode into a new session file.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robosteer.policies.steering.loop import OnlineLearner, OnlineRun, OnlineRunConfig, with_extras

log = logging.getLogger(__name__)


class RobotSteeringError(RuntimeError):
    """A robot episode failed (the arm is stopped, the episode recorded, the learner saved): resume=true."""


class LearnerActing:
    """The control loop's policy while a learner steers: for each (1, To, ...) window, the learner's warm-up
    (``warm``) or exploration chunk, as the (1, Tp, Da) plan the loop takes its executed rows from.

    The loop must use exactly the learner's executed rows (``RuntimeConfig.max_actions`` = their number):
    the plan's other rows repeat the nearest executed one and are never sent.
    """

    supports_prefix = False  # the learner picks the whole executed chunk

    def __init__(self, learner: OnlineLearner, base: Any, generator: torch.Generator) -> None:
        self.learner, self.generator = learner, generator
        cfg = base.config
        self.n_obs_steps, self.horizon = int(cfg.n_obs_steps), int(cfg.horizon)
        self.n_action_steps = int(cfg.n_action_steps)
        self.noise_shape = tuple(int(d) for d in base.noise_shape)
        self.shape_meta = dict(base.shape_meta)
        self.warm = True
        self.device = torch.device(getattr(learner, "device", "cpu"))

    def sample(
        self, obs: dict[str, np.ndarray], noise: np.ndarray | None = None, prefix: np.ndarray | None = None
    ) -> np.ndarray:
        obs_t = {
            k: torch.as_tensor(np.asarray(v), dtype=torch.float32, device=self.device) for k, v in obs.items()
        }
        act = self.learner.warmup_action if self.warm else self.learner.explore
        with torch.no_grad():
            _, chunk = act(obs_t, self.generator)  # (1, E, Da) executed rows
        rows = chunk[0].cpu().numpy().astype(np.float32)  # (E, Da)
        before = self.n_obs_steps - 1  # the plan's row To - 1 is the first executed one
        after = self.horizon - before - len(rows)
        return np.pad(rows, ((before, max(after, 0)), (0, 0)), mode="edge")[None]  # (1, Tp, Da)

    def reset(self) -> None:
        """Stateless between chunks: every plan depends on its window only."""


class Operator:
    """``reward=operator``: a person says at the end of every episode whether the task succeeded.

    The answer is the episode's only reward (sparse: -1 per chunk, 0 and terminal on the last chunk of a
    success); the robot's own success flag, where it has one, is not read. Reads ``ask`` (``input`` at the
    terminal); a closed terminal stops the run like a robot fault, with everything recorded.
    """

    def __init__(self, ask: Any = input, tell: Any = print) -> None:
        self.ask, self.tell = ask, tell

    def __call__(self, episode: int, summary: dict[str, Any], arrays: dict[str, Any]) -> int | None:
        """The step that ended in success (the last, on a yes), or None."""
        what = f"episode {episode} ended ({summary.get('status')}, {summary.get('steps')} steps)"
        while True:
            try:
                answer = str(self.ask(f"{what}: success? [y/n] ")).strip().lower()
            except EOFError as e:
                raise RobotSteeringError(
                    "reward=operator needs a person at the terminal, and its input is closed"
                ) from e
            if answer in ("y", "yes", "n", "no"):
                return len(arrays["actions"]) - 1 if answer.startswith("y") else None
            self.tell(f"answer y or n (got {answer!r})")

    def confirm_reset(self, episode: int) -> bool:
        """``resets=operator``: before episode k, the person resets the scene (a real arm resets none itself)
        and presses Enter; ``stop`` ends the run cleanly instead (learner saved, metrics written)."""
        while True:
            try:
                answer = str(
                    self.ask(f"episode {episode}: reset the scene, then press Enter (or type stop) ")
                )
            except EOFError as e:
                raise RobotSteeringError(
                    "resets=operator needs a person at the terminal, and its input is closed"
                ) from e
            answer = answer.strip().lower()
            if answer in ("", "y", "yes"):
                return True
            if answer in ("stop", "q", "quit"):
                return False
            self.tell(f"press Enter once the scene is reset, or type stop (got {answer!r})")


class ClassifierJudge:
    """``reward=classifier``: a success classifier reads the episode's recorded camera frames; the first frame
    (after the reset's) it calls a success ends the episode's learning data there, as a success flag would.

    Frame t is the observation after step t - 1, so a success at frame t is step t - 1's. The robot's own
    flag is not read (the twin's success is kept for evaluation only).
    """

    def __init__(
        self, model: Any, threshold: float, camera: str, report: dict[str, Any] | None = None
    ) -> None:
        self.model, self.threshold, self.camera = model, float(threshold), camera
        self.report = report or {}  # its held-out figures (policies/success_classifier.py), for metrics.json

    def __call__(self, episode: int, summary: dict[str, Any], arrays: dict[str, Any]) -> int | None:
        p = self.model.probabilities(np.asarray(arrays["obs"][self.camera]))  # (T,)
        hits = np.flatnonzero(p[1:] >= self.threshold)
        return int(hits[0]) if len(hits) else None


def judged(arrays: dict[str, Any], at: int | None) -> dict[str, Any]:
    """The recorded episode with its terminations replaced by a judge's verdict: step ``at`` ends in success
    (None: no step does); the robot's own flags are not read."""
    dones = np.zeros(len(arrays["actions"]), dtype=bool)  # (T,)
    if at is not None:
        dones[at] = True
    return {**arrays, "dones": dones}


def judged_episode(
    arrays: dict[str, Any], at: int | None, held: list[bool] | None
) -> tuple[dict[str, Any], dict[str, Any], list[bool] | None]:
    """``(recorded, learned, learned held steps)`` of an episode a judge says succeeded at step ``at`` (or
    never): the recording keeps every step with the judge's flag; the learner's episode ends at ``at``, as
    the simulator's would have at its success."""
    recorded = judged(arrays, at)
    if at is None:
        return recorded, recorded, held
    n = at + 1
    cut = {k: v[:n] if isinstance(v, np.ndarray) else v for k, v in recorded.items() if k != "obs"}
    learned = {**cut, "obs": {k: np.asarray(v)[:n] for k, v in recorded["obs"].items()}}
    return recorded, learned, None if held is None else list(held[:n])


def recorded_transitions(
    arrays: dict[str, Any],
    keys: tuple[str, ...],
    n_obs_steps: int,
    exec_steps: int,
    cfg: OnlineRunConfig,
    held: list[bool] | None = None,
) -> dict[str, torch.Tensor]:
    """A recorded episode (``obs`` {key: (T, ...)}, ``actions``, ``rewards``, ``dones``) as the replay's chunk
    transitions: one every ``exec_steps`` applied policy actions from the start, ``taken`` those actions
    (N, E·Da), rewards as ``cfg.reward`` makes them (sparse: the robot's success only).

    ``held`` (T,): the steps after which the arm held (the control loop's ``held_steps``: planning, the lead
    over the link). They are dropped, time passing with no action, their rewards and successes counted with
    the action before them: in sync mode each transition is then one executed chunk, as in simulation.
    """
    from robosteer.policies.rl.offline import episode_transitions

    ep = {**arrays, "next_obs": None}
    if held is not None and not all(held):
        ep = _without_holds(ep, np.asarray(held, dtype=bool))
    t = episode_transitions(
        ep, keys, n_obs_steps, exec_steps, cfg.reward, cfg.reward_scale, stride=exec_steps
    )
    t["taken"] = t.pop("action")
    return {k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in t.items()}


def _without_holds(ep: dict[str, Any], held: np.ndarray) -> dict[str, Any]:
    """The steps with a policy action only: each keeps the rewards and successes up to the next one, and the
    state after it is the next kept step's (the episode's last state after the last one)."""
    kept = np.flatnonzero(~held)  # (K,)
    bounds = np.append(kept, len(held))  # each kept step's span runs to the next kept step
    rewards = ep.get("rewards")
    spans = [slice(a, b) for a, b in itertools.pairwise(bounds)]
    nxt = np.minimum(bounds[1:], len(held) - 1)  # (K,) the state after each kept action
    return {
        "obs": {k: np.asarray(v)[kept] for k, v in ep["obs"].items()},
        "next_obs": {k: np.asarray(v)[nxt] for k, v in ep["obs"].items()},
        "actions": np.asarray(ep["actions"])[kept],
        "rewards": None if rewards is None else np.array([np.sum(rewards[sp]) for sp in spans]),
        "dones": np.array([np.any(ep["dones"][sp]) for sp in spans]),
    }


def session_path(record_dir: Path) -> Path:
    """``session_<k>.hdf5`` with k one past every earlier session's file (finished or cut short)."""
    record_dir.mkdir(parents=True, exist_ok=True)
    k = len({p.name.split(".")[0] for p in record_dir.glob("session_*.hdf5*")})
    return record_dir / f"session_{k:03d}.hdf5"


def run_robot(
    learner: OnlineLearner,
    loop: Any,
    acting: LearnerActing,
    cfg: OnlineRunConfig,
    out_dir: str,
    *,
    exec_steps: int,
    episode_seed: int,
    env_args: dict[str, Any],
    eval_fn: Any = None,
    offline: dict[str, torch.Tensor] | None = None,
    resume: bool = False,
    checkpoint_config: dict[str, Any] | None = None,
    learn_slice: int = 4,
    judge: Any = None,
    confirm_reset: Any = None,
) -> dict[str, Any]:
    """Steer on ``loop``'s robot until ``cfg.env_steps`` robot steps (every recorded step, holds included).

    ``loop``: a :class:`~robosteer.real.runtime.ControlLoop` whose policy is ``acting``; episode k starts from
    ``episode_seed + k`` (the twin's initial state). ``eval_fn`` evaluates the learner's policy (in the
    simulator; a real arm has none). ``judge(k, summary, arrays) -> step | None`` (:class:`Operator`,
    :class:`ClassifierJudge`) gives the step each episode succeeded at instead of the robot's flag.
    ``confirm_reset(k) -> bool`` (:meth:`Operator.confirm_reset`) is asked before episode k; False stops the
    run cleanly. Returns the loop's metrics plus the robot's own figures.
    """
    from robosteer.policies.data import DatasetWriter
    from robosteer.real.runtime import DeployError, episode_attrs

    space = {k: _Space(tuple(s)) for k, s in _window_shapes(acting, learner.obs_keys).items()}
    o = OnlineRun(learner, space, cfg, out_dir, eval_fn, offline, resume, checkpoint_config)
    run, counters, keys = o.run, o.counters, o.keys
    acting.generator = o.gen  # acting draws from the run's generator (checkpointed: an exact resume)
    path = session_path(Path(out_dir) / "episodes")
    counters.setdefault("held_steps", 0)  # checkpointed with the other counters: a resumed run keeps it
    if judge is not None:
        counters.setdefault("judged_agree", 0)
    run.start(o.step)
    with run, DatasetWriter(path, env_args=env_args, split_seed=cfg.seed) as writer:

        def stopped(e: Exception, arrays: dict[str, Any] | None, ep: dict[str, Any]) -> RobotSteeringError:
            """The run's stop on a fault: the episode in flight is recorded, the learner kept as it was."""
            if arrays is not None:
                writer.add_episode(**arrays, attrs=episode_attrs(ep))
            o.save()
            return RobotSteeringError(
                f"{e}; episodes so far are in {path}, the learner is saved as of the last finished "
                f"episode (resume=true continues)"
            )

        if not o.history and eval_fn is not None:
            o.evaluate()
        while o.step < cfg.env_steps and not run.should_stop():
            before = o.step
            acting.warm = not o.learning
            seed = episode_seed + int(counters["episodes"])
            if confirm_reset is not None:
                try:
                    go = confirm_reset(int(counters["episodes"]))
                except RobotSteeringError as e:  # between episodes: nothing in flight to record
                    raise stopped(e, None, {}) from e
                if not go:
                    log.info("stopped by the operator before episode %d", int(counters["episodes"]))
                    break
            try:
                ep = loop.run_episode(seed)
            except DeployError as e:  # the arm is stopped: keep the episode, and the learner as it was
                raise stopped(e, (e.episode or {}).get("arrays"), e.episode or {}) from e
            loop.wait_idle()  # a plan cut short by the episode's end finishes before the learner updates
            arrays = ep.pop("arrays")
            if arrays is None:
                raise RobotSteeringError(f"episode seed={seed} recorded nothing (status {ep.get('status')})")
            success, held_steps = bool(ep["success"]), ep.pop("held_steps", None)
            learned, learned_held = arrays, held_steps
            if judge is not None:  # asked after the arm stopped; the verdict is recorded with the episode
                try:
                    at = judge(int(counters["episodes"]), ep, arrays)
                except RobotSteeringError as e:  # no verdict: the episode is kept unjudged, out of the replay
                    raise stopped(e, arrays, ep) from e
                success = ep["judged_success"] = at is not None
                if at is not None:
                    ep["judged_step"] = at
                arrays, learned, learned_held = judged_episode(arrays, at, held_steps)
                counters["judged_agree"] += int(success == bool(ep["success"]))
            writer.add_episode(**arrays, attrs=episode_attrs(ep))
            t = recorded_transitions(learned, keys, acting.n_obs_steps, exec_steps, cfg, learned_held)
            t = with_extras(learner, t, keys, o.gen)
            t = {k: v.to(o.device) for k, v in t.items()}
            o.buffer.add(**t)
            learner.observe_recorded({k: t[f"obs/{k}"] for k in keys})
            n = len(t["reward"])
            counters["env_steps"] += len(arrays["actions"])
            counters["transitions"] += n
            counters["held_steps"] += int(sum(held_steps or []))
            o.episode_ended(success, float(t["reward"].sum()))
            if o.learning:  # the updates this episode owes, sliced as the simulator loop makes them
                for i in range(0, n, learn_slice):
                    o.learn(min(learn_slice, n - i))
            run.progress(o.step - before, **o.log())
            run.scalar("robot/held_ticks", float(ep.get("held_ticks", 0)), o.step)
            if ep.get("infer_ms_mean") is not None:
                run.scalar("robot/infer_ms", float(ep["infer_ms_mean"]), o.step)
            if eval_fn is not None and run.due(o.step, cfg.eval_every, before):
                o.evaluate()
            o.save()  # after every episode: a fault loses at most the episode it hits
        metrics = o.finish()
    recent = [success for success, _ in o.recent[-50:]]  # this session's
    return {
        **metrics,
        "robot_episodes": int(counters["episodes"]),
        "robot_success_rate_last50": float(np.mean(recent)) if recent else None,
        "robot_held_steps": int(counters["held_steps"]),  # of env_steps (every recorded robot step)
        **({"robot_judged_agree": int(counters["judged_agree"])} if "judged_agree" in counters else {}),
        "recording": str(path),
    }


class _Space:
    """The one attribute of a gym space the replay reads: ``shape``."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape


def _window_shapes(acting: LearnerActing, keys: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """(To, ...) per low-dim key the learner reads, from the base's shape_meta."""
    obs = acting.shape_meta["obs"]
    return {k: (acting.n_obs_steps, *[int(d) for d in obs[k]["shape"]]) for k in keys}
