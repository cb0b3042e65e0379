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

import contextlib
import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robosteer.policies.steering.loop import OnlineLearner, OnlineRun, OnlineRunConfig
from robosteer.real.learner import LearnerError, ShapeOnly, held_attr
from robosteer.real.robot import RobotError
from robosteer.real.runtime import DeployError, episode_attrs

log = logging.getLogger(__name__)

# the counters a robot run keeps beside the loop's (checkpointed with them)
ARM_COUNTERS = (
    "held_steps",
    "eval_env_steps",
    "eval_episodes",
    "eval_blocks",
    "safety_aborts",
    "consecutive_aborts",
    "intervention_steps",
)
SIMULATOR_PACKAGES = ("mujoco", "metaworld", "mujoco_warp", "warp")  # what a simulator env would load


def simulators_imported() -> list[str]:
    """The simulator packages this process has imported: none, on a real arm (its metrics and the learner's
    figures report it, so a run proves the arm alone was judged)."""
    import sys

    return sorted({m.split(".")[0] for m in sys.modules} & set(SIMULATOR_PACKAGES))


EVAL_SEED_OFFSET = 1_000_000  # evaluation scenes: apart from the training episodes' (episode_seed + k)


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
        self.embedding = learner_embedding(learner)  # a pixel base: the learner reads its embedding
        cfg = base.config
        self.n_obs_steps, self.horizon = int(cfg.n_obs_steps), int(cfg.horizon)
        self.n_action_steps = int(cfg.n_action_steps)
        self.noise_shape = tuple(int(d) for d in base.noise_shape)
        self.shape_meta = dict(base.shape_meta)
        self.warm = True
        self.evaluating: Any = (
            None  # a policy judged on the arm (``sample(windows) -> (1, Tp, Da)``), or None
        )
        self.device = torch.device(getattr(learner, "device", "cpu"))

    def sample(
        self, obs: dict[str, np.ndarray], noise: np.ndarray | None = None, prefix: np.ndarray | None = None
    ) -> np.ndarray:
        obs_t = {k: _tensor(v, self.device) for k, v in obs.items()}  # images stay uint8
        if self.evaluating is not None:  # an evaluation block: the policy's own plan, nothing explored
            with torch.no_grad():
                return np.asarray(torch.as_tensor(self.evaluating.sample(obs_t)).cpu(), dtype=np.float32)
        if self.embedding is not None:  # the raw windows seen as the learner sees them: the base's embedding
            obs_t = {k: _tensor(v, self.device) for k, v in self.embedding.transform(obs).items()}
        act = self.learner.warmup_action if self.warm else self.learner.explore
        with torch.no_grad():
            _, chunk = act(obs_t, self.generator)  # (1, E, Da) executed rows
        rows = chunk[0].cpu().numpy().astype(np.float32)  # (E, Da)
        before = self.n_obs_steps - 1  # the plan's row To - 1 is the first executed one
        after = self.horizon - before - len(rows)
        return np.pad(rows, ((before, max(after, 0)), (0, 0)), mode="edge")[None]  # (1, Tp, Da)

    def reset(self) -> None:
        """Stateless between chunks: every plan depends on its window only."""


def _tensor(value: Any, device: torch.device) -> torch.Tensor:
    """A window as a tensor on ``device``: float32, but uint8 images as they are (the base's encoder scales them)."""
    arr = np.asarray(value)
    return torch.as_tensor(arr if arr.dtype == np.uint8 else arr.astype(np.float32), device=device)


def learner_embedding(learner: Any) -> Any:
    """The frozen base's embedding a learner reads instead of camera windows (a pixel base), or None."""
    from robosteer.policies.steering.embedding import BaseEmbedding

    base = getattr(learner, "base", None)
    return base if isinstance(base, BaseEmbedding) else None


def recorded_keys(learner: Any) -> tuple[str, ...]:
    """The recorded observation keys a learner's transitions are made from: the base's raw windows when it
    reads them through its embedding (the camera frames), else the keys it reads."""
    embedding = learner_embedding(learner)
    return tuple(embedding.raw_keys) if embedding is not None else tuple(learner.obs_keys)


class Operator:
    """``robot_reward=operator``: a person says at the end of every episode whether the task succeeded.

    The answer is the episode's only reward (sparse: -1 per chunk, 0 and terminal on the last chunk of a
    success); the robot's own success flag, where it has one, is not read. Reads ``ask`` (``input`` at the
    terminal); a closed terminal stops the run like a robot fault, with everything recorded.
    """

    def __init__(self, ask: Any = input, tell: Any = print) -> None:
        self.ask, self.tell = ask, tell

    def __call__(self, episode: int | str, summary: dict[str, Any], arrays: dict[str, Any]) -> int | None:
        """The step that ended in success (the last, on a yes), or None."""
        what = f"episode {episode}" if isinstance(episode, int) else str(episode)
        what = f"{what} ended ({summary.get('status')}, {summary.get('steps')} steps)"
        yes = self._choose(f"{what}: success? [y/n] ", YES_NO, "answer y or n", "robot_reward=operator")
        return len(arrays["actions"]) - 1 if yes else None

    def confirm_reset(self, episode: int | str, seed: int | None = None) -> bool:
        """``resets=operator``: before an episode (``episode``: its index, or a label such as ``evaluation
        3/50``), the person resets the scene (a real arm resets none itself) and presses Enter; ``stop`` ends
        the run cleanly instead (learner saved, metrics written). ``seed``: the scripted harness's scene."""
        what = f"episode {episode}" if isinstance(episode, int) else str(episode)
        prompt = f"{what}: reset the scene, then press Enter (or type stop) "
        retry = "press Enter once the scene is reset, or type stop"
        return self._choose(prompt, GO_STOP, retry, "resets=operator")

    def _choose(self, prompt: str, choices: dict[str, bool], retry: str, who: str) -> bool:
        """Ask until the answer is one of ``choices`` and return its meaning; a closed terminal stops the run."""
        while True:
            try:
                answer = str(self.ask(prompt)).strip().lower()
            except EOFError as e:
                raise RobotSteeringError(
                    f"{who} needs a person at the terminal, and its input is closed"
                ) from e
            if answer in choices:
                return choices[answer]
            self.tell(f"{retry} (got {answer!r})")


YES_NO = {"y": True, "yes": True, "n": False, "no": False}  # robot_reward=operator: did the episode succeed?
GO_STOP = {"": True, "y": True, "yes": True, "stop": False, "q": False, "quit": False}  # resets=operator


class ClassifierJudge:
    """``robot_reward=classifier``: a success classifier reads the episode's recorded camera frames; the first frame
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


# The lowest chunk reward of each reward scheme (policies/rl/offline.py's episode_transitions): sparse pays
# -1 per chunk; shaped sums (r / scale - 1) / Ta over Meta-World's rewards r >= 0; dense sums r >= 0.
WORST_CHUNK_REWARD = {"sparse": -1.0, "shaped": -1.0, "dense": 0.0}


def abort_reward(reward: str, gamma: float) -> float:
    """The target of the chunk a safety violation ended: terminal, with the worst return any continuation
    could have had, ``r_min / (1 - gamma)``, so aborting is never cheaper than continuing. (Ours: chosen
    over bootstrapping it as a time-out, which values the abort as the state it stopped in.)"""
    return WORST_CHUNK_REWARD[reward] / (1.0 - float(gamma))


def recorded_transitions(
    arrays: dict[str, Any],
    keys: tuple[str, ...],
    n_obs_steps: int,
    exec_steps: int,
    cfg: OnlineRunConfig,
    held: list[bool] | None = None,
    gamma: float | None = None,
    obs_transform: Any = None,
) -> dict[str, torch.Tensor]:
    """A recorded episode (``obs`` {key: (T, ...)}, ``actions``, ``rewards``, ``dones``) as the replay's chunk
    transitions: one every ``exec_steps`` applied policy actions from the start, ``taken`` those actions
    (N, E·Da), rewards as ``cfg.reward`` makes them (sparse: the robot's success only).

    ``held`` (T,): the steps after which the arm held (the control loop's ``held_steps``: planning, the lead
    over the link). They are dropped, time passing with no action, their rewards and successes counted with
    the action before them: in sync mode each transition is then one executed chunk, as in simulation.

    ``arrays["safety_abort"]``: a safety violation ended the episode; its last chunk is terminal at
    :func:`abort_reward` (``gamma``: the learner's discount). ``arrays["interventions"]`` (T,): the steps a
    person commanded; ``person`` (N,) bool then marks the chunks holding one (for the demonstrations).
    ``obs_transform``: raw windows → what the learner reads (a pixel base's ``BaseEmbedding.transform``).
    """
    from robosteer.policies.rl.offline import episode_transitions

    ep = {**arrays, "next_obs": None}
    person = arrays.get("interventions")
    person = None if person is None else np.asarray(person, dtype=bool)  # (T,)
    if held is not None and not all(held):
        kept = ~np.asarray(held, dtype=bool)
        ep = _without_holds(ep, ~kept)
        person = None if person is None else person[kept]
    t = episode_transitions(
        ep,
        keys,
        n_obs_steps,
        exec_steps,
        cfg.reward,
        cfg.reward_scale,
        obs_transform=obs_transform,  # a pixel base's embedding of the recorded frames
        stride=exec_steps,
    )
    t["taken"] = t.pop("action")
    if arrays.get("safety_abort") and len(t["reward"]):
        if gamma is None:
            raise ValueError("a safety-aborted episode's target needs the learner's gamma")
        t["reward"][-1], t["done"][-1] = abort_reward(cfg.reward, gamma), 1.0
    out = {k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in t.items()}
    if person is not None:
        starts = np.arange(len(t["reward"])) * exec_steps  # (N,) each chunk's first kept step
        out["person"] = torch.from_numpy(
            np.array([person[a : a + exec_steps].any() for a in starts], dtype=bool)
        )
    return out


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


Recorded = tuple[dict[str, Any], list[bool] | None, dict[str, Any]]  # (learned arrays, held steps, attrs)


def recorded_learned(
    record_dir: Path, keys: tuple[str, ...], first: int = 0, upto: int | None = None
) -> dict[int, Recorded]:
    """The recorded training episodes with index ``first <= k < upto``, as the learner learned them: ``{k:
    (learned arrays, learned held steps, the recording's attributes)}``. Episodes without an index (an
    evaluation, one cut short by a fault, one a judge gave no verdict on) were never the learner's."""
    from robosteer.policies.data import open_dataset
    from robosteer.real.learner import held_from_attr

    found: dict[int, Recorded] = {}
    files = sorted(record_dir.glob("session_*.hdf5*"), key=lambda p: p.name.split(".")[0])
    for path in files:
        with open_dataset(path) as f:
            for ep in f.episodes(obs_keys=list(keys)):
                attrs = ep["attrs"]
                index = attrs.get("episode_index")
                if index is None or int(index) < first or (upto is not None and int(index) >= upto):
                    continue
                arrays = {k: ep[k] for k in ("obs", "actions", "rewards", "dones")}
                if ep.get("interventions") is not None:
                    arrays["interventions"] = np.asarray(ep["interventions"], dtype=bool)
                n = len(arrays["actions"])
                held = held_from_attr(attrs["held_steps"], n) if "held_steps" in attrs else None
                at = None
                if "judged_success" in attrs:
                    at = int(attrs["judged_step"]) if attrs["judged_success"] else None
                    _, arrays, held = judged_episode(arrays, at, held)
                if attrs.get("safety_abort") and at is None:
                    arrays["safety_abort"] = True
                found[int(index)] = (arrays, held, attrs)
    return found


def recorded_unlearned(record_dir: Path, first: int, keys: tuple[str, ...]) -> list[Recorded]:
    """The recorded episodes from index ``first`` on, in order (:func:`recorded_learned`). A resumed run
    re-sends them: a learner stopped (or killed) after they were recorded had not saved them."""
    found = recorded_learned(record_dir, keys, first)
    missing = [i for i in range(first, first + len(found)) if i not in found]
    if missing:
        raise RobotSteeringError(
            f"{record_dir}: recorded episode {missing[0]} is missing while later ones are there; "
            "the recordings were edited, resume from a copy of the run as it was"
        )
    return [found[i] for i in sorted(found)]


@dataclass
class ArmEvalConfig:
    """Evaluation on the arm itself (a real arm, or the twin in real mode): blocks of judged episodes that act
    with the learner's evaluation policy, explore nothing and take no interventions, counted apart from the
    training env steps. The final figure is the final block's, never the best periodic block's."""

    episodes: int = 10  # ours: each periodic block (every run.eval_every training env steps)
    final_episodes: int = 50  # ours: the final block, the final figure with its Wilson interval (>= 50)

    def __post_init__(self) -> None:
        if int(self.episodes) < 1 or int(self.final_episodes) < 1:
            raise ValueError(
                f"arm_eval.episodes={self.episodes}, arm_eval.final_episodes={self.final_episodes} are not "
                "valid: expected both >= 1"
            )


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
    split: Any = None,
    arm_eval: ArmEvalConfig | None = None,
    base: Any = None,
    demo_room: int = 0,
) -> dict[str, Any]:
    """Steer on ``loop``'s robot until ``cfg.env_steps`` robot steps (every recorded step, holds included).

    ``arm_eval``: evaluate on the arm instead of through ``eval_fn`` (a real arm has no simulator); ``base``
    (with it): the frozen base, measured first on a block of ``final_episodes`` judged episodes (None: not).
    ``demo_room``: space in the demonstration replay for a person's intervention chunks.

    ``loop``: a :class:`~robosteer.real.runtime.ControlLoop` whose policy is ``acting``; episode k starts from
    ``episode_seed + k`` (the twin's initial state). ``eval_fn`` evaluates the learner's policy (in the
    simulator; a real arm has none). ``judge(k, summary, arrays) -> step | None`` (:class:`Operator`,
    :class:`ClassifierJudge`) gives the step each episode succeeded at instead of the robot's flag.
    ``confirm_reset(k) -> bool`` (:meth:`Operator.confirm_reset`) is asked before episode k; False stops the
    run cleanly. ``split``: a :class:`~robosteer.real.learner.LearnerConfig` with ``mode="ray"`` trains in a
    learner process of its own (real/learner.py); otherwise the updates run here between episodes. Returns
    the loop's metrics plus the robot's own figures.
    """
    return _RobotRun(
        learner,
        loop,
        acting,
        cfg,
        out_dir,
        exec_steps=exec_steps,
        episode_seed=episode_seed,
        env_args=env_args,
        eval_fn=eval_fn,
        offline=offline,
        resume=resume,
        checkpoint_config=checkpoint_config,
        learn_slice=learn_slice,
        judge=judge,
        confirm_reset=confirm_reset,
        split=split,
        arm_eval=arm_eval,
        base=base,
        demo_room=demo_room,
    ).run()


class _RobotRun:
    """One :func:`run_robot`: its episodes acted on the robot, judged, recorded and learned, in that order.

    Every fault stops the run the same way (:meth:`_stopped`): the episode in flight is recorded, the learner
    saved as it was, and a :class:`RobotSteeringError` says where things are for ``resume=true``.
    """

    def __init__(
        self,
        learner: OnlineLearner,
        loop: Any,
        acting: LearnerActing,
        cfg: OnlineRunConfig,
        out_dir: str,
        *,
        exec_steps: int,
        episode_seed: int,
        env_args: dict[str, Any],
        eval_fn: Any,
        offline: dict[str, torch.Tensor] | None,
        resume: bool,
        checkpoint_config: dict[str, Any] | None,
        learn_slice: int,
        judge: Any,
        confirm_reset: Any,
        split: Any,
        arm_eval: ArmEvalConfig | None,
        base: Any,
        demo_room: int,
    ) -> None:
        shapes = _window_shapes(acting, learner.obs_keys)
        obs_space = {k: ShapeOnly(s) for k, s in shapes.items()}
        self.arm_eval, self.base, self.acting = arm_eval, base, acting
        if arm_eval is not None:  # judged blocks on the arm, not the simulator's episodes
            eval_fn = self._arm_block
        o = self.o = OnlineRun(
            learner, obs_space, cfg, out_dir, eval_fn, offline, resume, checkpoint_config, demo_room
        )
        self.loop, self.episode_seed, self.env_args = loop, episode_seed, env_args
        self.judge, self.confirm_reset = judge, confirm_reset
        counters = self.counters = o.counters
        record_dir = Path(out_dir) / "episodes"
        keys = recorded_keys(learner)  # what the recordings are read back with
        self.resend = recorded_unlearned(record_dir, int(counters["episodes"]), keys) if resume else []
        self.path = session_path(record_dir)
        for key in ARM_COUNTERS:  # checkpointed with the other counters: a resumed run keeps them
            counters.setdefault(key, 0)
        if judge is not None:
            counters.setdefault("judged_agree", 0)
        self.learning = _Learning(o, acting, shapes, exec_steps, learn_slice, split, offline, demo_room)
        if resume and demo_room:  # the demonstration replay is rebuilt, not checkpointed
            self.learning.rebuild_demos(recorded_learned(record_dir, keys, 0, int(counters["episodes"])))
        self.figures: dict[str, list[float]] = {"staleness": [], "tick_late_ms_p99": [], "waited_s": []}
        self.writer: Any = None  # the session's DatasetWriter, open while the run is
        self.final_block = False  # the next arm block is the final one
        self.stopped = False  # the operator typed stop
        self.last_block: dict[str, Any] | None = (
            None  # the last arm block's figures (the final one's, at the end)
        )

    def run(self) -> dict[str, Any]:
        """Re-send what the checkpoint lacks, then one episode after another until the step budget is spent;
        the final evaluation and save see every update."""
        from robosteer.policies.data import DatasetWriter

        o, run, learning = self.o, self.o.run, self.learning
        run.start(o.step)
        try:
            with (
                run,
                DatasetWriter(
                    self.path,
                    env_args=self.env_args,
                    split_seed=o.cfg.seed,
                    attrs={"fps": self.loop.robot.data_rate_hz},
                ) as writer,
            ):
                self.writer = writer
                self._resend()
                base_eval = self._base_block()
                if not o.history and o.eval_fn is not None and self.arm_eval is None:
                    o.evaluate()
                while o.step < o.cfg.env_steps and not run.should_stop() and not self.stopped:
                    if not self._episode():
                        break
                with self._learner_faults():
                    learning.pull()  # the final evaluation and save see every update the learner made
                self._final_block()
                metrics = o.finish()
        finally:
            learning.close()
        return self._metrics(metrics) | ({"base_eval": base_eval} if base_eval is not None else {})

    # ------------------------------------------------------------------ evaluation on the arm
    def _base_block(self) -> dict[str, Any] | None:
        """The frozen base on the arm, before anything is learned: the figure the lift is measured from."""
        if self.arm_eval is None or self.base is None:
            return None
        self.final_block = True  # the base's figure is a final-size block
        try:
            return self._arm_block(self.base, label="base")
        finally:
            self.final_block = False

    def _final_block(self) -> None:
        """On the arm: the final figure, a block of ``final_episodes`` with the final policy (only when the
        budget was spent; a stopped run gets none). The loop's own final evaluation is then skipped."""
        o = self.o
        if self.arm_eval is None or o.eval_fn is None:
            return
        if o.step >= o.cfg.env_steps and not self.stopped and not o.run.interrupted:
            with self._learner_faults():
                self.learning.sync_weights()
            self.final_block = True
            o.evaluate()
        o.eval_fn = None

    def _arm_block(
        self, policy: Any, episodes: int | None = None, label: str = "evaluation"
    ) -> dict[str, Any]:
        """A block of judged episodes on the arm acting with ``policy`` (no exploration, no interventions),
        recorded with an ``evaluation`` attribute and never learned; its success rate and counts."""
        cfg = self.arm_eval
        n = episodes or (cfg.final_episodes if self.final_block else cfg.episodes)
        block = int(self.counters["eval_blocks"])
        teleop, self.loop.teleop = self.loop.teleop, None
        self.acting.evaluating = policy
        outcomes: list[bool] = []
        try:
            for i in range(n):
                seed = self.episode_seed + EVAL_SEED_OFFSET + 1000 * block + i
                if not self._reset_confirmed(f"{label} {i + 1}/{n}", seed):
                    self.stopped = True
                    break
                outcomes.append(self._judged_block_episode(seed, block, label))
        finally:
            self.acting.evaluating, self.loop.teleop = None, teleop
        self.counters["eval_blocks"] += 1
        done = len(outcomes)
        self.last_block = {
            "success_rate": float(np.mean(outcomes)) if done else 0.0,
            "episodes": done,
            "successes": int(sum(outcomes)),
            "block": block,
            "final": self.final_block,
            "of": label,
        }
        return dict(self.last_block)

    def _judged_block_episode(self, seed: int, block: int, label: str) -> bool:
        """One evaluation episode: acted, judged, recorded (never learned); whether it succeeded."""
        ep, arrays = self._act(seed)
        ep.pop("held_steps", None), ep.pop("interventions", None)
        success = bool(ep["success"])
        if self.judge is not None:
            arrays, _, _, _ = self._judged(f"{label} (block {block})", ep, arrays, None)
            success = bool(ep["judged_success"])
        attrs = {**episode_attrs(ep), "evaluation": block, "evaluation_of": label}
        self.writer.add_episode(**arrays, attrs=attrs)
        self.counters["eval_env_steps"] += len(arrays["actions"])
        self.counters["eval_episodes"] += 1
        self._count_abort(ep)
        return success

    def _count_abort(self, ep: dict[str, Any]) -> None:
        """Safety aborts in a row stop the run after ``safety.max_consecutive_aborts`` (the arm is stopped,
        everything recorded and saved); any episode that ends otherwise resets the count."""
        counters = self.counters
        if not ep.get("safety_abort"):
            counters["consecutive_aborts"] = 0
            return
        counters["safety_aborts"] += 1
        counters["consecutive_aborts"] += 1
        limit = int(self.loop.safety.config.max_consecutive_aborts)
        log.warning("safety abort (%d in a row): %s", counters["consecutive_aborts"], ep["safety_abort"])
        if counters["consecutive_aborts"] >= limit:
            saved = self.learning.save()
            raise RobotSteeringError(
                f"{limit} episodes in a row were aborted for safety (safety.max_consecutive_aborts={limit}; the "
                f"last: {ep['safety_abort']}); the arm is stopped: check the cell, then resume=true ({saved})"
            )

    def _stopped(self, e: Exception, arrays: dict[str, Any] | None, ep: dict[str, Any]) -> RobotSteeringError:
        """The run's stop on a fault: the episode in flight is recorded, the learner kept as it was."""
        if arrays is not None:
            self.writer.add_episode(**arrays, attrs=episode_attrs(ep))
        saved = self.learning.save()
        return RobotSteeringError(f"{e}; episodes so far are in {self.path}, {saved} (resume=true continues)")

    @contextlib.contextmanager
    def _learner_faults(self) -> Iterator[None]:
        """The learner's process failing between episodes stops the run as a robot fault would (nothing
        in flight: a recorded episode it had not learned is re-sent by resume=true)."""
        try:
            yield
        except LearnerError as e:
            raise self._stopped(e, None, {}) from e

    def _learned(
        self, arrays: dict[str, Any], held: list[bool] | None, success: bool, agree: bool | None
    ) -> None:
        """One episode into the learner (and the counters), as it ended or as recorded before."""
        counters = self.counters
        ret = self.learning.add(int(counters["episodes"]), arrays, held)
        counters["env_steps"] += len(arrays["actions"])
        counters["held_steps"] += int(sum(held or []))
        if agree is not None:
            counters["judged_agree"] += int(agree)
        self.o.episode_ended(success, ret)

    def _resend(self) -> None:
        """The episodes recorded after the checkpoint, learned again: nothing recorded is lost."""
        for arrays, held, attrs in self.resend:
            judged_ok = attrs.get("judged_success")
            success = bool(attrs.get("success")) if judged_ok is None else bool(judged_ok)
            robot_ok = attrs.get("robot_success_any", attrs.get("success"))
            agree = None if judged_ok is None else bool(judged_ok) == bool(robot_ok)
            with self._learner_faults():
                self._learned(arrays, held, success, agree)
        if self.resend:
            log.info("re-sent %d recorded episodes the checkpoint had not learned", len(self.resend))
            self.learning.save()

    def _episode(self) -> bool:
        """One episode: acted, judged, recorded, learned, logged. False: the operator stopped the run."""
        before = self.o.step
        with self._learner_faults():
            version = self.learning.before_episode()
        index = int(self.counters["episodes"])
        if not self._reset_confirmed(index, self.episode_seed + index):
            self.stopped = True
            return False
        ep, arrays = self._act(self.episode_seed + index)
        success, held_steps = bool(ep["success"]), ep.pop("held_steps", None)
        person = ep.pop("interventions", None)
        if self.loop.teleop is not None:  # per step: the action after it was a person's
            arrays["interventions"] = np.asarray(person, dtype=bool)
        learned_arrays, learned_held, agree = arrays, held_steps, None
        if self.judge is not None:  # asked after the arm stopped; the verdict is recorded with the episode
            arrays, learned_arrays, learned_held, agree = self._judged(index, ep, arrays, held_steps)
            success = ep["judged_success"]
        if ep.get("safety_abort") and not success:  # its last chunk: terminal at the worst return
            learned_arrays = {**learned_arrays, "safety_abort": True}
        attrs = {  # the learner's index: a resume re-sends what its checkpoint lacks
            **episode_attrs(ep),
            "episode_index": index,
            "held_steps": held_attr(held_steps, len(arrays["actions"])),
        }
        self.writer.add_episode(**arrays, attrs=attrs)
        with self._learner_faults():
            self._learned(learned_arrays, learned_held, success, agree)
        self.counters["intervention_steps"] += int(ep.get("intervention_steps") or 0)
        self._log(ep, before, version)
        self._count_abort(ep)
        self._evaluate_and_save(before)
        return True

    def _reset_confirmed(self, episode: int | str, seed: int) -> bool:
        """``resets=operator``: the person has reset the scene for ``episode`` (False: they stopped)."""
        if self.confirm_reset is not None:
            try:
                go = self.confirm_reset(episode, seed)
            except (RobotSteeringError, RobotError) as e:  # between episodes: nothing in flight to record
                raise self._stopped(e, None, {}) from e
            if not go:
                log.info("stopped by the operator before %s", episode)
                return False
        return True

    def _act(self, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """The control loop's episode from ``seed``: its summary and its recorded arrays."""
        try:
            ep = self.loop.run_episode(seed)
        except DeployError as e:  # the arm is stopped: keep the episode, and the learner as it was
            raise self._stopped(e, (e.episode or {}).get("arrays"), e.episode or {}) from e
        self.loop.wait_idle()  # a plan cut short by the episode's end finishes before the learner updates
        arrays = ep.pop("arrays")
        if arrays is None:
            raise RobotSteeringError(f"episode seed={seed} recorded nothing (status {ep.get('status')})")
        return ep, arrays

    def _judged(
        self, index: int | str, ep: dict[str, Any], arrays: dict[str, Any], held: list[bool] | None
    ) -> tuple[dict[str, Any], dict[str, Any], list[bool] | None, bool]:
        """``(recorded, learned, learned held steps, agree)`` of episode ``index`` by the judge's verdict,
        which goes into ``ep`` (the recording's attributes) beside the robot's own."""
        try:
            at = self.judge(index, ep, arrays)
        except RobotSteeringError as e:  # no verdict: kept unjudged, out of the replay
            raise self._stopped(e, arrays, ep) from e
        success = ep["judged_success"] = at is not None
        if at is not None:
            ep["judged_step"] = at
        # the robot's own verdict, kept beside the judge's: did it report success at any step
        # (its flag at the time limit says only where things ended up)
        ep["robot_success_any"] = bool(np.asarray(arrays["dones"]).any())
        recorded, learned, learned_held = judged_episode(arrays, at, held)
        return recorded, learned, learned_held, success == ep["robot_success_any"]

    def _log(self, ep: dict[str, Any], before: int, version: int | None) -> None:
        """The episode's figures: progress, the robot's timing, and (Ray) how far the acting weights trailed."""
        o, run, figures = self.o, self.o.run, self.figures
        run.progress(o.step - before, **o.log())
        run.scalar("robot/held_ticks", float(ep.get("held_ticks", 0)), o.step)
        if self.loop.teleop is not None:  # the share of this episode's steps a person commanded
            rate = float(ep.get("intervention_steps") or 0) / max(int(ep.get("steps") or 0), 1)
            run.scalar("robot/intervention_rate", rate, o.step)
            self.figures.setdefault("intervention_rate", []).append(rate)
        for key in ("infer_ms_mean", "tick_late_ms_p99"):
            if ep.get(key) is not None:
                run.scalar(f"robot/{key.removesuffix('_mean')}", float(ep[key]), o.step)
        if ep.get("tick_late_ms_p99") is not None:
            figures["tick_late_ms_p99"].append(float(ep["tick_late_ms_p99"]))
        if version is not None:  # the learner's updates past the weights this episode acted with
            figures["staleness"].append(float(self.counters["updates"] - version))
            run.scalar("learner/staleness_updates", figures["staleness"][-1], o.step)
            run.scalar("learner/updates_per_s", float(self.learning.remote.last["updates_per_s"]), o.step)
            with self._learner_faults():
                figures["waited_s"].append(self.learning.wait_backlog())

    def _evaluate_and_save(self, before: int) -> None:
        """Evaluate when due (with the newest weights), and save: locally after every episode, Ray when due."""
        o, learning = self.o, self.learning
        if o.eval_fn is not None and o.run.due(o.step, o.cfg.eval_every, before):
            with self._learner_faults():
                learning.sync_weights()
            o.evaluate()
        if learning.remote is None or o.run.due(o.step, o.cfg.checkpoint_every, before):
            with self._learner_faults():  # local: after every episode, a fault loses at most its episode
                learning.save()

    def _metrics(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """The loop's metrics plus the robot's own figures."""
        counters = self.counters
        return {
            **metrics,
            "robot_episodes": int(counters["episodes"]),
            # the loop's last RECENT = 50 episodes
            "robot_success_rate_last50": metrics["train_success_rate"],
            "robot_held_steps": int(counters["held_steps"]),  # of env_steps (every recorded robot step)
            # counted apart from env_steps (the training steps): the arm's evaluation blocks
            "eval_env_steps": int(counters["eval_env_steps"]),
            "eval_episodes_on_arm": int(counters["eval_episodes"]),
            "safety_aborts": int(counters["safety_aborts"]),
            "intervention_steps": int(counters["intervention_steps"]),  # counted in env_steps
            "intervention_rate": self.figures.get("intervention_rate", []),  # per training episode
            **({"final_block": self.last_block} if self.last_block and self.last_block["final"] else {}),
            # on the arm nothing is evaluated at step 0 (the base's block stands for it)
            **(
                {"initial_success_rate": None, "eval_episodes": self.arm_eval.episodes}
                if self.arm_eval
                else {}
            ),
            **({"robot_judged_agree": int(counters["judged_agree"])} if "judged_agree" in counters else {}),
            **_figures(self.figures, self.learning, counters),
            "recording": str(self.path),
        }


class _Learning:
    """Where a robot run's episodes are learned: here between episodes (``split`` local), or in a learner
    process on Ray (:class:`~robosteer.real.learner.RayLearner`), whose state this run's checkpoints pull."""

    def __init__(
        self,
        o: OnlineRun,
        acting: LearnerActing,
        shapes: dict[str, tuple[int, ...]],
        exec_steps: int,
        learn_slice: int,
        split: Any,
        offline: Any,
        demo_room: int = 0,
    ) -> None:
        from robosteer.real.learner import RayLearner

        self.o, self.acting, self.exec_steps, self.learn_slice = o, acting, exec_steps, learn_slice
        self.remote: RayLearner | None = None
        acting.generator = (
            o.gen
        )  # local: acting draws from the run's generator (checkpointed: an exact resume)
        if split is not None and split.mode == "ray":
            from robosteer.policies.steering.loop import learner_state

            learner = o.learner
            state = {
                "modules": learner_state(learner, o.buffer),
                "counters": dict(o.counters),
                "generator": o.gen.get_state(),
            }
            self.remote = RayLearner(
                split,
                learner,
                shapes=shapes,
                cfg=o.cfg,
                offline=offline,
                state=state,
                n_obs_steps=acting.n_obs_steps,
                exec_steps=exec_steps,
                learn_slice=learn_slice,
                weights_every=split.weights_every,
                demo_room=demo_room,
            )
            # acting draws from a generator of its own: the learner's samples batches in its process
            seed = o.cfg.seed + 7919 * int(o.counters["episodes"]) + 1
            acting.generator = torch.Generator(device=o.device).manual_seed(seed)

    def add(self, index: int, arrays: dict[str, Any], held: list[bool] | None) -> float:
        """Episode ``index`` learned (or sent to the learner); its return."""
        from robosteer.real.learner import ingest

        o, counters = self.o, self.o.counters
        if self.remote is not None:
            sent = arrays_for_learner(arrays, recorded_keys(o.learner))
            stats = self.remote.add_episode(index, sent, held)
            counters.update({k: stats[k] for k in ("transitions", "updates")})
            o.info = dict(stats["info"])
            return float(stats["last_return"])
        n, ret = ingest(
            o.learner,
            o.buffer,
            o.gen,
            o.cfg,
            arrays,
            held,
            self.acting.n_obs_steps,
            self.exec_steps,
            o.offline_buf,
        )
        counters["transitions"] += n
        if o.learning:  # the updates this episode owes, sliced as the simulator loop makes them
            for i in range(0, n, self.learn_slice):
                o.learn(min(self.learn_slice, n - i))
        return ret

    def rebuild_demos(self, learned: dict[int, Recorded]) -> None:
        """A resumed run's demonstration replay: the intervention chunks of the episodes learned before
        (their extras drawn from a generator of their own, so the run's own stream resumes exactly)."""
        from robosteer.real.learner import ingest_demos

        o, added = self.o, 0
        for index, (arrays, held, _) in sorted(learned.items()):
            if arrays.get("interventions") is None or not np.any(arrays["interventions"]):
                continue
            seed = o.cfg.seed + 104_729 * (index + 1)
            if self.remote is not None:
                added += self.remote.add_demos(
                    arrays_for_learner(arrays, recorded_keys(o.learner)), held, seed
                )
                continue
            gen = torch.Generator(device=o.device).manual_seed(seed)
            added += ingest_demos(
                o.learner, o.offline_buf, gen, o.cfg, arrays, held, self.acting.n_obs_steps, self.exec_steps
            )
        if added:
            log.info("rebuilt %d intervention chunks into the demonstration replay", added)

    def before_episode(self) -> int | None:
        """Warm-up or exploring, with the newest weights (Ray: the version it acts with, else None)."""
        self.acting.warm = not self.o.learning
        if self.remote is None:
            return None
        self.sync_weights()
        return self.remote.version

    def sync_weights(self) -> None:
        if self.remote is not None:
            state = self.remote.newest_weights()
            if state is not None:
                self.o.learner.load_state_dict(state)

    def wait_backlog(self) -> float:
        return 0.0 if self.remote is None else self.remote.wait_backlog()

    def pull(self) -> None:
        """Ray: the learner's whole state into this run (its learner, replay, counters, generator)."""
        from robosteer.policies.steering.loop import load_learner_state

        if self.remote is None:
            return
        snap = self.remote.snapshot()
        o = self.o
        load_learner_state(o.learner, o.buffer, snap["modules"])
        o.counters.update(
            {k: snap["counters"][k] for k in ("transitions", "updates", "pending_updates", "backlog")}
        )
        o.gen.set_state(snap["generator"])
        self.remote.version = int(snap["counters"]["updates"])

    def save(self) -> str:
        """``checkpoints/latest`` as of now (Ray: pulled from the learner first); what it says of the learner."""
        if self.remote is not None and self.remote.dead:
            return "the learner's last checkpoint stands, and the episodes recorded after it are re-sent"
        if self.remote is not None:
            if self.remote.last.get("fault"):
                raise self.o.run.stopped(f"learner: {self.remote.last['fault']}", self.o.step)
            self.pull()
        self.o.save()
        return "the learner is saved as of the last finished episode"

    def close(self) -> None:
        if self.remote is not None:
            self.remote.close()


def arrays_for_learner(arrays: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """An episode as the learner's process gets it: the observation keys its transitions are made from (a
    classifier's camera stays here; a pixel base's frames go, embedded there)."""
    return {**arrays, "obs": {k: arrays["obs"][k] for k in keys}}


def _figures(
    figures: dict[str, list[float]], learning: _Learning, counters: dict[str, Any]
) -> dict[str, Any]:
    """The run's control-rate jitter and (Ray) the learner's pace: updates per env step and per second, and
    how far the acting weights trailed the learner."""
    out: dict[str, Any] = {}
    late = figures["tick_late_ms_p99"]
    if late:
        out["robot_tick_late_ms_p99"] = {"mean": float(np.mean(late)), "max": float(np.max(late))}
    if learning.remote is not None:
        last, stale = learning.remote.last, figures["staleness"]
        out["learner"] = {
            "mode": "ray",
            "simulators_imported": last.get("simulators_imported"),  # in the learner's process
            "updates_per_env_step": counters["updates"] / max(int(counters["env_steps"]), 1),
            "updates_per_s": last.get("updates_per_s"),
            "busy_updates_per_s": last.get("busy_updates_per_s"),
            "staleness_updates": {"mean": float(np.mean(stale)), "max": float(np.max(stale))}
            if stale
            else None,
            "actor_waited_s": float(np.sum(figures["waited_s"])),
        }
    return out


def _window_shapes(acting: LearnerActing, keys: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """(To, ...) per low-dim key the learner reads, from the base's shape_meta; (1, G) for its embedding."""
    from robosteer.policies.steering.embedding import EMBED_KEY

    obs = acting.shape_meta["obs"]
    shapes = {k: (acting.n_obs_steps, *[int(d) for d in obs[k]["shape"]]) for k in keys if k != EMBED_KEY}
    if EMBED_KEY in keys:
        shapes[EMBED_KEY] = (1, int(acting.embedding.dim))
    return shapes
