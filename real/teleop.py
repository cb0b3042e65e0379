"""Human intervention (HIL-SERL): a person takes the arm over with a teleoperation device, and hands it back.

Why this shape: HIL-SERL learns fastest when a person corrects the policy in the moment, and the control
loop must not care who is in control. So the loop asks a :class:`Teleop` at every tick for
``command(obs)``: a command in the robot's own command space while the person holds control, ``None``
while the policy has it. That command then goes through the safety filter like any policy's; when the
person hands back, the loop re-plans from the current observation (the policy's old chunk is stale). The
interface is LeRobot's ``Teleoperator`` shape (connect, disconnect, one call per tick), small enough that a
scripted operator is one subclass that decides from ``obs`` when to take over.

Two layers under :class:`DeviceTeleop`, so that devices and robots combine freely:
- a device (:class:`KeyboardDevice` with pynput, :class:`SpaceMouseDevice` with pyspacemouse,
  :class:`GamepadDevice` with pygame) gives a :class:`DeviceReading`: 6 axes in [-1, 1] (x, y, z, roll,
  pitch, yaw as the device gives them), a gripper request and whether the person holds control. Each
  library is optional (``pip install 'robosteer[teleop]'``) and imported only when its device connects;
  every device takes an injected backend, so its logic is tested without the library or the hardware;
- a mapping turns a reading and the current observation into the driver's command:

| mapping        | driver (control mode)    | command                     | = (axes clipped to [-1, 1])      |
| -------------- | ------------------------ | --------------------------- | -------------------------------- |
| delta          | sim twin / Meta-World    | (4,) xyz + gripper, [-1, 1] | axes[0:3] * speed, gripper       |
| joint_delta    | UR joint_delta           | (6,) + gripper, [-1, 1]     | axes[:6] * speed, gripper        |
| joint_position | UR joint_position, ROS 2 | (n,) + gripper, rad         | q + axes[:n] * step_rad, gripper |

The gripper dim is optional (delta: (3,); the joint mappings: ``command_dim`` one more than the joints);
``q`` is the current joints, ``obs[obs_key]``; the UR driver scales a joint_delta command by its
``delta_scale`` rad. Joints follow the device axes in order: x -> base, y -> shoulder, z -> elbow, roll,
pitch, yaw -> wrists 1, 2, 3 (joints past the sixth stay put). The gripper is -1 open .. +1 close
(Meta-World's sign, and the UR driver's "> 0 closes"); a reading without a gripper request keeps the last
value, which starts at ``gripper_init`` and follows the commands the loop reports through
:meth:`Teleop.note_command`, so taking over never opens a hand the policy had closed.

A non-finite reading or command never leaves :class:`DeviceTeleop`: it counts as not engaged
(``nonfinite`` counts them). A device that disappears mid-run raises :class:`TeleopError` (the loop stops
the arm) rather than silently handing control back.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

# The pinned versions of the optional ``teleop`` extra (the install line every missing library names).
PINS = {"pynput": "1.8.2", "pyspacemouse": "2.1.0", "pygame": "2.6.1"}


class TeleopError(RuntimeError):
    """A teleoperation device is missing, cannot start, or was lost mid-run."""


def _near(name: str, choices: Sequence[str]) -> str:
    near = difflib.get_close_matches(str(name), list(choices), n=1)
    return f"; nearest valid choice: {near[0]!r}" if near else ""


def _require(module: str, teleop: str, hint: str) -> Any:
    """Import ``module`` for ``teleop=<teleop>``; a missing or broken library is a one-line TeleopError."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        root = module.split(".")[0]
        if (e.name or root).split(".")[0] != root:  # the library is there, one of its dependencies is not
            raise TeleopError(f"teleop={teleop}: {root} cannot load ({e}); {hint}") from None
        raise TeleopError(
            f"teleop={teleop} needs {root}: pip install 'robosteer[teleop]' ({root}=={PINS[root]})"
        ) from None
    except Exception as e:  # pynput without a display raises ImportError with a multi-line message
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TeleopError(f"teleop={teleop}: {module} cannot start here ({first}); {hint}") from None


# --------------------------------------------------------------------------------------------------
# The interface the control loop sees


class Teleop(ABC):
    """Who holds the arm this tick: ``command(obs)`` is the person's command, or ``None`` (the policy's turn).

    HIL-SERL interventions: the person takes over at any moment and hands back when they like; the loop
    sends the returned command through the safety filter, records the step as an intervention, and on
    hand-back (the first ``None`` after commands) re-plans from the current observation. Subclass and
    implement :meth:`command` for a scripted operator; override :meth:`connect`/:meth:`disconnect` (calling
    ``super()``) when there is something to open.
    """

    _connected = False

    @property
    def is_connected(self) -> bool:
        return self._connected

    def connect(self) -> None:
        """Open the device; raise :class:`TeleopError` with the reason when it cannot."""
        self._connected = True

    def disconnect(self) -> None:
        """Release the device. Idempotent."""
        self._connected = False

    def reset(self) -> None:
        """A new episode starts (the loop calls it after the robot's reset); default: nothing to clear."""
        return None

    def note_command(self, command: np.ndarray) -> None:
        """The command the loop just executed (policy's or person's, after the safety filter); optional.

        Lets a device teleop start from the gripper state the policy left rather than a default.
        """
        return None

    @abstractmethod
    def command(self, obs: Mapping[str, np.ndarray]) -> np.ndarray | None:
        """The person's command in the robot's command space while they hold control, else ``None``."""

    def __enter__(self) -> Teleop:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()


# --------------------------------------------------------------------------------------------------
# Devices


@dataclass(frozen=True)
class DeviceReading:
    """One reading of a device: ``axes`` (6,) x, y, z, roll, pitch, yaw in [-1, 1] as the device gives them;
    ``gripper`` -1 open .. +1 close, ``None`` to leave it unchanged; ``engaged``: the person holds control."""

    axes: np.ndarray
    gripper: float | None = None
    engaged: bool = False

    def __post_init__(self) -> None:
        axes = np.asarray(self.axes, dtype=np.float64).reshape(-1)
        if axes.shape != (6,):
            raise ValueError(
                f"DeviceReading.axes has {axes.shape[0]} values, expected 6 (x y z roll pitch yaw)"
            )
        object.__setattr__(self, "axes", axes)

    @property
    def is_finite(self) -> bool:
        return bool(np.isfinite(self.axes).all() and (self.gripper is None or np.isfinite(self.gripper)))


class TeleopDevice(ABC):
    """A teleoperation device: ``connect`` (imports its library unless a backend was injected), ``read``."""

    name = ""

    @abstractmethod
    def connect(self) -> None: ...

    @abstractmethod
    def disconnect(self) -> None:
        """Release the device. Idempotent."""

    @abstractmethod
    def read(self) -> DeviceReading:
        """The device's state now (never blocks)."""


def _key_name(key: Any) -> str | None:
    """pynput's key -> 'w', 'space', ...: a ``KeyCode`` has ``char``, a ``Key`` member has ``name``."""
    char = getattr(key, "char", None)
    if char:
        return str(char).lower()
    name = getattr(key, "name", None)
    return str(name) if name else None


class KeyboardDevice(TeleopDevice):
    """The keyboard through pynput's listener thread (needs an X display, or root for uinput, on Linux).

    Keymap (each movement key gives a full-deflection axis while held; opposite keys cancel):
        space  toggle control (take over / hand back)
        w / s  +x / -x        a / d  +y / -y        r / f  +z / -z
        u / o  +roll / -roll  i / k  +pitch / -pitch  j / l  +yaw / -yaw
        q / e  gripper close / open while held (released: unchanged)

    ``listener_factory(on_press, on_release)`` replaces ``pynput.keyboard.Listener`` (tests); the listener
    needs ``start()`` and ``stop()``, and calls back with objects carrying ``char`` or ``name``.
    """

    name = "keyboard"
    # fmt: off
    AXES: ClassVar[dict[str, tuple[int, int]]] = {  # key -> (axis, sign)
        "w": (0, 1), "s": (0, -1), "a": (1, 1), "d": (1, -1), "r": (2, 1), "f": (2, -1),
        "u": (3, 1), "o": (3, -1), "i": (4, 1), "k": (4, -1), "j": (5, 1), "l": (5, -1),
    }
    # fmt: on
    GRIPPER: ClassVar[dict[str, float]] = {"q": 1.0, "e": -1.0}
    TOGGLE = "space"

    def __init__(self, listener_factory: Callable[..., Any] | None = None) -> None:
        self._factory = listener_factory
        self._listener: Any = None
        self._lock = threading.Lock()
        self._down: set[str] = set()
        self._engaged = False

    def connect(self) -> None:
        factory = self._factory
        if factory is None:
            hint = "pynput needs an X display (DISPLAY) or root for uinput on Linux"
            factory = _require("pynput.keyboard", self.name, hint).Listener
        self._listener = factory(on_press=self._on_press, on_release=self._on_release)
        self._listener.start()

    def disconnect(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()
        with self._lock:
            self._down.clear()
            self._engaged = False

    def _on_press(self, key: Any) -> None:
        name = _key_name(key)
        if name is None:
            return
        with self._lock:
            if name == self.TOGGLE and name not in self._down:  # key auto-repeat must not toggle again
                self._engaged = not self._engaged
            self._down.add(name)

    def _on_release(self, key: Any) -> None:
        name = _key_name(key)
        with self._lock:
            self._down.discard(name or "")

    def read(self) -> DeviceReading:
        with self._lock:
            down, engaged = set(self._down), self._engaged
        axes = np.zeros(6)
        for key in down & self.AXES.keys():
            i, sign = self.AXES[key]
            axes[i] += sign
        grips = {self.GRIPPER[k] for k in down & self.GRIPPER.keys()}
        gripper = grips.pop() if len(grips) == 1 else None  # both held: ambiguous, unchanged
        return DeviceReading(axes, gripper, engaged)


class SpaceMouseDevice(TeleopDevice):
    """A 3Dconnexion SpaceMouse through pyspacemouse (needs hidapi: ``apt-get install libhidapi-dev``).

    Mapping: the 6 axes as pyspacemouse reports them (x, y, z, roll, pitch, yaw), clipped to [-1, 1], each
    zeroed below ``deadzone``. Engaged while any axis is past the deadzone or either button is held
    (HIL-SERL's convention: touching the mouse takes over; letting go hands back). Left button: gripper
    close; right button: gripper open (neither or both: unchanged).

    ``backend`` replaces ``pyspacemouse.open()`` (tests): an object with ``read()`` -> a state with
    ``x y z roll pitch yaw`` and ``buttons``, and ``close()``.
    """

    name = "spacemouse"

    def __init__(self, deadzone: float = 0.05, backend: Any = None) -> None:
        if not 0.0 <= deadzone < 1.0:
            raise ValueError(f"deadzone={deadzone} is not valid: expected 0 <= deadzone < 1")
        self.deadzone = float(deadzone)
        self._injected = backend
        self._dev: Any = None

    def connect(self) -> None:
        if self._injected is not None:
            self._dev = self._injected
            return
        hint = "pyspacemouse needs hidapi (apt-get install libhidapi-dev) and read access to the device"
        pyspacemouse = _require("pyspacemouse", self.name, hint)
        try:
            dev = pyspacemouse.open()  # 2.x raises when no device is found, 1.x returns None
        except Exception as e:
            raise TeleopError(f"teleop={self.name}: no SpaceMouse opened ({e})") from None
        if dev is None:
            raise TeleopError(f"teleop={self.name}: no SpaceMouse found; {hint}")
        self._dev = dev

    def disconnect(self) -> None:
        dev, self._dev = self._dev, None
        if dev is not None and hasattr(dev, "close"):
            dev.close()

    def read(self) -> DeviceReading:
        if self._dev is None:
            raise TeleopError(f"teleop={self.name} is not connected: call connect() first")
        state = self._dev.read()
        if state is None:
            raise TeleopError(f"teleop={self.name}: the SpaceMouse returned no state (unplugged?)")
        raw = np.array([getattr(state, k) for k in ("x", "y", "z", "roll", "pitch", "yaw")], dtype=np.float64)
        axes = np.clip(raw, -1.0, 1.0)
        axes[np.abs(raw) < self.deadzone] = 0.0  # a NaN compares False and stays NaN (never engages)
        buttons = [bool(b) for b in list(getattr(state, "buttons", []))[:2]] + [False, False]
        left, right = buttons[0], buttons[1]
        gripper = 1.0 if left and not right else -1.0 if right and not left else None
        moved = bool((np.abs(raw) >= self.deadzone).any())
        return DeviceReading(axes, gripper, moved or left or right)


class _PygameJoystick:
    """pygame's joystick ``index`` with the event pump its state needs (SDL updates it on pump)."""

    def __init__(self, pygame: Any, index: int) -> None:
        self._pg = pygame
        pygame.display.init()  # the event pump needs video: SDL_VIDEODRIVER=dummy keeps it headless
        pygame.joystick.init()
        if pygame.joystick.get_count() <= index:
            count = pygame.joystick.get_count()
            pygame.joystick.quit()
            pygame.display.quit()
            raise TeleopError(f"teleop=gamepad: no gamepad {index} ({count} connected)")
        self._js = pygame.joystick.Joystick(index)
        self._js.init()

    def pump(self) -> None:
        self._pg.event.pump()

    def get_axis(self, i: int) -> float:
        return float(self._js.get_axis(i))

    def get_button(self, i: int) -> bool:
        return bool(self._js.get_button(i))

    def close(self) -> None:
        self._js.quit()
        self._pg.joystick.quit()
        self._pg.display.quit()


class GamepadDevice(TeleopDevice):
    """An Xbox-style gamepad through pygame's joystick API (headless: ``SDL_VIDEODRIVER=dummy`` by default).

    Mapping (pygame 2 on Linux, Xbox layout; change ``axis_index``/``engage_button`` for other pads):
        right bumper (button 5) held   engaged (LeRobot's HIL-SERL gamepad convention)
        left stick up / left           +x / +y    (x = -LY, y = -LX)
        right stick up / left          +z / +yaw  (z = -RY, yaw = -RX); roll and pitch stay 0
        right trigger / left trigger   gripper close / open, past half travel (neither or both: unchanged)
    Sticks are zeroed below ``deadzone``.

    ``backend`` replaces the pygame joystick (tests): an object with ``get_axis(i)`` and ``get_button(i)``,
    optionally ``pump()`` and ``close()``.
    """

    name = "gamepad"
    AXIS_INDEX: ClassVar[dict[str, int]] = {"lx": 0, "ly": 1, "lt": 2, "rx": 3, "ry": 4, "rt": 5}
    TRIGGER_PRESSED = 0.5  # triggers rest at -1 (or 0 before first touch on some pads)

    def __init__(
        self,
        index: int = 0,
        deadzone: float = 0.1,
        axis_index: Mapping[str, int] | None = None,
        engage_button: int = 5,
        backend: Any = None,
    ) -> None:
        if not 0.0 <= deadzone < 1.0:
            raise ValueError(f"deadzone={deadzone} is not valid: expected 0 <= deadzone < 1")
        unknown = set(axis_index or {}) - self.AXIS_INDEX.keys()
        if unknown:
            name = sorted(unknown)[0]
            raise ValueError(f"axis_index key {name!r} is not valid: expected one of {list(self.AXIS_INDEX)}")
        self.index = int(index)
        self.deadzone = float(deadzone)
        self.axis_index = {**self.AXIS_INDEX, **(axis_index or {})}
        self.engage_button = int(engage_button)
        self._injected = backend
        self._js: Any = None

    def connect(self) -> None:
        if self._injected is not None:
            self._js = self._injected
            return
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # no banner on import
        pygame = _require("pygame", self.name, "pygame needs SDL2 (its wheels ship it)")
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # read at display.init, not at import
        self._js = _PygameJoystick(pygame, self.index)

    def disconnect(self) -> None:
        js, self._js = self._js, None
        if js is not None and hasattr(js, "close"):
            js.close()

    def read(self) -> DeviceReading:
        if self._js is None:
            raise TeleopError(f"teleop={self.name} is not connected: call connect() first")
        if hasattr(self._js, "pump"):
            self._js.pump()
        try:
            raw = {k: float(self._js.get_axis(i)) for k, i in self.axis_index.items()}
            engaged = bool(self._js.get_button(self.engage_button))
        except Exception as e:  # pygame.error after an unplug
            raise TeleopError(f"teleop={self.name}: the gamepad stopped answering ({e})") from None

        def stick(v: float) -> float:
            return 0.0 if abs(v) < self.deadzone else float(np.clip(v, -1.0, 1.0))  # NaN stays NaN

        axes = np.array(
            [-stick(raw["ly"]), -stick(raw["lx"]), -stick(raw["ry"]), 0.0, 0.0, -stick(raw["rx"])]
        )
        close, open_ = raw["rt"] > self.TRIGGER_PRESSED, raw["lt"] > self.TRIGGER_PRESSED
        gripper = 1.0 if close and not open_ else -1.0 if open_ and not close else None
        return DeviceReading(axes, gripper, engaged)


# --------------------------------------------------------------------------------------------------
# Mappings: a reading + the observation -> the driver's command


class CommandMap(ABC):
    """Maps a :class:`DeviceReading` (and the observation) to a ``(command_dim,)`` command.

    ``has_gripper`` tells whether the last command dim is the gripper; its value is held between readings
    that leave it unchanged, starting at ``gripper_init``.
    """

    name = ""
    has_gripper = False

    def __init__(self, command_dim: int, gripper_init: float = -1.0) -> None:
        self.command_dim = int(command_dim)
        if not -1.0 <= gripper_init <= 1.0:
            raise ValueError(f"gripper_init={gripper_init} is not valid: expected -1 (open) .. 1 (close)")
        self.gripper = float(gripper_init)

    def _gripper(self, reading: DeviceReading) -> float:
        if reading.gripper is not None:
            self.gripper = float(np.clip(reading.gripper, -1.0, 1.0))
        return self.gripper

    def _finish(self, body: np.ndarray, reading: DeviceReading) -> np.ndarray:
        if self.has_gripper:
            return np.append(body, self._gripper(reading))
        return body

    @abstractmethod
    def __call__(self, reading: DeviceReading, obs: Mapping[str, np.ndarray]) -> np.ndarray: ...


def _check_speed(name: str, value: float, high: float | None = 1.0) -> float:
    value = float(value)
    if not (value > 0 and (high is None or value <= high)):  # NaN fails too
        bound = f"0 < {name} <= {high}" if high is not None else f"{name} > 0"
        raise ValueError(f"{name}={value} is not valid: expected {bound}")
    return value


class DeltaMap(CommandMap):
    """Sim twin / Meta-World: command (4,) = mocap xyz delta ``axes[0:3] * speed`` + gripper, in [-1, 1].

    ``command_dim=3`` drops the gripper. Meta-World moves 1 cm per unit per step; rotations are ignored.
    """

    name = "delta"

    def __init__(self, command_dim: int = 4, speed: float = 0.5, gripper_init: float = -1.0) -> None:
        super().__init__(command_dim, gripper_init)
        if self.command_dim not in (3, 4):
            raise ValueError(
                f"mapping=delta takes command_dim 3 (xyz) or 4 (xyz + gripper), got {command_dim}"
            )
        self.has_gripper = self.command_dim == 4
        self.speed = _check_speed("speed", speed)

    def __call__(self, reading: DeviceReading, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self._finish(np.clip(reading.axes[:3], -1.0, 1.0) * self.speed, reading)


class JointDeltaMap(CommandMap):
    """UR ``joint_delta``: command (6,) (or (7,) with a gripper) in [-1, 1], which the driver scales by its
    ``delta_scale`` rad: ``axes[i] * speed`` -> joint i (x base, y shoulder, z elbow, roll/pitch/yaw wrists
    1/2/3)."""

    name = "joint_delta"

    def __init__(self, command_dim: int = 6, speed: float = 0.5, gripper_init: float = -1.0) -> None:
        super().__init__(command_dim, gripper_init)
        if self.command_dim not in (6, 7):
            raise ValueError(
                f"mapping=joint_delta takes command_dim 6 or 7 (with a gripper), got {command_dim}"
            )
        self.has_gripper = self.command_dim == 7
        self.speed = _check_speed("speed", speed)

    def __call__(self, reading: DeviceReading, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self._finish(np.clip(reading.axes, -1.0, 1.0) * self.speed, reading)


class JointPositionMap(CommandMap):
    """Absolute joint targets (UR ``joint_position``, the ROS 2 position controller): the current joints
    ``obs[obs_key]`` (``n_joints`` of them) + ``axes[:n] * step_rad`` per tick, in device-axis order (x base,
    y shoulder, z elbow, roll/pitch/yaw wrists 1/2/3; joints past the sixth stay put), then the gripper when
    ``command_dim == n_joints + 1``. The default step moves 0.6 rad/s at the UR's 125 Hz, 0.15 at 30 Hz."""

    name = "joint_position"

    def __init__(
        self,
        command_dim: int = 6,
        step_rad: float = 0.005,
        obs_key: str = "joint_pos",
        n_joints: int = 6,
        gripper_init: float = -1.0,
    ) -> None:
        super().__init__(command_dim, gripper_init)
        self.n_joints = int(n_joints)
        if self.n_joints < 1 or self.command_dim not in (self.n_joints, self.n_joints + 1):
            raise ValueError(
                f"mapping=joint_position takes command_dim n_joints or n_joints + 1 (gripper) with "
                f"n_joints >= 1, got command_dim={command_dim}, n_joints={n_joints}"
            )
        self.has_gripper = self.command_dim == self.n_joints + 1
        self.step_rad = _check_speed("step_rad", step_rad, high=None)
        self.obs_key = obs_key

    def __call__(self, reading: DeviceReading, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        if self.obs_key not in obs:
            raise ValueError(f"obs has no {self.obs_key!r} (keys: {sorted(obs)}): set obs_key")
        q = np.asarray(obs[self.obs_key], dtype=np.float64).reshape(-1)
        if q.shape != (self.n_joints,):
            raise ValueError(
                f"obs[{self.obs_key!r}] has {q.shape[0]} values, expected n_joints={self.n_joints}"
            )
        step = np.zeros(self.n_joints)
        k = min(6, self.n_joints)
        step[:k] = np.clip(reading.axes[:k], -1.0, 1.0) * self.step_rad
        return self._finish(q + step, reading)


MAPPINGS: dict[str, type[CommandMap]] = {m.name: m for m in (DeltaMap, JointDeltaMap, JointPositionMap)}


def make_mapping(name: str, command_dim: int, **kwargs: Any) -> CommandMap:
    """The mapping ``name`` (one of ``MAPPINGS``) for a ``(command_dim,)`` command."""
    if name not in MAPPINGS:
        raise ValueError(
            f"mapping={name!r} is not valid: expected one of {list(MAPPINGS)}{_near(name, MAPPINGS)}"
        )
    return MAPPINGS[name](command_dim, **kwargs)


# --------------------------------------------------------------------------------------------------
# A device + a mapping


class DeviceTeleop(Teleop):
    """A person on ``device``: the mapped command while the reading is engaged, else ``None``.

    ``nonfinite`` counts readings (or commands) with NaN/Inf, which count as not engaged; ``engaged_steps``
    counts the ticks the person held control.
    """

    def __init__(self, device: TeleopDevice, mapping: CommandMap) -> None:
        self.device = device
        self.mapping = mapping
        self.nonfinite = 0
        self.engaged_steps = 0

    def connect(self) -> None:
        if self.is_connected:
            return
        self.device.connect()
        super().connect()

    def disconnect(self) -> None:
        try:
            if self.is_connected:
                self.device.disconnect()
        finally:
            super().disconnect()

    def note_command(self, command: np.ndarray) -> None:
        c = np.asarray(command, dtype=np.float64).reshape(-1)
        if self.mapping.has_gripper and c.shape == (self.mapping.command_dim,) and np.isfinite(c[-1]):
            self.mapping.gripper = float(np.clip(c[-1], -1.0, 1.0))

    def command(self, obs: Mapping[str, np.ndarray]) -> np.ndarray | None:
        if not self.is_connected:
            raise TeleopError(f"teleop={self.device.name or type(self.device).__name__} is not connected")
        reading = self.device.read()
        if not reading.is_finite:
            self.nonfinite += 1
            return None
        if not reading.engaged:
            return None
        cmd = self.mapping(reading, obs)
        if not np.isfinite(cmd).all():  # e.g. a NaN joint angle in obs
            self.nonfinite += 1
            return None
        self.engaged_steps += 1
        return cmd


DEVICES: dict[str, type[TeleopDevice]] = {
    d.name: d for d in (KeyboardDevice, SpaceMouseDevice, GamepadDevice)
}


def _params(cls: type) -> list[str]:
    return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "command_dim")]


def make_teleop(name: str, mapping: str, command_dim: int, **kwargs: Any) -> Teleop:
    """Device ``name`` (keyboard | spacemouse | gamepad) mapped by ``mapping`` to a command.

    ``kwargs`` go to the mapping (``speed``, ``step_rad``, ``obs_key``, ``n_joints``, ``gripper_init``) or
    the device (``deadzone``, ``backend``, ``listener_factory``, ...), by name. Not connected yet.
    """
    if name not in DEVICES:
        raise ValueError(
            f"teleop={name!r} is not valid: expected one of {list(DEVICES)}{_near(name, DEVICES)}"
        )
    if mapping not in MAPPINGS:
        raise ValueError(
            f"mapping={mapping!r} is not valid: expected one of {list(MAPPINGS)}{_near(mapping, MAPPINGS)}"
        )
    device_cls, map_cls = DEVICES[name], MAPPINGS[mapping]
    map_keys, dev_keys = _params(map_cls), _params(device_cls)
    for key in kwargs:
        if key not in map_keys and key not in dev_keys:
            raise ValueError(
                f"{key!r} is not an option of teleop={name} with mapping={mapping}: expected one of "
                f"{sorted(map_keys + dev_keys)}{_near(key, map_keys + dev_keys)}"
            )
    device = device_cls(**{k: v for k, v in kwargs.items() if k in dev_keys})
    return DeviceTeleop(device, map_cls(command_dim, **{k: v for k, v in kwargs.items() if k in map_keys}))
