"""robosteer-steer on a robot (``robot=sim_twin | ur | ros2``): what the command's config asks of the arm,
checked before anything moves, and the wiring from that config to deploy's control loop and the learner
(real/steering.py), which trains between episodes on what the robot recorded.

Kept apart from ``steer.py`` (simulation) so each reads top to bottom; it lives in scripts/ because it reads the
command's config and reuses robosteer-deploy's wiring (robot driver, safety filter, runtime), which real/ must
not import.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from robosteer.scripts.common import UsageError

if TYPE_CHECKING:
    from robosteer.scripts.steer import Steering

log = logging.getLogger(__name__)

ROBOT_REWARDS = ("success", "twin", "operator", "classifier")
RESETS = ("robot", "operator")
JUDGED_REWARDS = (
    "operator",
    "classifier",
)  # the robot's own success is not read: episodes run to their limit


def check_robot_steering(cfg: DictConfig, algo: str, served: bool, embedding: Any) -> None:
    """What steering on a robot supports today, refused in one line before a twin is spawned or an arm moves."""
    from robosteer.scripts.deploy import check_safety_switch

    name = str(cfg.robot.name)
    if algo != "dsrl" or cfg.variant != "na":
        raise UsageError(
            f"robot={name} steers with algo=dsrl variant=na (its critic learns from the actions the robot "
            f"recorded); got algo={algo}" + (f" variant={cfg.variant}" if algo == "dsrl" else "")
        )
    if served or embedding is not None:
        what = "a served base" if served else "a base that reads camera images"
        raise UsageError(f"robot={name} steers a state-based base from a run directory, not {what} (yet)")
    if cfg.robot_reward == "classifier" and not (cfg.classifier.path or cfg.classifier.data):
        raise UsageError(
            "robot_reward=classifier needs a success classifier: classifier.data=EPISODES.hdf5 (episodes with camera "
            "frames and their success, e.g. robosteer-collect obs=state+image keep=all) trains one first, or "
            "classifier.path=DIR reuses one (a run's <out>/classifier)"
        )
    if name != "sim_twin":
        raise UsageError(
            f"robot={name} reports no success and no simulator evaluates it: steering a real arm needs "
            "resets=operator (built) with robot_reward=operator or robot_reward=classifier, and an evaluation on the "
            "arm's own judged episodes instead of the simulator's, which is not built yet; robot=sim_twin "
            "steers on the twin (resets=operator robot_reward=operator rehearses an arm's run there)"
        )
    check_safety_switch(cfg)
    learner_config(cfg)


def learner_config(cfg: DictConfig) -> Any:
    """``learner=``: where a robot run's learner trains (real/learner.py), checked before anything starts."""
    from robosteer.real.learner import LearnerConfig

    split = LearnerConfig(**OmegaConf.to_container(cfg.learner, resolve=True))
    if split.mode == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise UsageError(
                "learner=ray needs Ray in this environment: pip install ray==2.60.0 (the robosteer[ray] extra)"
            ) from None
    return split


def success_judge(cfg: DictConfig, run_dir: Path) -> Any:
    """robot_reward=classifier's judge: the classifier of ``classifier.path``, this run's own (a resumed run keeps
    the one it was paid by), or one trained now on ``classifier.data`` and saved under ``<out>/classifier``;
    its threshold and held-out error rates are logged before the arm moves."""
    from robosteer.policies.success_classifier import (
        ClassifierConfig,
        load_classifier,
        report_line,
        save_classifier,
        train_classifier,
    )
    from robosteer.real.steering import ClassifierJudge

    c, own = cfg.classifier, run_dir / "classifier"
    if c.path or own.exists():
        model, threshold, report = load_classifier(c.path or own)
    else:
        keys = {f.name for f in dataclasses.fields(ClassifierConfig)} - {"seed"}
        ccfg = ClassifierConfig(**{k: c[k] for k in keys}, seed=int(cfg.seed))
        log.info("training the success classifier on %s (%d steps)", c.data, ccfg.steps)
        model, threshold, report = train_classifier(str(c.data), ccfg)
        save_classifier(own, model, threshold, report)
    log.info("%s", report_line(report))
    return ClassifierJudge(model.eval(), threshold, report["camera"], report)


def steer_on_robot(
    s: Steering,
    agent: Any,
    offline: dict[str, Any] | None,
    run_cfg: Any,
    run_dir: Path,
    eval_fn: Callable[..., dict[str, Any]],
    checkpoint_config: dict[str, Any],
) -> dict[str, Any]:
    """DSRL on ``robot=``: deploy's control loop acts (safety filter, sync/async, lead), the learner trains
    between episodes on what the robot recorded (real/steering.py); evaluation stays in the simulator."""
    import torch

    from robosteer.policies.steering.dsrl import prepare_offline
    from robosteer.real.drivers import make_robot
    from robosteer.real.runtime import ControlLoop
    from robosteer.real.steering import LearnerActing, Operator, run_robot
    from robosteer.scripts.deploy import robot_driver, runtime_config, safety_filter

    cfg = s.cfg
    operator = Operator()  # the terminal: episode verdicts (robot_reward=operator), reset confirmations
    judge = operator if cfg.robot_reward == "operator" else None
    record = []  # observation keys recorded beside the policy's: the classifier's camera
    if cfg.robot_reward == "classifier":
        judge = success_judge(cfg, run_dir)
        record = [judge.camera]
    prepare_offline(agent, offline, run_cfg)
    # the learner's executed rows are exactly what the loop sends per chunk
    runtime = runtime_config(cfg.runtime, max_actions=s.exec_steps)
    driver = robot_driver(cfg, s.base.shape_meta, s.task)
    if record and str(cfg.robot.name) == "sim_twin":  # the twin renders the classifier's camera too
        size = int(judge.model.image_shape[0])
        driver.update(obs="state+image", cameras=[judge.camera.split("/", 1)[1]], image_size=size)
    acting = LearnerActing(agent, s.base, torch.Generator(device=agent.device).manual_seed(int(cfg.seed)))
    robot = make_robot(str(cfg.robot.name), **driver)
    robot.connect()
    loop = None
    try:
        loop = ControlLoop(
            robot, acting, safety_filter(cfg, robot), runtime, obs_keys=list(s.keys), record_keys=record
        )
        env_args = {
            "env_name": s.task,
            "type": 2,
            "env_kwargs": {"suite": "metaworld", **driver},
            "steer": {"robot": str(cfg.robot.name), "mode": runtime.mode, "reward": str(cfg.robot_reward)},
        }
        metrics = run_robot(
            agent,
            loop,
            acting,
            run_cfg,
            str(run_dir),
            exec_steps=s.exec_steps,
            episode_seed=300_000 + 10_000 * int(cfg.seed),  # apart from the demos' and the evaluations'
            env_args=env_args,
            eval_fn=eval_fn,
            offline=offline,
            resume=bool(cfg.resume),
            checkpoint_config={**checkpoint_config, "robot": str(cfg.robot.name)},
            learn_slice=int(cfg.num_envs),
            judge=judge,
            confirm_reset=operator.confirm_reset if cfg.resets == "operator" else None,
            split=learner_config(cfg),
        )
    finally:
        if loop is not None:
            loop.close()
        robot.disconnect()
    metrics["variant"] = agent.config.variant
    metrics["robot"] = str(cfg.robot.name)
    metrics["reward"], metrics["run_reward"] = str(cfg.robot_reward), run_cfg.reward
    if cfg.robot_reward == "classifier":  # what paid the learner: its threshold and held-out error rates
        metrics["classifier"] = {k: v for k, v in judge.report.items() if k != "config"}
    return metrics


def robot_rewards(cfg: DictConfig) -> None:
    """On a robot, a judged reward pays -1 per chunk and 0 at success; the twin must not end an episode on a
    success it reports, when someone else judges it."""
    if not cfg.get("robot"):
        return
    if cfg.robot_reward in ("success", *JUDGED_REWARDS):  # the demos and the robot's episodes alike
        log.info(
            "robot_reward=%s on robot=%s: run.reward=sparse (-1 per chunk, 0 at success)",
            cfg.robot_reward,
            cfg.robot.name,
        )
        cfg.run.reward = "sparse"
    if cfg.robot_reward in JUDGED_REWARDS and "end_on_success" in cfg.robot.driver:
        cfg.robot.driver.end_on_success = False  # the twin's success must not show in when an episode ends
