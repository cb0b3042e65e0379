"""A camera read through OpenCV (a USB/V4L2 device, a video file, a stream URL) for arms that have none.

Why a reader thread: ``VideoCapture.read()`` blocks until the device delivers the next frame (33 ms at
30 fps, longer when it stalls) and a device buffers old frames; a control loop at 125 Hz can wait for
neither. A background thread reads continuously and keeps only the newest frame, resized and converted
once, with the wall-clock time it arrived, so :meth:`OpenCVCamera.read` returns at once; a frame older than
``max_age_s`` is a fault (:class:`RobotError`), never fed to a policy as if it were now.

Frames come out like the ROS 2 driver's ``image/<name>`` keys and the sim twin's renders: uint8 RGB
``(image_size, image_size, 3)``. The whole frame is resized (``cv2.INTER_AREA``), not cropped: pick a
``width``/``height`` whose aspect the policy was trained on. OpenCV (optional extra ``robosteer[camera]``)
is imported only on ``connect()``; ``capture_factory`` and ``cv2`` replace it in tests.
"""

from __future__ import annotations

import contextlib
import difflib
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from robosteer.real.robot import RobotError

OPENCV_PIN = "opencv-python-headless==5.1.0.95"  # pyproject.toml's `camera` extra
DEFAULT_IMAGE_SIZE = 84
# The keys of one ``cameras:`` entry (configs/robot/ur.yaml): OpenCVCamera's settings.
CAMERA_KEYS = ("index_or_path", "width", "height", "fps", "image_size", "max_age_s", "connect_timeout_s")


def _import_cv2() -> Any:
    try:
        import cv2
    except ImportError as e:
        raise RobotError(f"the UR camera needs OpenCV: pip install 'robosteer[camera]' ({OPENCV_PIN})") from e
    return cv2


def camera_settings(name: str, entry: Any) -> dict[str, Any]:
    """One ``cameras:`` entry (name -> settings), checked before anything opens; ValueError names it."""
    if not isinstance(name, str) or not name or "/" in name:
        raise ValueError(f"camera name {name!r} is not valid: expected a non-empty name without '/'")
    if not isinstance(entry, Mapping):
        raise ValueError(f"cameras.{name} must be a mapping of {list(CAMERA_KEYS)}, got {entry!r}")
    for key in entry:
        if key not in CAMERA_KEYS:
            near = difflib.get_close_matches(str(key), CAMERA_KEYS, n=1)
            hint = f"; nearest valid key: {near[0]!r}" if near else ""
            raise ValueError(
                f"cameras.{name}.{key} is not a camera setting: expected one of {list(CAMERA_KEYS)}{hint}"
            )
    size = entry.get("image_size", DEFAULT_IMAGE_SIZE)
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"cameras.{name}.image_size={size!r} is not valid: expected a positive integer")
    return dict(entry)


def to_rgb(frame: np.ndarray, image_size: int, cv2: Any) -> np.ndarray:
    """A BGR (or grey, or BGRA) OpenCV frame -> uint8 RGB ``(image_size, image_size, 3)``."""
    frame = np.asarray(frame)
    if frame.ndim == 2:
        frame = frame[..., None]
    if frame.ndim != 3 or frame.shape[2] not in (1, 3, 4) or frame.shape[0] == 0 or frame.shape[1] == 0:
        raise RobotError(f"camera frame has shape {frame.shape}: expected (H, W), (H, W, 3) or (H, W, 4)")
    if frame.dtype != np.uint8:
        raise RobotError(f"camera frame has dtype {frame.dtype}: expected uint8")
    small = np.asarray(
        cv2.resize(frame, (image_size, image_size), interpolation=cv2.INTER_AREA)
    )  # (S, S[, C]): a 1-channel resize may drop the channel axis
    if small.ndim == 2:
        small = small[..., None]
    rgb = np.repeat(small, 3, axis=2) if small.shape[2] == 1 else small[..., 2::-1]  # BGR(A) -> RGB
    return np.ascontiguousarray(rgb, dtype=np.uint8)


class OpenCVCamera:
    """The newest frame of one OpenCV capture: ``connect()``, ``read() -> (frame, time)``, ``disconnect()``.

    ``index_or_path``: a device index (``0``: /dev/video0; a string of digits counts as an index) or a path
    or URL. ``width``/``height``/``fps`` are asked of the device (None: its own); ``image_size`` is the side
    of the square output. ``connect()`` waits up to ``connect_timeout_s`` for the first frame.
    """

    def __init__(
        self,
        name: str,
        index_or_path: int | str = 0,
        width: int | None = None,
        height: int | None = None,
        fps: float | None = None,
        image_size: int = DEFAULT_IMAGE_SIZE,
        max_age_s: float = 0.5,
        connect_timeout_s: float = 5.0,
        capture_factory: Callable[[int | str], Any] | None = None,
        cv2: Any = None,
    ) -> None:
        camera_settings(name, {"image_size": image_size})
        for key, value in (("width", width), ("height", height), ("fps", fps)):
            if value is not None and (isinstance(value, bool) or not value > 0):
                raise ValueError(
                    f"cameras.{name}.{key}={value!r} is not valid: expected a positive number or null"
                )
        if not max_age_s > 0 or not connect_timeout_s > 0:
            raise ValueError(
                f"cameras.{name}: max_age_s={max_age_s} and connect_timeout_s={connect_timeout_s} must be > 0"
            )
        if isinstance(index_or_path, str) and index_or_path.strip().isdigit():
            index_or_path = int(index_or_path)
        self.name = name
        self.index_or_path = index_or_path
        self.width, self.height, self.fps = width, height, fps
        self.image_size = int(image_size)
        self.max_age_s = float(max_age_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self._capture_factory = capture_factory
        self._cv2 = cv2
        self._cap: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._latest: tuple[np.ndarray, float] | None = None  # (frame, capture time)
        self._error: str | None = None  # the reader's last failure, named when frames stop
        self._opened_at = 0.0

    @property
    def is_connected(self) -> bool:
        return self._thread is not None

    def connect(self) -> None:
        """Open the device and start the reader; RobotError when it does not open or sends no frame."""
        if self._thread is not None:
            return
        cv2 = self._cv2 if self._cv2 is not None else _import_cv2()
        factory = self._capture_factory or cv2.VideoCapture
        where = f"camera {self.name}: cannot open {self.index_or_path!r}"
        try:
            cap = factory(self.index_or_path)
        except Exception as e:
            raise RobotError(f"{where} ({type(e).__name__}: {e})") from e
        if not cap.isOpened():
            with contextlib.suppress(Exception):
                cap.release()
            raise RobotError(f"{where}: no such device, file or stream, or it is in use")
        for prop, value in (
            (cv2.CAP_PROP_FRAME_WIDTH, self.width),
            (cv2.CAP_PROP_FRAME_HEIGHT, self.height),
            (cv2.CAP_PROP_FPS, self.fps),
        ):
            if value is not None:
                cap.set(prop, float(value))  # a request: devices pick their nearest mode
        self._cap, self._cv2 = cap, cv2
        self._latest, self._error = None, None
        self._stop = threading.Event()  # its own per connection: a reader that outlived a join sees it set
        self._opened_at = time.time()
        self._thread = threading.Thread(
            target=self._reader, args=(cap, self._stop), name=f"camera-{self.name}", daemon=True
        )
        self._thread.start()
        deadline = self._opened_at + self.connect_timeout_s
        while self._latest is None and time.time() < deadline:
            time.sleep(0.005)
        if self._latest is None:
            why = f": {self._error}" if self._error else ""
            self.disconnect()
            raise RobotError(
                f"camera {self.name}: no frame from {self.index_or_path!r} "
                f"within {self.connect_timeout_s} s{why}"
            )

    def _reader(self, cap: Any, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                ok, frame = cap.read()
                if not ok or frame is None:
                    self._error = "the device returned no frame (unplugged, or the end of a file?)"
                    stop.wait(0.005)
                    continue
                stamp = time.time()
                img = to_rgb(frame, self.image_size, self._cv2)
            except Exception as e:  # reported by read() once the frame goes stale
                self._error = f"{type(e).__name__}: {e}"
                stop.wait(0.005)
                continue
            with self._lock:
                if not stop.is_set():
                    self._latest = (img, stamp)

    def read(self, now: float | None = None) -> tuple[np.ndarray, float]:
        """The newest frame (uint8 RGB, (S, S, 3)) and its capture time; RobotError when it is stale."""
        if self._thread is None:
            raise RobotError(f"camera {self.name} is not connected: call connect() first")
        with self._lock:
            latest = self._latest
        now = time.time() if now is None else now
        age = now - (latest[1] if latest is not None else self._opened_at)
        if latest is None or age > self.max_age_s:
            why = f": {self._error}" if self._error else ""
            raise RobotError(
                f"camera {self.name}: no frame for {age:.2f} s (max_age_s={self.max_age_s}){why}"
            )
        return latest[0].copy(), latest[1]

    def disconnect(self) -> None:
        """Stop the reader and release the device. Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)  # a read() stuck in the device driver: release regardless
        if self._cap is not None:
            with contextlib.suppress(Exception):
                self._cap.release()
        self._thread = self._cap = None
        self._latest = None
