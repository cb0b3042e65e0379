"""OpenCVCamera against a fake capture and a fake cv2 module: output frames, staleness and error messages."""

from __future__ import annotations

import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robosteer.real.drivers.camera import OPENCV_PIN, OpenCVCamera, camera_settings, to_rgb
from robosteer.real.robot import RobotError

BLUE_BGR = (255, 0, 0)
RED_BGR = (0, 0, 255)


def nearest_resize(frame: np.ndarray, dsize: tuple[int, int], interpolation: int) -> np.ndarray:
    """cv2.resize's contract (dsize = (width, height)), by nearest sampling: exact on flat colour blocks."""
    w, h = dsize
    rows = np.arange(h) * frame.shape[0] // h
    cols = np.arange(w) * frame.shape[1] // w
    out = frame[rows][:, cols]
    return out[..., 0] if out.ndim == 3 and out.shape[2] == 1 else out  # as cv2 drops a single channel


class FakeCV2:
    """The part of cv2 the camera uses; records resize calls and set() requests."""

    INTER_AREA = 3
    CAP_PROP_FRAME_WIDTH, CAP_PROP_FRAME_HEIGHT, CAP_PROP_FPS = 3, 4, 5

    def __init__(self) -> None:
        self.resizes: list[tuple[tuple[int, ...], tuple[int, int], int]] = []

    def resize(self, frame: np.ndarray, dsize: tuple[int, int], interpolation: int) -> np.ndarray:
        self.resizes.append((frame.shape, dsize, interpolation))
        return nearest_resize(frame, dsize, interpolation)


class FakeCapture:
    """A VideoCapture serving ``frame`` (BGR) until ``fail`` is set; records set() and release()."""

    def __init__(self, source: int | str, frame: np.ndarray | None = None, opened: bool = True) -> None:
        self.source = source
        self.opened = opened
        self.frame = frame if frame is not None else half_blue_half_red()
        self.fail = False
        self.props: dict[int, float] = {}
        self.released = False

    def isOpened(self) -> bool:
        return self.opened

    def read(self) -> tuple[bool, Any]:
        time.sleep(0.002)  # a device paces its frames
        return (False, None) if self.fail else (True, self.frame.copy())

    def set(self, prop: int, value: float) -> bool:
        self.props[prop] = value
        return True

    def release(self) -> None:
        self.released = True


def half_blue_half_red(h: int = 120, w: int = 160) -> np.ndarray:
    frame = np.zeros((h, w, 3), np.uint8)
    frame[:, : w // 2] = BLUE_BGR
    frame[:, w // 2 :] = RED_BGR
    return frame


def camera(**kw: Any) -> tuple[OpenCVCamera, list[FakeCapture], FakeCV2]:
    caps: list[FakeCapture] = []
    cv2 = FakeCV2()
    opened = kw.pop("_opened", True)

    def factory(source: int | str) -> FakeCapture:
        caps.append(FakeCapture(source, opened=opened))
        return caps[-1]

    kw = {"name": "wrist", "index_or_path": 0, "capture_factory": factory, "cv2": cv2, **kw}
    return OpenCVCamera(**kw), caps, cv2


def test_frames_are_resized_square_rgb_uint8() -> None:
    cam, caps, cv2 = camera(width=640, height=480, fps=30, image_size=84)
    cam.connect()
    try:
        frame, stamp = cam.read()
    finally:
        cam.disconnect()
    assert frame.shape == (84, 84, 3) and frame.dtype == np.uint8
    assert tuple(frame[10, 5]) == (0, 0, 255)  # blue in BGR -> (R, G, B) = (0, 0, 255)
    assert tuple(frame[10, 80]) == (255, 0, 0)  # red
    assert cv2.resizes[0] == ((120, 160, 3), (84, 84), FakeCV2.INTER_AREA)
    assert caps[0].props == {3: 640.0, 4: 480.0, 5: 30.0} and caps[0].released
    assert abs(stamp - time.time()) < 1.0


def test_grey_and_bgra_frames_become_rgb() -> None:
    cv2 = FakeCV2()
    grey = np.full((10, 20), 7, np.uint8)
    assert (to_rgb(grey, 4, cv2) == 7).all() and to_rgb(grey, 4, cv2).shape == (4, 4, 3)
    bgra = np.zeros((10, 20, 4), np.uint8)
    bgra[..., :3] = (1, 2, 3)
    assert tuple(to_rgb(bgra, 4, cv2)[0, 0]) == (3, 2, 1)
    with pytest.raises(RobotError, match="dtype float32"):
        to_rgb(np.zeros((10, 20, 3), np.float32), 4, cv2)


def test_a_stale_frame_raises() -> None:
    cam, caps, _ = camera(max_age_s=0.5)
    cam.connect()
    try:
        _, stamp = cam.read()
        caps[0].fail = True  # the device stops delivering
        with pytest.raises(RobotError, match=r"^camera wrist: no frame for 1\.\d\d s \(max_age_s=0\.5\)"):
            cam.read(now=stamp + 1.0)
        deadline = time.time() + 2.0
        while time.time() < deadline:  # once the reader has met a failed read, the error names it
            try:
                cam.read(now=stamp + 1.0)
            except RobotError as e:
                if "returned no frame" in str(e):
                    break
            time.sleep(0.005)
        else:
            pytest.fail("the stale-frame error never named the failed read")
    finally:
        cam.disconnect()
    with pytest.raises(RobotError, match="camera wrist is not connected"):
        cam.read()


def test_no_first_frame_fails_connect_and_releases() -> None:
    cam, caps, _ = camera(connect_timeout_s=0.05)

    def silent(source: int | str) -> FakeCapture:
        caps.append(FakeCapture(source))
        caps[-1].fail = True
        return caps[-1]

    cam._capture_factory = silent
    with pytest.raises(RobotError, match=r"camera wrist: no frame from 0 within 0\.05 s"):
        cam.connect()
    assert caps[0].released and not cam.is_connected


def test_missing_opencv_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cv2", None)  # import cv2 -> ImportError
    cam = OpenCVCamera("wrist", 0)
    with pytest.raises(RobotError) as err:
        cam.connect()
    msg = str(err.value)
    assert "\n" not in msg
    assert msg == f"the UR camera needs OpenCV: pip install 'robosteer[camera]' ({OPENCV_PIN})"
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert pyproject["project"]["optional-dependencies"]["camera"] == [OPENCV_PIN]  # one pin, two places


def test_a_device_that_does_not_open_is_named() -> None:
    cam, caps, _ = camera(index_or_path="/dev/video7", _opened=False)
    with pytest.raises(RobotError, match="camera wrist: cannot open '/dev/video7'"):
        cam.connect()
    assert caps[0].released and not cam.is_connected
    cam.disconnect()  # idempotent
    cam.disconnect()


def test_digit_strings_are_device_indices_and_settings_are_checked() -> None:
    cam, _, _ = camera(index_or_path="2")
    assert cam.index_or_path == 2
    with pytest.raises(ValueError, match=r"image_size=0 is not valid"):
        OpenCVCamera("wrist", 0, image_size=0)
    with pytest.raises(ValueError, match=r"width=-1"):
        OpenCVCamera("wrist", 0, width=-1)
    with pytest.raises(ValueError, match=r"cameras\.wrist\.imgsize .*nearest valid key: 'image_size'"):
        camera_settings("wrist", {"imgsize": 84})


def test_real_opencv_reads_a_video_file(tmp_path: Any) -> None:
    cv2 = pytest.importorskip("cv2")
    path = str(tmp_path / "clip.avi")
    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 30.0, (160, 120))
    for _ in range(60):
        writer.write(half_blue_half_red())
    writer.release()
    cam = OpenCVCamera("file", path, image_size=32)
    cam.connect()
    try:
        frame, _ = cam.read()
    finally:
        cam.disconnect()
    assert frame.shape == (32, 32, 3) and frame.dtype == np.uint8
    assert np.abs(frame[16, 4].astype(int) - (0, 0, 255)).max() < 30  # blue, as RGB (JPEG-lossy)
    assert np.abs(frame[16, 28].astype(int) - (255, 0, 0)).max() < 30  # red
