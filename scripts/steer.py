"""robosteer-steer: steer a base policy with DSRL (``algo=dsrl``) or EXPO / RLPD (``algo=expo``) on a task.

Writes the run directory: config.yaml, TensorBoard curves (tb/), checkpoints/latest (actor, critics,
optimizers, replay buffer, RNG), plots/learning_curve.png and metrics.json with the before/after success.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from robosteer.scripts.common import (
    UsageError,
    atomic_write_text,
    console_main,
    env_backend,
    exit_codes,
    format_table,
    start_run,
    write_metrics,
)
from robosteer.scripts.steer_robot import check_robot_steering, real_arm, robot_rewards, steer_on_robot

if TYPE_CHECKING:
    from robosteer.policies.bases import LoadedBase

log = logging.getLogger("robosteer.steer")


@dataclass
class Steering:
    """What every algorithm's builder gets: the config, the frozen base and the facts derived from it."""

    cfg: DictConfig
    base: Any
    task: str
    keys: tuple[str, ...]  # the low-dim obs keys the learner reads
    to: int  # the base's To
    ta: int  # the base's Ta
    exec_steps: int  # env steps per MDP action
    obs_dim: int  # To · Σ key sizes
    device: Any
    offline_path: str | None  # the demonstrations ``offline=`` resolved to (:func:`offline_path`)
    embedding: Any = None  # a base that reads pixels: its BaseEmbedding, whose output the learner reads
    critic: tuple[tuple[str, ...], int] | None = None  # critic_obs=state: the critics' (keys, obs_dim)
    own_encoder: bool = False  # DSRL actor_obs=encoder: the actor reads the raw windows (``keys``) itself

    @property
    def stored_keys(self) -> tuple[str, ...]:
        """The raw obs keys a transition keeps: the base's (embedded when it reads pixels) and the critics'."""
        own = self.embedding.raw_keys if self.embedding is not None else self.keys
        return tuple(dict.fromkeys(own + (self.critic[0] if self.critic else ())))

    def offline(self) -> dict[str, Any] | None:
        """The demonstrations as chunk-MDP transitions of ``exec_steps`` (their action named ``taken``);
        with pixels, their windows as the base's embeddings."""
        if self.offline_path is None:
            return None
        from robosteer.policies.rl import chunk_transitions

        run, embedding = self.cfg.run, self.embedding
        data = chunk_transitions(
            self.offline_path,
            self.stored_keys,
            self.to,
            self.exec_steps,
            reward=str(run.reward),
            reward_scale=float(run.reward_scale),
            obs_transform=None
            if embedding is None
            else partial(embedding.transform, keep_raw=self.own_encoder),
        )
        data["taken"] = data.pop("action")
        return data

    def env_inputs(self) -> dict[str, Any]:
        """``make_env`` keywords for the base's inputs: its obs mode, cameras and image size."""
        from robosteer.scripts.evaluate import obs_mode

        mode, cams, size = obs_mode(self.base.shape_meta)
        if self.critic is not None and not mode.startswith(
            "state"
        ):  # the asymmetric critic's privileged state
            mode = f"state+{mode}"
        return {"obs": mode, "cameras": cams, "image_size": size}

    def make_env(self, num_envs: int, seed: int = 0, output: str = "numpy", **kwargs: Any) -> Any:
        """The task's batched env with the base's inputs (obs mode, cameras, image size) and To-step windows;
        seen through the base's embedding when it reads pixels (cameras render only at policy steps).
        ``output="torch"``: a GPU sim's tensors stay on its device (Meta-World's are numpy regardless)."""
        from robosteer import sim
        from robosteer.policies.steering.embedding import EmbeddedObsEnv

        if self.embedding is not None and kwargs.get("action_chunk"):
            kwargs["render"] = "policy_steps"
        env = sim.make_env(
            self.task,
            num_envs=num_envs,
            seed=seed,
            **self.env_inputs(),
            obs_history=self.to,
            randomization=self.cfg.get("randomization"),
            **env_backend(self.cfg, self.device, output),
            **kwargs,
        )
        return (
            env if self.embedding is None else EmbeddedObsEnv(env, self.embedding, keep_raw=self.own_encoder)
        )


CRITIC_OBS = ("policy", "state")


def asymmetric_critic(
    cfg: DictConfig, task: str, to: int, keys: tuple[str, ...]
) -> tuple[tuple[str, ...], int] | None:
    """``critic_obs=state`` (DSRL, simulation only): the critics' (keys, obs_dim) over the privileged state
    window, an asymmetric actor-critic; None for ``critic_obs=policy`` (the critics read what the actor reads)."""
    critic_obs = str(cfg.get("critic_obs", "policy"))  # one of CRITIC_OBS (cli.check_choices)
    if critic_obs == "policy":
        return None
    if cfg.get("robot"):
        raise UsageError(
            f"critic_obs=state reads the simulator's privileged state, which robot={cfg.robot.name} does not "
            "have: drop critic_obs (the critics then read what the policy reads)"
        )
    if "state" in keys:
        raise UsageError(
            "critic_obs=state: this base reads the state already, and so do its critics; drop critic_obs"
        )
    from robosteer import sim

    with sim.make_env(task, num_envs=1, obs="state") as probe:
        state_dim = int(probe.single_observation_space["state"].shape[-1])
    log.info(
        "critic_obs=state: the critics read the simulator's privileged state (asymmetric actor-critic, "
        "simulation only); the actor, which acts, reads only the policy's inputs"
    )
    return ("state",), to * state_dim


ACTOR_OBS = ("embedding", "encoder")


def actor_obs(cfg: DictConfig, shape_meta: dict[str, Any]) -> bool:
    """``actor_obs=encoder`` (DSRL, a base that reads pixels): whether the actor trains an encoder of its own
    (a copy of the base's) on the raw windows, instead of reading the base's frozen embedding."""
    from robosteer.policies.steering.embedding import reads_images

    choice = str(cfg.get("actor_obs", "embedding"))  # one of ACTOR_OBS (cli.check_choices)
    if choice == "encoder" and not reads_images(shape_meta):
        raise UsageError(
            f"actor_obs=encoder trains a copy of a pixel base's image encoder; base={cfg.base} reads "
            f"{sorted(shape_meta['obs'])}, no camera: drop actor_obs"
        )
    return choice == "encoder"


def build_dsrl(s: Steering) -> tuple[Any, dict[str, Any] | None, Callable[..., dict[str, Any]]]:
    """DSRL-NA / DSRL-SAC over the base's latent noise (offline demos: NA's critic only)."""
    from robosteer.policies.steering.dsrl import DSRL, DSRLConfig, run_dsrl
    from robosteer.policies.steering.obs_spec import ObsSpec
    from robosteer.policies.steering.steerability import executed_rows

    cfg = s.cfg
    if s.offline_path is not None and cfg.variant != "na":
        raise ValueError(
            f"offline={cfg.offline} needs variant=na: DSRL-SAC's critic is over latents, not actions"
        )
    offline = s.offline()
    spec = ObsSpec.build(s.keys, s.obs_dim, s.embedding, s.own_encoder, s.critic)  # the pixel options, once
    values = OmegaConf.to_container(cfg.dsrl, resolve=True)
    agent = DSRL.from_spec(
        s.base,
        spec,
        executed_rows(s.base),
        DSRLConfig(variant=str(cfg.variant), **values),
        device=s.device,
        embedding=s.embedding,
    )
    return agent, offline, run_dsrl


def build_expo(s: Steering) -> tuple[Any, dict[str, Any] | None, Callable[..., dict[str, Any]]]:
    """EXPO (or RLPD, best-of-N): demos feed the critic's offline half and the base's imitation windows."""
    from robosteer.policies.steering.embedding import TrainableEmbedding
    from robosteer.policies.steering.expo import EXPO, EXPOConfig, bc_windows, run_expo

    cfg = s.cfg
    expo_values = OmegaConf.to_container(cfg.expo, resolve=True)
    offline = s.offline()
    path, embedding = s.offline_path, s.embedding
    bc = None
    if path is not None:  # pixels: the base imitates from its own embedding of the demo windows
        keys = embedding.raw_keys if embedding is not None else s.keys
        transform = embedding.transform if embedding is not None else None
        bc = bc_windows(path, keys, s.to, s.base.config.horizon, s.ta, obs_transform=transform)
    base = s.base if embedding is None else TrainableEmbedding(s.base)
    agent = EXPO(base, s.obs_dim, EXPOConfig(**expo_values), obs_keys=s.keys, bc_offline=bc, device=s.device)
    return agent, offline, run_expo


# algo=<name>: (builder, env steps per MDP action given (cfg, Ta)); a new algorithm adds one entry here
ALGOS: dict[str, tuple[Callable[[Steering], Any], Callable[[DictConfig, int], int]]] = {
    "dsrl": (build_dsrl, lambda cfg, ta: ta),
    "expo": (build_expo, lambda cfg, ta: 1 if cfg.expo.action == "single" else ta),
}


def offline_path(cfg: DictConfig, algo: str, ckpt_dir: Path | None) -> str | None:
    """``offline=``: a dataset file, ``none``, or ``auto`` (the default): the one dataset the base was trained
    on, as its checkpoint records it, wherever the algorithm uses demonstrations (not DSRL-SAC or scratch)."""
    from robosteer.policies.checkpoint import read_checkpoint_config

    value = cfg.offline
    if value is None or str(value).lower() == "none":
        return None
    if str(value) != "auto":
        return str(value)
    if ckpt_dir is None or (algo == "dsrl" and cfg.variant != "na"):
        return None
    recorded = read_checkpoint_config(ckpt_dir).get("dataset")
    paths = [recorded] if isinstance(recorded, str) else list(recorded or [])
    if len(paths) != 1 or not Path(paths[0]).is_file():
        why = f"its dataset {paths[0]} is gone" if len(paths) == 1 else f"it records {len(paths)} datasets"
        log.warning("offline=auto: %s; steering without demonstrations (offline=<file.hdf5> names one)", why)
        return None
    log.info("offline=auto: the base's own dataset %s (offline=none steers without it)", paths[0])
    return str(paths[0])


def retrain_command(record: dict[str, Any], base: str) -> str | None:
    """The robosteer-train line that rebuilds ``base`` from its checkpoint's ``record`` (dataset, policy,
    backbone, inputs, steps, task, seed) with ``action_noise_std=auto``; None without one recorded dataset."""
    import shlex

    paths = record.get("dataset")
    paths = [paths] if isinstance(paths, str) else list(paths or [])
    policy, steps = (record.get("policy") or {}).get("name"), (record.get("train") or {}).get("steps")
    if len(paths) != 1 or policy is None or steps is None:
        return None
    run = record.get("run") or {}
    backbone = (run.get("policy") or {}).get("backbone", "mlp")
    keys = list(record.get("obs_keys") or ["state"])
    cams = [k.removeprefix("image/") for k in keys if k.startswith("image/")]
    obs = {"proprio": "pixels", "state": "state+image"}.get(keys[0], "image") if cams else None
    args = [f"policy={policy}", *([f"backbone={backbone}"] if backbone != "mlp" else [])]
    args += [f"obs={obs}", f"cameras=[{','.join(cams)}]"] if obs else []
    args += [f"dataset={paths[0]}", f"steps={steps}", "action_noise_std=auto"]
    args += [f"task={record['task']}"] if record.get("task") else []
    args += [f"seed={run['seed']}"] if run.get("seed") else []
    return shlex.join(["robosteer-train", *args, f"out={base.rstrip('/')}_auto"])


def steerability(
    s: Steering,
    agent: Any,
    offline: dict[str, Any] | None,
    evaluate: Callable[..., dict[str, Any]] | None,
    ckpt_dir: Path | None = None,
) -> Any:
    """Measure how far the base's executed chunk moves with DSRL's latent (policies/steering/steerability.py)
    at ``steerability.states`` states (the offline data's, else the task's initial states), and ``evaluate``
    the base held at ``steerability.directions`` fixed latents; log the verdict, and short of steerable the
    command that retrains this base (``ckpt_dir``'s record) with the augmentation the check chooses."""
    import torch

    from robosteer.policies.rng import get_rng_state, set_rng_state
    from robosteer.policies.steering.steerability import fixed_latent_policies, measure, sample_states

    n, k, seed = int(s.cfg.steerability.states), int(s.cfg.steerability.latents), int(s.cfg.seed)
    for key, value, default in (("states", n, 128), ("latents", k, 16)):
        if value < 2:
            raise ValueError(f"steerability.{key}={value}: expected at least 2 (default {default})")
    if offline is not None:
        states = sample_states(offline, None, agent.obs_keys, n, seed)
    else:
        with s.make_env(int(s.cfg.num_envs)) as env:
            states = sample_states(None, env, agent.obs_keys, n, seed)
    gen = torch.Generator(device=agent.device).manual_seed(seed)
    saved = get_rng_state()  # the check never moves the training run's random streams
    try:
        check = measure(agent, states, k, gen)
        directions, episodes = int(s.cfg.steerability.directions), int(s.cfg.steerability.episodes)
        if directions > 0 and evaluate is not None:  # the same episodes at each fixed latent: paired
            policies = fixed_latent_policies(agent, directions, gen)
            success = [float(evaluate(policy, episodes)["success_rate"]) for policy in policies]
            check = dataclasses.replace(check, direction_success=tuple(success))
    finally:
        set_rng_state(saved)
    if check.verdict == "steerable":
        log.info("%s", check.line())
        return check
    from robosteer.policies.checkpoint import read_checkpoint_config
    from robosteer.policies.steering.steerability import ADVICE, RETRAIN

    command = retrain_command(read_checkpoint_config(ckpt_dir), str(s.cfg.base)) if ckpt_dir else None
    log.warning("%s", check.line(RETRAIN.format(command=command) if command else ADVICE))
    return check


def _algo(cfg: DictConfig) -> str:
    """The chosen ``algo`` config group (Hydra's choice; the group's own key when composed elsewhere)."""
    from hydra.core.hydra_config import HydraConfig

    algo = HydraConfig.get().runtime.choices.get("algo") if HydraConfig.initialized() else None
    algo = algo or ("expo" if "expo" in cfg else "dsrl")
    if algo not in ALGOS:
        raise ValueError(f"algo={algo!r} is not known: expected one of {tuple(ALGOS)}")
    return algo


def plot_learning_curve(history: list[dict[str, float]], path: Path, title: str) -> None:
    """Success rate vs env steps (one point per evaluation)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([h["env_steps"] for h in history], [h["success_rate"] for h in history], marker="o")
    ax.set_xlabel("env steps")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def load_base(cfg: DictConfig, device: Any) -> LoadedBase:
    """The frozen base (policies/bases.py): a run directory, a served policy (DSRL over the wire), or
    base=scratch, whose identity map takes its size from the task's env."""
    from robosteer import sim
    from robosteer.policies.bases import base_source, open_base
    from robosteer.policies.steering.scratch import SCRATCH

    scratch_shape = None
    if base_source(str(cfg.base)) == SCRATCH:
        if not cfg.task or cfg.variant != "sac":
            raise ValueError(
                "base=scratch is plain SAC from scratch: it needs variant=sac and task=<name>, "
                f"got variant={cfg.variant} task={cfg.task}"
            )
        with sim.make_env(cfg.task, num_envs=1, obs="state", **env_backend(cfg, device)) as probe:
            state_dim = int(probe.single_observation_space["state"].shape[0])
            action_dim = int(probe.single_action_space.shape[0])
        scratch_shape = [state_dim, action_dim, int(cfg.scratch_chunk)]
    served = (  # base_kind=served's keys exist only for a served base
        {"protocol": str(cfg.protocol), "token": cfg.token, "timeout_s": float(cfg.policy_timeout_s)}
        if "protocol" in cfg
        else {}
    )
    return open_base(
        str(cfg.base),
        device=device,
        which=str(cfg.which),
        task=cfg.task or None,
        scratch_shape=scratch_shape,
        **served,
    )


def actor_inputs(cfg: DictConfig, base: Any, served: bool) -> tuple[tuple[str, ...], int, Any, bool]:
    """(obs keys, flat obs dim, the base's embedding or None, own encoder): what the actor reads."""
    import torch

    from robosteer.policies.steering.embedding import EMBED_KEY, BaseEmbedding, reads_images

    to = base.config.n_obs_steps
    own_encoder = actor_obs(cfg, base.shape_meta)
    if not reads_images(base.shape_meta):
        keys = tuple(base.shape_meta["obs"])
        obs_dim = sum(to * int(torch.tensor(base.shape_meta["obs"][k]["shape"]).prod()) for k in keys)
        return keys, obs_dim, None, own_encoder
    if served:  # pixels: steer over the base's own observation embedding
        raise UsageError(
            f"base={cfg.base} reads camera images: steering from pixels goes through the base's own "
            f"embedding, which the policy served at {cfg.base} cannot give; pass its run directory"
        )
    embedding = BaseEmbedding(base)
    keys = embedding.raw_keys if own_encoder else (EMBED_KEY,)  # own encoder: the base's raw inputs
    return keys, embedding.dim, embedding, own_encoder


def evaluator(cfg: DictConfig, steering: Steering, default_episodes: int) -> Callable[..., dict[str, Any]]:
    """``eval_fn(policy, episodes=None)``: fresh evaluation envs that read the policy's inputs only."""
    import torch

    from robosteer import sim

    inputs = dataclasses.replace(steering, critic=None).env_inputs()

    def eval_fn(policy: Any, episodes: int | None = None) -> dict[str, Any]:
        with (
            torch.no_grad(),
            sim.make_env(
                steering.task,
                num_envs=int(cfg.eval_envs),
                seed=int(cfg.eval_seed),
                **inputs,
                max_episode_steps=cfg.max_episode_steps,
                randomization=cfg.get("randomization"),
                **env_backend(cfg, steering.device),
            ) as eval_env,
        ):
            return sim.evaluate(
                eval_env,
                policy,
                episodes=episodes or default_episodes,
                seed=int(cfg.eval_seed),
                progress=False,
            )

    return eval_fn


def base_evaluation(
    cfg: DictConfig, run_dir: Path, eval_fn: Callable | None, base: Any
) -> dict[str, Any] | None:
    """The stock sampler's figure (fresh N(0, I) noise), measured once per run: a resumed run reads it. On a
    real arm (``eval_fn`` None) the robot run measures it on the arm, and this reads what it saved."""
    saved = run_dir / "base_eval.json"
    if cfg.eval_base and eval_fn is not None and not (cfg.resume and saved.exists()):
        metrics = eval_fn(base)
        atomic_write_text(saved, json.dumps(metrics, indent=2))
        return metrics
    return json.loads(saved.read_text()) if saved.exists() else None


def steer(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Build base, env, agent and evaluation from the config and run DSRL or EXPO."""
    import torch

    from robosteer.policies.checkpoint import state_dict_hash
    from robosteer.policies.steering.loop import resolve_device
    from robosteer.policies.steering.scratch import SCRATCH

    torch.set_num_threads(int(cfg.threads))
    robot_rewards(cfg)
    device = resolve_device(cfg.get("device", "cpu"))  # before anything is loaded: a bad value fails first
    algo = _algo(cfg)  # the base suits it: guards.check_steer_base, before Hydra started
    loaded = load_base(cfg, device)
    base, task = loaded.policy, loaded.task
    steering = build_steering(cfg, algo, loaded, device)
    offline_file, exec_steps = steering.offline_path, steering.exec_steps
    agent, offline, run_loop = ALGOS[algo][0](steering)
    run_cfg = run_config(cfg, device)
    on_arm = bool(cfg.get("robot")) and real_arm(cfg)  # no simulator in this process: the arm is judged
    eval_fn = None if on_arm else evaluator(cfg, steering, run_cfg.eval_episodes)
    check = None
    if algo == "dsrl" and cfg.base != SCRATCH and not (on_arm and offline is None):  # anything to steer?
        check = steerability(steering, agent, offline, eval_fn, loaded.ckpt_dir)
        if cfg.check_only:
            verdict = {"check_only": True, "steerability": check.as_dict()}
            return {"algo": algo, "task": task, "offline": offline_file, **verdict}
    env = None if cfg.get("robot") else steering.make_env(  # on a robot: deploy's control loop acts
        int(cfg.num_envs),
        seed=int(cfg.seed),
        action_chunk=exec_steps,
        max_episode_steps=cfg.max_episode_steps,
        output="torch",  # a GPU sim's observations stay on the device through the loop
    )  # fmt: skip
    checkpoint_config = loaded.record(str(cfg.base), str(cfg.which), str(cfg.get("protocol", "robosteer")))
    base_hash = checkpoint_config["base_hash"]  # None for a served base: its weights are the server's to keep
    base_metrics = base_evaluation(cfg, run_dir, eval_fn, base)
    if env is None:  # the learner trains between the robot's episodes
        metrics = steer_on_robot(steering, agent, offline, run_cfg, run_dir, eval_fn, checkpoint_config)
        if "base_eval" in metrics:  # measured on the arm, before anything was learned
            base_metrics = metrics.pop("base_eval")
            atomic_write_text(run_dir / "base_eval.json", json.dumps(base_metrics, indent=2))
    else:
        with env:
            metrics = run_loop(
                agent,
                env,
                run_cfg,
                str(run_dir),
                eval_fn=eval_fn,
                offline=offline,
                resume=bool(cfg.resume),
                checkpoint_config=checkpoint_config,
            )
    if base_hash is not None and state_dict_hash(base) != base_hash:
        raise RuntimeError(
            "the base policy's weights changed during steering: this is a bug, please report it"
        )
    metrics |= {"algo": algo, "task": task, "base_hash": base_hash, "offline": offline_file}
    metrics["base_success_rate"] = base_metrics["success_rate"] if base_metrics else None
    metrics |= lift(metrics["base_success_rate"], metrics.get("success_rate"))
    metrics["offline_transitions"] = 0 if offline is None else len(offline["reward"])
    metrics["steerability"] = check.as_dict() if check is not None else None
    if metrics["history"]:
        title = f"DSRL-{cfg.variant}" if algo == "dsrl" else agent.label.upper()
        plot_learning_curve(
            metrics["history"], run_dir / "plots" / "learning_curve.png", f"{title} on {task}"
        )
    return metrics


def lift(base: float | None, final: float | None) -> dict[str, float | None]:
    """``lift`` = final - base, and ``failures_removed`` = (final - base) / (1 - base), the share of the base's
    failures steering removed, so tasks whose bases start at different success compare (None: no base figure,
    or a base that never fails)."""
    if base is None or final is None:
        return {"lift": None, "failures_removed": None}
    return {"lift": final - base, "failures_removed": None if base >= 1.0 else (final - base) / (1.0 - base)}


def build_steering(cfg: DictConfig, algo: str, loaded: LoadedBase, device: Any) -> Steering:
    """What the learner reads and decodes through, checked before anything is trained."""
    base, task, served = loaded.policy, loaded.task, loaded.source == "served"
    to, ta = base.config.n_obs_steps, base.config.n_action_steps
    keys, obs_dim, embedding, own_encoder = actor_inputs(cfg, base, served)
    critic = asymmetric_critic(cfg, task, to, keys)  # DSRL's option (configs/algo/dsrl.yaml)
    if cfg.get("robot"):  # before anything is built: what steering on a robot cannot do yet
        check_robot_steering(cfg, algo, served, embedding)  # (learner= exists only with robot=: cli.py)
    exec_steps = ALGOS[algo][1](cfg, ta)  # env steps per MDP action
    offline_file = offline_path(cfg, algo, loaded.ckpt_dir)
    return Steering(
        cfg, base, task, keys, to, ta, exec_steps, obs_dim, device, offline_file, embedding, critic, own_encoder
    )  # fmt: skip


def run_config(cfg: DictConfig, device: Any) -> Any:
    """The loop's OnlineRunConfig: the ``run`` node plus the keys typed once at the top (env_steps, seed)."""
    from robosteer.policies.steering.loop import OnlineRunConfig
    from robosteer.scripts.schemas import TOP_LEVEL

    top = {key: cfg[key] for key in TOP_LEVEL["run"]} | {"device": str(device)}
    return OnlineRunConfig(**OmegaConf.to_container(cfg.run, resolve=True), **top)


def _main(cfg: DictConfig) -> None:
    from robosteer.real.learner import LearnerError
    from robosteer.real.steering import RobotSteeringError

    run_dir = start_run(cfg)
    with exit_codes("robosteer-steer"):  # bad dataset/checkpoint: 2; NaN loss: 1
        try:
            metrics = steer(cfg, run_dir)
        except RobotSteeringError as e:  # the arm is stopped, the episodes and the learner kept
            print(f"robosteer-steer: robot fault: {e}", file=sys.stderr)
            raise SystemExit(1) from None
        except LearnerError as e:  # the learner's process could not start (learner=ray)
            print(f"robosteer-steer: learner: {e}", file=sys.stderr)
            raise SystemExit(1) from None
    write_metrics(run_dir, metrics)
    if not metrics.get("check_only"):
        initial = "step-0 success" if metrics["algo"] == "expo" else "latent-0 success"
        row = {
            "task": metrics["task"],
            "variant": metrics["variant"],
            "env steps": metrics["env_steps"],
            "base success": metrics["base_success_rate"],
            initial: "-" if metrics["initial_success_rate"] is None else metrics["initial_success_rate"],
            "steered success": metrics["success_rate"],
            "lift": "-" if metrics.get("lift") is None else metrics["lift"],
            "failures removed": "-"
            if metrics.get("failures_removed") is None
            else metrics["failures_removed"],
            "wall s": metrics["wall_time_s"],
        }
        if metrics.get("success_ci95") and metrics.get("real_arm"):  # the arm's final judged block
            lo, hi = metrics["success_ci95"]
            row["final block (95% CI)"] = f"{metrics['final_block']['episodes']} ep. [{lo:.2f}, {hi:.2f}]"
        if check := metrics.get("steerability"):  # DSRL over a base policy only
            row["steerability"] = f"{check['ratio']:.2f} ({check['verdict']})"
        print(format_table([row]))
    print(f"metrics: {run_dir / 'metrics.json'}")


def main() -> None:
    """Console-script entry point."""
    console_main("robosteer-steer", "steer", _main)


if __name__ == "__main__":
    main()
