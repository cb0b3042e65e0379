"""A MuJoCo twin of a Meta-World task in its own process, reached over a websocket exactly like hardware.

Why: the runtime, the safety filter and the policy server can only be trusted on an arm if they were
exercised against something with an arm's failure modes. The twin runs on its own wall clock at
``rate_hz`` (Meta-World's 80 Hz is real time; the twin may be told to run faster or slower) and steps
whether or not a command arrived: with none due it holds (zero motion, gripper unchanged), as a real
controller does. Every message to and from it can be delayed (``latency_ms``, split equally between the
two directions, plus uniform ``jitter_ms``), observations get Gaussian noise (``obs_noise_std``), and
streaming packets (observations and commands) are dropped with ``drop_prob``. Control messages (hello,
reset, stop, ping) and the observation that ends an episode are delivered reliably but delayed.

Commands are timestamped: each carries the wall-clock time it should execute; the twin executes at each
step the newest command due by then and drops commands that arrive after their time (``stale`` count).

The link is authenticated: the driver generates a token per run (``secrets.token_urlsafe``) and hands it to
the twin process through multiprocessing's spawn pipe (neither argv nor the environment, so ``ps`` does not
show it); a connection whose ``hello`` lacks it is refused with the close reason ``unauthorized``, so no other
local process can reset or command the twin past the safety filter. The twin exits when the process that
spawned it dies (even by ``kill -9``): it polls its parent PID, since ``PR_SET_PDEATHSIG`` fires when the
spawning *thread* exits, which would kill a twin connected from a short-lived thread.

``real_mode``: the twin behaves as a real arm does, so the whole real-arm path runs in tests. Its observations
carry what the arm's sensors give (the configured keys: a state base's ``state`` stands for a tracker's poses,
a pixel base gets proprio and camera frames) and no success, reward or episode seed; episodes end only at
the time limit; and it never resets the scene itself: the runtime's ``reset`` starts an episode from the
scene as the person left it, and is refused when nobody reset it since the last one. The person's part
(putting the scene back, :meth:`SimTwinRobot.reset_scene`) and the hidden truth a scripted operator or judge
reads (:meth:`SimTwinRobot.hidden`: the full state, the success, the scripted expert's action for a person's
hands) travel outside the observation, for the test harness only (real/scripted.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import multiprocessing as mp
import os
import queue
import random
import secrets
import signal
import threading
import time
from typing import Any

import numpy as np

from robosteer.real.protocol import (
    PROTOCOL_VERSION,
    TWIN_REQUESTS,
    ProtocolError,
    check_hello,
    decode,
    encode,
    error_message,
    raise_if_error,
)
from robosteer.real.robot import ArraySpec, Observation, Robot, RobotError

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# The twin process

REAL_INFO = ("step", "done", "applied_action", "twin_stats")  # what a real-mode twin reports of itself


class _Twin:
    """The server side: env, clock, fault injection. Runs inside the twin process's event loop."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        from robosteer import sim

        self.cfg = cfg
        self.env = sim.MetaWorldEnv(
            cfg["task"],
            obs=cfg.get("obs", "state"),
            cameras=tuple(cfg.get("cameras") or ("corner",)),
            image_size=int(cfg.get("image_size", 84)),
            max_episode_steps=cfg.get("max_episode_steps"),
            seed=int(cfg.get("seed", 0)),
            terminate_on_success=bool(cfg.get("end_on_success", True)) and not cfg.get("real_mode"),
        )
        self.real_mode = bool(cfg.get("real_mode", False))
        self.scene_ready = False  # real mode: the person reset the scene since the last episode began
        self.success_any = False  # since the scene was reset: the hidden truth a scripted judge reads
        self.expert: Any = None  # real mode: the task's scripted expert, a scripted person's hands
        self.dt = 1.0 / float(cfg["rate_hz"])
        self.rng = random.Random(int(cfg.get("seed", 0)))
        self.np_rng = np.random.default_rng(int(cfg.get("seed", 0)))
        self.half_latency = float(cfg.get("latency_ms", 0.0)) / 2e3
        self.jitter = float(cfg.get("jitter_ms", 0.0)) / 1e3
        self.drop_prob = float(cfg.get("drop_prob", 0.0))
        self.obs_noise_std = float(cfg.get("obs_noise_std", 0.0))
        self.ws: Any = None
        self.active = False
        self.commands: list[tuple[float, np.ndarray]] = []  # (target time, action), sorted by time
        self.last_action = np.zeros(4)
        self.seq = 0
        self.stats = {"steps": 0, "held": 0, "stale": 0, "dropped_obs": 0, "dropped_cmd": 0, "overruns": 0}
        self._out_time = 0.0  # delivery times stay monotonic (a TCP stream does not reorder)
        self._in_time = 0.0
        token = cfg.get("token")
        if not isinstance(token, str) or not token:
            raise ValueError("the sim twin needs cfg['token'] (its driver generates one per run)")
        self.token = token.encode("utf-8", "surrogatepass")

    def _delay(self, direction: str) -> float:
        now = time.monotonic()
        d = self.half_latency + (self.rng.uniform(0.0, self.jitter) if self.jitter > 0 else 0.0)
        attr = "_out_time" if direction == "out" else "_in_time"
        t = max(now + d, getattr(self, attr))
        setattr(self, attr, t)
        return t - now

    def _send_later(self, msg: dict[str, Any], reliable: bool = True) -> None:
        if not reliable and self.drop_prob > 0 and self.rng.random() < self.drop_prob:
            self.stats["dropped_obs"] += 1
            return
        data = encode(msg)
        ws = self.ws

        async def deliver() -> None:
            with contextlib.suppress(Exception):  # the driver went away; the handler notices it
                await ws.send(data)

        loop = asyncio.get_running_loop()
        loop.call_later(self._delay("out"), lambda: asyncio.ensure_future(deliver()))

    def _obs_msg(self, obs: dict[str, np.ndarray], info: dict[str, Any], done: bool) -> dict[str, Any]:
        """Every observation key as it is (images stay uint8 on the wire); noise on the measured floats."""
        out = {}
        for key, value in obs.items():
            if value.dtype != np.uint8:
                noise = (
                    self.np_rng.normal(0.0, self.obs_noise_std, size=value.shape).astype(np.float32)
                    if self.obs_noise_std > 0
                    else 0.0
                )
                value = (value + noise).astype(np.float32)
            out[key] = value
        self.seq += 1
        msg = {
            "type": "obs",
            "seq": self.seq,
            "timestamp": time.time(),
            "obs": out,
            "info": {**info, "done": done},
        }
        if self.real_mode:  # what an arm reports of itself; the truth goes to the harness, apart
            msg["info"] = {k: v for k, v in msg["info"].items() if k in REAL_INFO}
            msg["harness"] = self._hidden(info.get("success", False))
        return msg

    def _hidden(self, success: bool) -> dict[str, Any]:
        """The truth behind a real-mode observation: the full state (no noise) and the success, now and at
        any step since the scene was reset."""
        self.success_any = self.success_any or bool(success)
        state = np.asarray(self.env._mw._get_obs(), dtype=np.float32)  # (39,)
        if self.expert is None:
            from robosteer.sim.experts import ScriptedExpert

            self.expert = ScriptedExpert(self.env.task)
        expert = self.expert.act({"state": state})  # (4,) what a person's hands would do now
        return {
            "state": state,
            "success": bool(success),
            "success_any": self.success_any,
            "expert_action": expert,
        }

    def _handle(self, msg: dict[str, Any]) -> None:
        kind = msg["type"]
        if kind == "command":
            acts = np.asarray(msg.get("actions"), dtype=np.float64)
            ts = np.asarray(msg.get("timestamps"), dtype=np.float64).reshape(-1)
            if acts.ndim != 2 or acts.shape[1] != 4 or len(ts) != len(acts):
                self._send_later(
                    error_message(
                        "bad_shape",
                        f"command actions {acts.shape} / timestamps {ts.shape}: expected (K, 4) / (K,)",
                    )
                )
                return
            if not np.isfinite(acts).all():
                self._send_later(error_message("bad_value", "command holds NaN/Inf: ignored, arm holds"))
                return
            now = time.time()
            for t, a in zip(ts, acts):
                if t < now - self.dt:
                    self.stats["stale"] += 1  # arrived after its time: never executed late
                else:
                    self.commands.append((float(t), a))
            self.commands.sort(key=lambda c: c[0])
        elif kind == "scene":  # the harness's person puts the scene back (real mode's only reset)
            self.active = False
            self.commands.clear()
            obs, info = self.env.reset(seed=None if msg.get("seed") is None else int(msg["seed"]))
            self.scene_ready, self.success_any, self._scene_obs = True, False, obs
            self._send_later(
                {"type": "scene_ok", "id": msg.get("id"), "episode_seed": int(info["episode_seed"])}
            )
        elif kind == "reset" and self.real_mode:
            self._begin_real_episode(msg)
        elif kind == "reset":
            seed = msg.get("seed")
            obs, info = self.env.reset(seed=None if seed is None else int(seed))
            self.commands.clear()
            self.last_action = np.zeros(4)
            self.active = True
            info = {"step": 0, "success": False, "reward": 0.0, "episode_seed": int(info["episode_seed"])}
            reply = self._obs_msg(obs, info, done=False)
            reply["type"] = "reset_ok"
            reply["id"] = msg.get("id")
            self._send_later(reply)
        elif kind == "stop":
            self.active = False
            self.commands.clear()
            self._send_later({"type": "stop_ok", "id": msg.get("id")})
        elif kind == "ping":
            self._send_later({"type": "pong", "id": msg.get("id"), "stats": dict(self.stats)})

    def _begin_real_episode(self, msg: dict[str, Any]) -> None:
        """Real mode: an episode starts from the scene as the person left it, never from one the twin resets."""
        if not self.scene_ready:
            why = "real mode: nobody reset the scene since the last episode began (resets=operator: the person does)"
            self._send_later(error_message("no_scene", why) | {"id": msg.get("id")})
            return
        self.scene_ready = False
        self.commands.clear()
        self.last_action = np.zeros(4)
        self.active = True
        reply = self._obs_msg(self._scene_obs, {"step": 0, "success": False}, done=False)
        self._send_later(reply | {"type": "reset_ok", "id": msg.get("id")})

    def step(self) -> None:
        """One control period: execute the newest due command (or hold), step, publish the observation."""
        now = time.time()
        due = [c for c in self.commands if c[0] <= now + self.dt / 2]
        if due:
            action = due[-1][1]
            self.commands = [c for c in self.commands if c[0] > now + self.dt / 2]
        else:
            action = np.array([0.0, 0.0, 0.0, self.last_action[3]])
            self.stats["held"] += 1
        self.last_action = action
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.stats["steps"] += 1
        done = bool(terminated or truncated)
        out_info = {
            "step": int(info["episode_length"]),
            "success": bool(info["success"]),
            "reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "episode_seed": int(info["episode_seed"]),
            "applied_action": action.astype(np.float32),
        }
        if self.real_mode:  # a real arm's episode ends at its time limit, never at a success nobody reports
            done = bool(truncated)
        if done:
            self.active = False
            out_info["twin_stats"] = dict(self.stats)
        self._send_later(self._obs_msg(obs, out_info, done), reliable=done)

    async def clock(self) -> None:
        next_t = time.monotonic()
        while True:
            next_t += self.dt
            if self.active and self.ws is not None:
                self.step()
            delay = next_t - time.monotonic()
            if delay < 0:
                self.stats["overruns"] += 1
                next_t = time.monotonic()
            # Always yield, even when late: the observations scheduled for delivery and the driver's commands
            # run in this loop, so a twin that overran every period (slow renders) would send nothing.
            await asyncio.sleep(max(delay, 0.0))

    def _check_token(self, hello: dict[str, Any]) -> str | None:
        """None when ``hello`` carries this run's token, else why it is refused."""
        got = hello.get("token")
        if not isinstance(got, str):
            return "missing token in hello (the twin only takes the driver that spawned it)"
        if not hmac.compare_digest(got.encode("utf-8", "surrogatepass"), self.token):
            return "wrong token in hello"
        return None

    async def handler(self, ws: Any) -> None:
        try:
            hello = decode(await asyncio.wait_for(ws.recv(), 10.0), allowed_types=("hello",))
            check_hello(hello)
            refused = self._check_token(hello)
        except ProtocolError as e:
            await ws.send(encode(error_message(e.code, str(e))))
            await ws.close(code=1002, reason=e.code)
            return
        except Exception:
            return
        if refused is not None:
            with contextlib.suppress(Exception):
                await ws.send(encode(error_message("unauthorized", refused)))
                await ws.close(code=1008, reason=f"unauthorized: {refused}"[:120])
            return
        mw = self.env._mw
        self.ws = ws
        await ws.send(
            encode(
                {
                    "type": "hello_ok",
                    "version": PROTOCOL_VERSION,
                    "task": self.env.task,
                    "rate_hz": 1.0 / self.dt,
                    "sim_rate_hz": 1.0 / self.env.dt,  # the simulator's step rate (Meta-World: 80 Hz)
                    "max_episode_steps": self.env.max_episode_steps,
                    "state_dim": 39,
                    "action_dim": 4,
                    "obs_spec": {  # key -> [shape, dtype] of every observation the twin streams
                        k: [list(space.shape), str(space.dtype)]
                        for k, space in self.env.observation_space.spaces.items()
                    },
                    "workspace_low": np.asarray(mw.mocap_low, dtype=np.float64),
                    "workspace_high": np.asarray(mw.mocap_high, dtype=np.float64),
                    "delta_scale": float(mw.action_scale),
                }
            )
        )
        loop = asyncio.get_running_loop()
        try:
            async for raw in ws:
                try:
                    msg = decode(raw, allowed_types=TWIN_REQUESTS)
                except ProtocolError as e:
                    self._send_later(error_message(e.code, str(e)))
                    continue
                if msg["type"] == "close":
                    break
                if msg["type"] == "command" and self.drop_prob > 0 and self.rng.random() < self.drop_prob:
                    self.stats["dropped_cmd"] += 1
                    continue
                loop.call_later(self._delay("in"), self._handle, msg)
        except Exception:
            pass
        finally:
            self.active = False
            self.ws = None


async def _parent_gone(parent_pid: int, period_s: float = 0.2) -> None:
    """Returns once the process that spawned this one has died (this process is then reparented)."""
    while os.getppid() == parent_pid:
        await asyncio.sleep(period_s)


def _twin_main(cfg: dict[str, Any], port_q: Any) -> None:
    """Entry point of the twin process: serve on 127.0.0.1, report the bound port, exit with the parent."""
    import torch

    torch.set_num_threads(1)
    parent_pid = int(cfg.get("parent_pid") or os.getppid())
    # Ctrl-C at a terminal reaches the whole process group: the robot must not vanish under the run that
    # drives it, which stops it itself (disconnect) or dies with it (the watch below)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    async def main() -> None:
        from websockets.asyncio.server import serve

        twin = _Twin(cfg)
        async with serve(
            twin.handler, cfg.get("host", "127.0.0.1"), int(cfg.get("port", 0)), ping_interval=None
        ) as server:
            port_q.put(int(next(iter(server.sockets)).getsockname()[1]))
            clock = asyncio.create_task(twin.clock())
            orphaned = asyncio.create_task(_parent_gone(parent_pid))
            done, _ = await asyncio.wait({clock, orphaned}, return_when=asyncio.FIRST_COMPLETED)
            clock.cancel()
            orphaned.cancel()
            if clock in done:
                clock.result()  # the clock only ends by raising
            log.warning("sim twin: parent process %d is gone, exiting", parent_pid)

    try:
        asyncio.run(main())
    except Exception as e:
        port_q.put(f"error: {type(e).__name__}: {e}")


# --------------------------------------------------------------------------------------------------
# The driver


class SimTwinRobot(Robot):
    """The driver side of the twin: spawns the twin process (or connects to ``port``) and speaks to it.

    Args:
        task: Meta-World task of the twin.
        rate_hz: the twin's control rate (80 = Meta-World real time).
        latency_ms: injected round-trip delay (half each way); jitter_ms: extra uniform one-way delay.
        obs_noise_std: Gaussian noise on the state (and proprio); drop_prob: streaming-packet loss probability.
        obs: what the twin streams, a sim observation mode ("state"; "pixels": proprio + camera images, as a
            real arm's drivers give them); cameras, image_size: the rendered views (obs other than "state").
        end_on_success: end an episode at the task's success (False: at its time limit only, as a real arm,
            so a learner paid by an operator or a classifier cannot read the success from the episode's end).
        real_mode: behave as a real arm (module docstring): no success, reward or seed in the observations,
            episodes end at the time limit, and only :meth:`reset_scene` (the person) resets the scene.
        spawn: start the twin process here; False connects to a twin already listening on ``port``.
        token: the twin's link token; with ``spawn`` a fresh one is generated per connect when None,
            without it the token of the twin listening on ``port`` (it refuses any other).
    """

    control_modes = ("ee_delta",)

    def __init__(
        self,
        task: str = "push-v3",
        rate_hz: float = 80.0,
        latency_ms: float = 0.0,
        jitter_ms: float = 0.0,
        obs_noise_std: float = 0.0,
        drop_prob: float = 0.0,
        seed: int = 0,
        max_episode_steps: int | None = None,
        end_on_success: bool = True,
        real_mode: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        spawn: bool = True,
        timeout_s: float = 10.0,
        control_mode: str | None = None,
        token: str | None = None,
        obs: str = "state",
        cameras: tuple[str, ...] | list[str] = ("corner",),
        image_size: int = 84,
    ) -> None:
        super().__init__(control_mode)
        from robosteer.sim.obs_modes import OBS_MODES

        if obs not in OBS_MODES:
            raise ValueError(f"obs={obs!r} is not valid for the sim twin: expected one of {list(OBS_MODES)}")
        if not 0.0 <= drop_prob < 1.0:
            raise ValueError(f"drop_prob={drop_prob} is not valid: expected 0 <= drop_prob < 1")
        if rate_hz <= 0 or latency_ms < 0 or jitter_ms < 0:
            raise ValueError(
                f"rate_hz must be > 0 and latency_ms, jitter_ms >= 0, got {rate_hz}, {latency_ms}, {jitter_ms}"
            )
        self.rate_hz = float(rate_hz)
        self.cfg = {
            "task": task,
            "rate_hz": float(rate_hz),
            "latency_ms": float(latency_ms),
            "jitter_ms": float(jitter_ms),
            "obs_noise_std": float(obs_noise_std),
            "drop_prob": float(drop_prob),
            "seed": int(seed),
            "max_episode_steps": max_episode_steps,
            "end_on_success": bool(end_on_success),
            "real_mode": bool(real_mode),
            "host": host,
            "port": int(port),
            "obs": obs,
            "cameras": list(cameras),
            "image_size": int(image_size),
        }
        self.spawn = spawn
        self._token = token  # never in self.cfg: that dict is what callers may record
        self._link_token: str | None = None
        self.timeout_s = float(timeout_s)
        self._hidden: dict[str, Any] | None = None  # real mode: the harness's truth behind the latest obs
        self.process: mp.process.BaseProcess | None = None
        self._ws: Any = None
        self._reader: threading.Thread | None = None
        self._latest: Observation | None = None
        self._obs_lock = threading.Lock()
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._errors: list[str] = []
        self._latency_s = 0.0
        self.twin: dict[str, Any] = {}
        self._last_action = np.zeros(4)
        self._next_id = 0

    # ------------------------------------------------------------------ specs
    @property
    def data_rate_hz(self) -> float:
        """Meta-World's own step rate (80 Hz), whatever pace the twin runs at: one recorded step is one
        simulator step (the rate the twin announced; its control rate before it connects)."""
        return float(getattr(self, "_sim_rate_hz", self.rate_hz))

    @property
    def action_spec(self) -> ArraySpec:
        return ArraySpec((4,), "float32", (-1.0,) * 4, (1.0,) * 4)

    @property
    def observation_spec(self) -> dict[str, ArraySpec]:
        spec = self.twin.get("obs_spec")
        if spec is None:  # before connect: what the configured mode will stream
            keys = {"state": ((39,), "float32")} if "state" in self.cfg["obs"] else {}
            if "pixels" in self.cfg["obs"]:
                keys["proprio"] = ((4,), "float32")
            if self.cfg["obs"] != "state":
                size = self.cfg["image_size"]
                keys |= {f"image/{c}": ((size, size, 3), "uint8") for c in self.cfg["cameras"]}
            return {k: ArraySpec(shape, dtype) for k, (shape, dtype) in keys.items()}
        return {k: ArraySpec(tuple(shape), dtype) for k, (shape, dtype) in spec.items()}

    @property
    def is_connected(self) -> bool:
        return self._ws is not None and (self.process is None or self.process.is_alive())

    # ------------------------------------------------------------------ connection
    def connect(self) -> None:
        from websockets.sync.client import connect

        port = self.cfg["port"]
        token = self._token
        if self.spawn:
            token = token or secrets.token_urlsafe(32)
            ctx = mp.get_context("spawn")
            port_q = ctx.Queue()
            # the token travels in the pickled args over the spawn pipe, not in argv or the environment
            child_cfg = {**self.cfg, "token": token, "parent_pid": os.getpid()}
            self.process = ctx.Process(
                target=_twin_main, args=(child_cfg, port_q), daemon=True, name="sim-twin"
            )
            self.process.start()
            try:
                got = port_q.get(timeout=60.0)
            except queue.Empty:
                self.disconnect()
                raise RobotError("sim twin process did not start within 60 s") from None
            if isinstance(got, str):
                self.disconnect()
                raise RobotError(f"sim twin process failed: {got}")
            port = got
        self._link_token = token  # this run's (tests and a second driver with spawn=False read it)
        url = f"ws://{self.cfg['host']}:{port}"
        try:
            self._ws = connect(url, open_timeout=self.timeout_s, close_timeout=1.0)
            self._ws.send(encode({"type": "hello", "version": PROTOCOL_VERSION, "token": token}))
            hello = decode(self._ws.recv(timeout=self.timeout_s))
            raise_if_error(hello)
        except Exception as e:
            self.disconnect()
            raise RobotError(f"cannot connect to the sim twin at {url}: {e}") from e
        self.twin = hello
        self.rate_hz = float(hello["rate_hz"])
        self._sim_rate_hz = float(hello.get("sim_rate_hz", self.rate_hz))
        self._reader = threading.Thread(target=self._read_loop, name="sim-twin-reader", daemon=True)
        self._reader.start()
        rtts = [self.ping() for _ in range(3)]
        self._latency_s = float(np.median(rtts)) / 2

    def _read_loop(self) -> None:
        ws = self._ws
        try:
            for raw in ws:
                try:
                    msg = decode(raw)
                except ProtocolError as e:
                    self._errors.append(str(e))
                    continue
                if msg["type"] == "obs":
                    ob = Observation(
                        dict(msg["obs"]), float(msg["timestamp"]), int(msg["seq"]), dict(msg["info"])
                    )
                    with self._obs_lock:
                        if self._latest is None or ob.seq > self._latest.seq:
                            self._latest = ob
                            self._hidden = msg.get("harness")
                elif msg["type"] == "error" and msg.get("id") is not None:
                    self._replies.put(msg)  # a request refused: its caller raises with the reason
                elif msg["type"] == "error":
                    self._errors.append(f"{msg.get('code')}: {msg.get('message')}")
                else:
                    self._replies.put(msg)
        except Exception as e:
            self._errors.append(f"connection lost: {e}")
        finally:
            self._replies.put({"type": "closed"})

    def _request(self, msg: dict[str, Any], expect: str) -> dict[str, Any]:
        if self._ws is None:
            raise RobotError("sim twin is not connected")
        self._next_id += 1
        msg["id"] = self._next_id
        deadline = time.monotonic() + self.timeout_s
        try:
            self._ws.send(encode(msg))
            while True:  # skip late replies to earlier requests (a stop sent at the end of an episode)
                reply = self._replies.get(timeout=max(deadline - time.monotonic(), 1e-3))
                if reply["type"] == "closed" or reply.get("id") == msg["id"]:
                    break
        except queue.Empty:
            raise RobotError(f"sim twin did not answer {msg['type']!r} within {self.timeout_s} s") from None
        except Exception as e:
            raise RobotError(f"sim twin connection failed during {msg['type']!r}: {e}") from e
        if reply["type"] == "error":
            raise RobotError(f"sim twin refused {msg['type']!r}: {reply.get('message')}")
        if reply["type"] != expect:
            raise RobotError(
                f"sim twin answered {msg['type']!r} with {reply['type']!r} (errors: {self._errors[-3:]})"
            )
        return reply

    def ping(self) -> float:
        """Round trip through the injected delay, in seconds."""
        t0 = time.perf_counter()
        self.last_stats = self._request({"type": "ping"}, "pong")["stats"]
        return time.perf_counter() - t0

    # ------------------------------------------------------------------ the Robot interface
    def reset(self, seed: int | None = None) -> Observation:
        reply = self._request({"type": "reset", "seed": seed}, "reset_ok")
        ob = Observation(
            dict(reply["obs"]), float(reply["timestamp"]), int(reply["seq"]), dict(reply["info"])
        )
        with self._obs_lock:
            self._latest, self._hidden = ob, reply.get("harness")
        self._last_action = np.zeros(4)
        return ob

    def reset_scene(self, seed: int | None = None) -> int:
        """Real mode's person: put the scene back (the initial state of ``seed``); the test harness's reset,
        never the runtime's. Returns the episode seed the scene was drawn from."""
        return int(self._request({"type": "scene", "seed": seed}, "scene_ok")["episode_seed"])

    def hidden(self) -> dict[str, Any] | None:
        """Real mode: the truth behind the latest observation (``state`` (39,), ``success``, ``success_any``
        since the scene was reset), for a scripted operator or judge in the test harness only; the control
        loop and the learner never read it."""
        with self._obs_lock:
            return self._hidden

    def get_observation(self) -> Observation:
        with self._obs_lock:
            ob = self._latest
        if ob is None:
            raise RobotError("sim twin has sent no observation yet: call reset() first")
        if not self.is_connected:
            raise RobotError(
                f"sim twin connection lost ({self._errors[-1] if self._errors else 'process gone'})"
            )
        return ob

    def send_action(self, action: np.ndarray, timestamp: float | None = None) -> None:
        a = np.asarray(action, dtype=np.float64).reshape(-1, 4)  # (K, 4)
        ts = (
            np.full(len(a), time.time() if timestamp is None else float(timestamp))
            if np.ndim(timestamp) == 0
            else np.asarray(timestamp, dtype=np.float64)
        )
        if self._ws is None:
            raise RobotError("sim twin is not connected")
        try:
            self._ws.send(encode({"type": "command", "actions": a, "timestamps": ts}))
        except Exception as e:
            raise RobotError(f"sim twin connection lost while sending a command: {e}") from e
        self._last_action = a[-1]

    def hold_action(self, obs: Observation | None, last_action: np.ndarray | None) -> np.ndarray:
        g = float((self._last_action if last_action is None else last_action)[3])
        return np.array([0.0, 0.0, 0.0, g])

    def stop(self) -> None:
        if self._ws is None:
            return
        with contextlib.suppress(Exception):
            self._ws.send(encode({"type": "stop"}))

    def command_latency_s(self) -> float:
        return self._latency_s

    def safety_defaults(self) -> dict[str, Any]:
        """Workspace and scales the twin reported (the safety config's defaults for this robot)."""
        return {
            "kind": "delta",
            "command_low": [-1.0] * 4,
            "command_high": [1.0] * 4,
            "gripper_index": 3,
            "pos_dims": [0, 1, 2],
            "delta_scale": float(self.twin.get("delta_scale", 0.01)),
            "workspace_low": [float(v) for v in self.twin.get("workspace_low", [-0.5, 0.4, 0.05])],
            "workspace_high": [float(v) for v in self.twin.get("workspace_high", [0.5, 1.0, 0.5])],
            # the hand's xyz: the first three entries of state, and of proprio (obs=pixels streams no state)
            "position_key": "state" if "state" in self.cfg["obs"] else "proprio",
            "position_slice": [0, 3],
        }

    def disconnect(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                ws.send(encode({"type": "close"}))
                ws.close()
            except Exception:
                pass
        if self._reader is not None:
            self._reader.join(2.0)
        if self.process is not None:
            self.process.join(0.5)
            if self.process.is_alive():
                self.process.terminate()
                self.process.join(2.0)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(2.0)
            self.process = None
