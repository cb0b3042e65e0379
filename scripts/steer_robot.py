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
TELEOPS = ("keyboard", "spacemouse", "gamepad", "scripted")  # teleop=: a person's device (null: none)
OPERATORS = ("terminal", "scripted")  # operator=: who answers the reset and success prompts
# ours: room in the demonstration replay for a person's intervention chunks (HIL-SERL keeps them apart too)
INTERVENTION_ROOM = 50_000
TELEOP_MAPPINGS = {"sim_twin": "delta", "ros2": "joint_position"}  # ur: its control_mode


def real_arm(cfg: DictConfig) -> bool:
    """A real arm (ur, ros2) or the twin behaving as one (``robot.driver.real_mode``): no simulator judges it,
    so it is evaluated on its own judged episodes."""
    return str(cfg.robot.name) != "sim_twin" or bool(cfg.robot.driver.get("real_mode", False))


def check_robot_steering(cfg: DictConfig, algo: str, served: bool, embedding: Any) -> None:
    """What steering on a robot supports today, refused in one line before a twin is spawned or an arm moves."""
    from robosteer.scripts.deploy import check_safety_switch

    name = str(cfg.robot.name)
    if algo == "dsrl" and cfg.variant != "na":
        raise UsageError(
            f"robot={name} steers with algo=dsrl variant=na or algo=expo (their critics learn from the actions "
            f"the robot recorded); got algo=dsrl variant={cfg.variant}"
        )
    if served:
        raise UsageError(f"robot={name} steers a base from its run directory, not a served base (yet)")
    if embedding is not None and cfg.get("actor_obs", "embedding") != "embedding":
        raise UsageError(
            f"robot={name} steers a camera base through its embedding (actor_obs=embedding, the default): an actor "
            "with an encoder of its own (actor_obs=encoder) is not built for a robot yet"
        )
    if cfg.robot_reward == "classifier" and not (cfg.classifier.path or cfg.classifier.data):
        raise UsageError(
            "robot_reward=classifier needs a success classifier: classifier.data=EPISODES.hdf5 (episodes with camera "
            "frames and their success, e.g. robosteer-collect obs=state+image keep=all) trains one first, or "
            "classifier.path=DIR reuses one (a run's <out>/classifier)"
        )
    if real_arm(cfg):
        _check_real_arm(cfg)
    twin_real = name == "sim_twin" and real_arm(cfg)
    for key, value in (("teleop", cfg.teleop), ("operator", cfg.operator)):
        if value == "scripted" and not twin_real:
            raise UsageError(
                f"{key}=scripted stands in for a person at the twin in real mode only (it reads the twin's hidden "
                f"state): add robot=sim_twin robot.driver.real_mode=true, or use a person ({key}="
                + ("keyboard | spacemouse | gamepad)" if key == "teleop" else "terminal)")
            )
    check_safety_switch(cfg)
    learner_config(cfg)


def _check_real_arm(cfg: DictConfig) -> None:
    """What an arm without a simulator needs: a person who resets the scene, and a judge of success."""
    name = str(cfg.robot.name) + (" robot.driver.real_mode=true" if cfg.robot.name == "sim_twin" else "")
    if cfg.resets != "operator":
        raise UsageError(
            f"robot={name} resets no scene itself: resets=operator (before every episode you reset the scene, "
            "then press Enter)"
        )
    if cfg.robot_reward not in JUDGED_REWARDS:
        raise UsageError(
            f"robot={name} reports no success: robot_reward=operator (you answer y/n after each episode) or "
            "robot_reward=classifier (a success classifier on its camera frames)"
        )
    if cfg.robot.name == "ur" and cfg.robot_reward == "classifier" and not cfg.robot.driver.get("cameras"):
        raise UsageError(
            "robot_reward=classifier on robot=ur needs a camera: +robot.driver.cameras.<name>={index_or_path: 0} "
            "(pip install 'robosteer[camera]'), named as the classifier's camera"
        )


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
    eval_fn: Callable[..., dict[str, Any]] | None,
    checkpoint_config: dict[str, Any],
) -> dict[str, Any]:
    """DSRL on ``robot=``: deploy's control loop acts (safety filter, sync/async, lead), the learner trains
    between episodes on what the robot recorded (real/steering.py). The twin is evaluated in the simulator
    (``eval_fn``); a real arm (or the twin in real mode) on blocks of its own judged episodes."""
    import torch

    from robosteer.policies.steering.dsrl import prepare_offline
    from robosteer.real.runtime import ControlLoop
    from robosteer.real.steering import LearnerActing
    from robosteer.scripts.deploy import runtime_config, safety_filter

    cfg = s.cfg
    if agent.kind == "dsrl":
        prepare_offline(agent, offline, run_cfg)
    runtime = runtime_config(
        cfg.runtime, max_actions=s.exec_steps
    )  # the learner's rows: what each chunk sends
    classifier = success_judge(cfg, run_dir) if cfg.robot_reward == "classifier" else None
    robot, driver = _connected_robot(s, classifier)
    loop = teleop = None
    try:
        judge, confirm_reset, teleop = _people(cfg, robot, classifier)
        acting = LearnerActing(agent, s.base, torch.Generator(device=agent.device).manual_seed(int(cfg.seed)))
        record = [classifier.camera] if classifier is not None else []
        loop = ControlLoop(
            robot,
            acting,
            safety_filter(cfg, robot),
            runtime,
            obs_keys=list(s.base.shape_meta["obs"]),  # the base's inputs (a pixel base's camera windows)
            record_keys=record,
            teleop=teleop,
        )
        metrics = _run(s, agent, acting, loop, offline, run_cfg, run_dir, eval_fn, checkpoint_config, driver,
                       judge, confirm_reset)  # fmt: skip
    finally:
        if loop is not None:
            loop.close()
        if teleop is not None:
            teleop.disconnect()
        robot.disconnect()
    from robosteer.real.steering import simulators_imported

    variant = agent.config.variant if agent.kind == "dsrl" else agent.label
    metrics |= {"variant": variant, "robot": str(cfg.robot.name), "real_arm": real_arm(cfg)}
    metrics["simulators_imported"] = simulators_imported()  # in this process: none on a real arm
    metrics["reward"], metrics["run_reward"] = str(cfg.robot_reward), run_cfg.reward
    if classifier is not None:  # what paid the learner: its threshold and held-out error rates
        metrics["classifier"] = {k: v for k, v in classifier.report.items() if k != "config"}
    if "final_block" in metrics:  # the final judged block's Wilson interval (the simulator's figure has one)
        from robosteer.sim.stats import wilson_interval

        block = metrics["final_block"]
        metrics["success_ci95"] = list(wilson_interval(int(block["successes"]), int(block["episodes"])))
    return metrics


def _connected_robot(s: Steering, classifier: Any) -> tuple[Any, dict[str, Any]]:
    """The robot's driver, connected (the twin renders the classifier's camera too), and its settings."""
    from robosteer.real.drivers import make_robot
    from robosteer.scripts.deploy import robot_driver

    cfg = s.cfg
    driver = robot_driver(cfg, s.base.shape_meta, s.task)
    if classifier is not None and str(cfg.robot.name) == "sim_twin":
        size, camera = int(classifier.model.image_shape[0]), classifier.camera.split("/", 1)[1]
        if driver["obs"] == "state":
            driver.update(obs="state+image", cameras=[camera], image_size=size)
        elif camera not in driver["cameras"]:  # a pixel base: its cameras and the classifier's, one size
            if size != driver["image_size"]:
                raise UsageError(
                    f"the success classifier reads {camera} at {size} px and the base its cameras at "
                    f"{driver['image_size']} px: the twin renders one size; train the classifier at "
                    f"{driver['image_size']} px or on the base's camera"
                )
            driver["cameras"] = [*driver["cameras"], camera]
    robot = make_robot(str(cfg.robot.name), **driver)
    robot.connect()
    return robot, driver


def _people(cfg: DictConfig, robot: Any, classifier: Any) -> tuple[Any, Any, Any]:
    """(judge, reset confirmation, teleop): who judges each episode, who resets the scene before it, and the
    device a person takes over with, from ``robot_reward``, ``resets``, ``operator`` and ``teleop``."""
    from robosteer.real.steering import Operator

    person: Any = Operator()  # the terminal: episode verdicts, reset confirmations
    if cfg.operator == "scripted":
        from robosteer.real.scripted import ScriptedPerson

        person = ScriptedPerson(robot)
    judge = classifier if classifier is not None else (person if cfg.robot_reward == "operator" else None)
    confirm_reset = person.confirm_reset if cfg.resets == "operator" else None
    return judge, confirm_reset, _teleop(cfg, robot)


def _teleop(cfg: DictConfig, robot: Any) -> Any:
    """``teleop=``'s device, mapped to the robot's command space and connected (None: no interventions)."""
    if cfg.teleop is None:
        return None
    if cfg.teleop == "scripted":
        from robosteer.real.scripted import ScriptedOperator

        teleop = ScriptedOperator(robot)
    else:
        from robosteer.real.teleop import make_teleop

        name = str(cfg.robot.name)
        mapping = TELEOP_MAPPINGS.get(name) or str(cfg.robot.driver.get("control_mode") or "joint_position")
        teleop = make_teleop(str(cfg.teleop), mapping, int(robot.action_spec.shape[0]))
    teleop.connect()
    return teleop


def _run(s: Steering, agent: Any, acting: Any, loop: Any, offline: Any, run_cfg: Any, run_dir: Path,
         eval_fn: Any, checkpoint_config: dict[str, Any], driver: dict[str, Any], judge: Any,
         confirm_reset: Any) -> dict[str, Any]:  # fmt: skip
    """The robot run (real/steering.py's run_robot) with this config's settings."""
    from robosteer.real.steering import ArmEvalConfig, run_robot

    cfg = s.cfg
    on_arm = real_arm(cfg)
    env_args = {
        "env_name": s.task,
        "type": 2,
        "env_kwargs": {"suite": "metaworld" if cfg.robot.name == "sim_twin" else "real", **driver},
        "steer": {"robot": str(cfg.robot.name), "mode": loop.cfg.mode, "reward": str(cfg.robot_reward)},
    }
    measure_base = (
        on_arm and bool(cfg.eval_base) and not (cfg.resume and (run_dir / "base_eval.json").exists())
    )
    return run_robot(
        agent,
        loop,
        acting,
        run_cfg,
        str(run_dir),
        exec_steps=s.exec_steps,
        episode_seed=300_000 + 10_000 * int(cfg.seed),  # apart from the demos' and the evaluations'
        env_args=env_args,
        eval_fn=None if on_arm else eval_fn,
        offline=offline,
        resume=bool(cfg.resume),
        checkpoint_config={**checkpoint_config, "robot": str(cfg.robot.name)},
        learn_slice=int(cfg.num_envs),
        judge=judge,
        confirm_reset=confirm_reset,
        split=learner_config(cfg),
        arm_eval=ArmEvalConfig(**OmegaConf.to_container(cfg.arm_eval, resolve=True)) if on_arm else None,
        base=s.base if measure_base else None,
        demo_room=INTERVENTION_ROOM if cfg.teleop is not None else 0,
    )


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
