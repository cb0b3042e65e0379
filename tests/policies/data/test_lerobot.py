"""LeRobot dataset format v3.0 in and out (robosteer-dataset import|export, policies/data/lerobot.py).

Fast tests use the committed fixture, written by LeRobot 0.4.4's own API (tests/fixtures/lerobot_v3/make_fixture.py),
and its expected.npz (the exact arrays and raw frames LeRobot was fed). The slow tests run LeRobot itself from a
throwaway venv (/tmp/lerobot-venv, or $ROBOSTEER_LEROBOT_PYTHON): it writes a fresh dataset that we import, and it
loads our export with ``LeRobotDataset(repo_id, root=DIR)``.

Frames go through a lossy codec (AV1, crf 30), so they are compared by the mean absolute error per frame on the
0-255 scale: FRAME_TOL. Measured: 3.40 at most on the fixture (mean 2.83); 4.2 on 32 px Meta-World frames.
Adjacent fixture frames differ by 14.6 or more, so a frame taken one step early or late fails the check.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import clirun
import numpy as np
import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_dir

from robosteer.policies.data import DatasetError, DatasetWriter, open_dataset
from robosteer.policies.data.lerobot import export_lerobot, import_lerobot
from robosteer.scripts.dataset import run

REPO = Path(__file__).resolve().parents[3]
FIXTURE_DIR = REPO / "tests" / "fixtures" / "lerobot_v3"
FIXTURE = FIXTURE_DIR / "dataset"
FRAME_TOL = 6.0  # max over frames of the per-frame mean |decoded - fed| (uint8 scale)
CAMERA = "observation.images.front"


def _make_fixture_module():
    spec = importlib.util.spec_from_file_location("make_fixture", FIXTURE_DIR / "make_fixture.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cfg(*overrides: str):
    with initialize_config_dir(config_dir=str(REPO / "configs"), version_base=None):
        return compose(config_name="dataset", overrides=list(overrides))


def frame_errors(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-frame mean absolute error of two (N, H, W, 3) uint8 stacks; (N,) floats."""
    assert a.shape == b.shape, (a.shape, b.shape)
    return np.abs(a.astype(np.int16) - b.astype(np.int16)).reshape(len(a), -1).mean(axis=1)


def concat(path: Path, key: str) -> np.ndarray:
    """``key`` (an obs key, or actions/rewards/dones) of every episode of ``path``, concatenated."""
    with open_dataset(path) as d:
        eps = [d.episode(n) for n in d.demo_names]
    return np.concatenate(
        [e["obs"][key] if key not in ("actions", "rewards", "dones") else e[key] for e in eps]
    )


def check_fixture_import(path: Path, expected: dict[str, np.ndarray]) -> np.ndarray:
    """Our import of a LeRobot-written fixture against what LeRobot was fed; returns the per-frame errors."""
    lengths = [int(n) for n in expected["lengths"]]
    with open_dataset(path) as d:
        d.deep_check()
        assert list(d.lengths.values()) == lengths  # episode boundaries
        attrs = d.attrs
        ep_tasks = [d.episode(n)["attrs"]["task"] for n in d.demo_names]
        dones = [d.episode(n)["dones"] for n in d.demo_names]
        rewards = np.concatenate([d.episode(n)["rewards"] for n in d.demo_names])
    assert ep_tasks == [str(t) for t in expected["tasks"]]
    assert attrs["fps"] == int(expected["fps"]) == 10
    assert attrs["robot_type"] == "fixture_arm"
    assert json.loads(attrs["tasks"]) == sorted(set(ep_tasks), key=ep_tasks.index)
    assert set(json.loads(attrs["filled"])) == {"rewards", "dones"}  # LeRobot had no next.reward / next.done
    assert all(list(x) == [0] * (len(x) - 1) + [1] for x in dones) and not rewards.any()
    assert np.array_equal(concat(path, "state"), expected["state"])  # exact
    assert np.array_equal(concat(path, "actions"), expected["action"])
    errs = frame_errors(concat(path, "image/front"), expected["frames"])
    assert errs.max() < FRAME_TOL, errs
    return errs


# ---------------------------------------------------------------------------------------------------- import
def test_import_fixture(tmp_path):
    printed: list[str] = []
    out = tmp_path / "fixture.hdf5"
    s = import_lerobot(FIXTURE, out, echo=printed.append)
    assert (s["episodes"], s["steps"], s["fps"]) == (3, 37, 10)
    errs = check_fixture_import(out, dict(np.load(FIXTURE_DIR / "expected.npz")))
    print(f"fixture frames: per-frame mean abs error max {errs.max():.2f}, mean {errs.mean():.2f}")
    table = printed[0]
    for line in (
        "observation.state         (4,)        float32  -> obs/state",
        "action                    (3,)        float32  -> actions",
        f"{CAMERA}  (48, 64, 3) video    -> obs/image/front",
        "timestamp                 (1,)        float32  -> (not converted)",
    ):
        assert line in table, table
    assert "-> rewards  [0.0 at every step" in table and "-> dones  [1 at each episode's last step" in table
    with open_dataset(out) as d:
        assert d.env_args["env_name"] == "lerobot:dataset"
        assert d.attrs["source"] == str(FIXTURE.resolve())
        assert json.loads(d.attrs["feature_map"])["observation.state"] == "obs/state"


def test_import_mapping_override(tmp_path):
    out = tmp_path / "m.hdf5"
    import_lerobot(FIXTURE, out, {"observation.state": "proprio", CAMERA: None})
    with open_dataset(out) as d:
        assert d.obs_keys == ["proprio"]  # the camera was dropped, the state renamed
    expected = np.load(FIXTURE_DIR / "expected.npz")
    assert np.array_equal(concat(out, "proprio"), expected["state"])


def test_import_cli_prints_mapping_and_next_step(tmp_path, capsys):
    out = tmp_path / "cli.hdf5"
    assert (
        run(_cfg("cmd=import", f"src={FIXTURE}", f"out={out}", "map={observation.state: obs/proprio}")) == 0
    )
    text = capsys.readouterr().out
    assert "observation.state         (4,)        float32  -> obs/proprio" in text
    assert f"wrote {out}: 3 episodes, 37 steps, fps 10" in text
    assert (
        f"robosteer-train dataset={out} obs_keys=[image/front,proprio]" in text
        and "leave task= unset" in text
    )


# ---------------------------------------------------------------------------------------------------- export
def _our_file(path: Path, *, lengths=(9, 6), image=True, attrs=None, env_kwargs=None) -> Path:
    """A small file as robosteer-collect writes it (state, one camera, rewards, dones, success attrs, and the
    control rate: Meta-World's 80 Hz as the ``fps`` attr unless ``attrs`` says otherwise)."""
    mk = _make_fixture_module()
    rng = np.random.default_rng(5)
    env_args = {"env_name": "push-v3", "env_kwargs": {"obs": "state+image", **(env_kwargs or {})}}
    with DatasetWriter(path, env_args, {"fps": 80.0} if attrs is None else attrs) as w:
        for e, T in enumerate(lengths):
            obs = {"state": rng.standard_normal((T, 7)).astype(np.float32)}
            if image:
                obs["image/corner2"] = np.stack(
                    [mk.frame(e + 3, t) for t in range(T)]
                )  # (T, 48, 64, 3) uint8
            w.add_episode(
                obs,
                rng.uniform(-1, 1, (T, 4)).astype(np.float32),
                rng.uniform(0, 1, T).astype(np.float32),
                (np.arange(T) == T - 1).astype(np.uint8),
                attrs={"seed": e, "success": True},
            )
    return path


def test_export_layout_and_round_trip(tmp_path):
    src = _our_file(tmp_path / "demos.hdf5")
    out = tmp_path / "lerobot"
    s = export_lerobot(src, out)
    assert (s["episodes"], s["frames"], s["fps"]) == (2, 15, 80)
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == [
        "data/chunk-000/file-000.parquet",
        "meta/episodes/chunk-000/file-000.parquet",
        "meta/info.json",
        "meta/robosteer.json",
        "meta/stats.json",
        "meta/tasks.parquet",
        "videos/observation.images.corner2/chunk-000/file-000.mp4",
    ]
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 80 and info["total_frames"] == 15
    assert info["total_episodes"] == 2 and info["total_tasks"] == 1 and info["splits"] == {"train": "0:2"}
    feats = info["features"]
    assert not any("/" in k for k in feats)
    assert feats["observation.images.corner2"]["dtype"] == "video"
    assert feats["observation.images.corner2"]["info"]["video.codec"] in ("av1", "h264")
    assert feats["observation.state"] == {"dtype": "float32", "shape": [7], "names": None}
    assert feats["next.done"]["dtype"] == "bool" and feats["action"]["shape"] == [4]
    assert "complementary_info.is_intervention" not in feats  # the file records no interventions
    data = pq.read_table(out / "data/chunk-000/file-000.parquet")
    assert data["episode_index"].to_pylist() == [0] * 9 + [1] * 6
    assert data["index"].to_pylist() == list(range(15))
    assert data["timestamp"].to_pylist()[9:11] == [0.0, np.float32(1 / 80)]
    eps = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [(e["dataset_from_index"], e["dataset_to_index"], e["tasks"]) for e in eps] == [
        (0, 9, ["push-v3"]),
        (9, 15, ["push-v3"]),
    ]
    assert eps[1]["videos/observation.images.corner2/from_timestamp"] == pytest.approx(9 / 80)
    tasks = pq.read_table(out / "meta/tasks.parquet").to_pylist()
    assert tasks == [{"task_index": 0, "task": "push-v3"}]
    stats = json.loads((out / "meta" / "stats.json").read_text())
    assert np.array(stats["observation.images.corner2"]["mean"]).shape == (3, 1, 1)
    assert stats["action"]["count"] == [15] and len(stats["action"]["q99"]) == 4

    back = tmp_path / "back.hdf5"
    import_lerobot(out, back)
    for key in ("state", "actions", "rewards", "dones"):
        assert np.array_equal(concat(back, key), concat(src, key)), key  # exact
    errs = frame_errors(concat(back, "image/corner2"), concat(src, "image/corner2"))
    assert errs.max() < FRAME_TOL, errs
    with open_dataset(back) as b, open_dataset(src) as a:
        assert list(b.lengths.values()) == list(a.lengths.values())
        assert b.env_args == a.env_args  # restored from meta/robosteer.json
        assert json.loads(b.attrs["filled"]) == {}  # next.reward / next.done were there


INTERVENTION = "complementary_info.is_intervention"


def _hil_file(path: Path) -> Path:
    """Two state-only episodes: the first (5 steps) with a person at the arm for steps 1 and 2, the second
    (3 steps) recording no interventions (a file collected before, or without a teleoperator)."""
    with DatasetWriter(path, {"env_name": "push-v3"}, {"fps": 10}) as w:
        for e, T in enumerate((5, 3)):
            w.add_episode(
                {"state": np.full((T, 2), e, np.float32)},
                np.zeros((T, 3), np.float32),
                np.zeros(T, np.float32),
                (np.arange(T) == T - 1).astype(np.uint8),
                interventions=np.array([0, 1, 1, 0, 0], np.uint8) if e == 0 else None,
            )
    return path


def test_export_interventions_as_complementary_info_and_back(tmp_path):
    src = _hil_file(tmp_path / "hil.hdf5")
    out = tmp_path / "lerobot"
    printed: list[str] = []
    export_lerobot(src, out, echo=printed.append)
    assert f"interventions  (1,) bool     -> {INTERVENTION}" in printed[0], printed[0]
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["features"][INTERVENTION] == {"dtype": "bool", "shape": [1], "names": None}
    data = pq.read_table(out / "data/chunk-000/file-000.parquet")
    assert str(data.schema.field(INTERVENTION).type) == "bool"  # a scalar column, as next.done
    assert data[INTERVENTION].to_pylist() == [False, True, True, False, False] + [False] * 3
    eps = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert eps[0][f"stats/{INTERVENTION}/max"] == [True] and eps[1][f"stats/{INTERVENTION}/max"] == [False]

    back = tmp_path / "back.hdf5"
    import_lerobot(out, back)
    with open_dataset(back) as d:
        got = [d.episode(n)["interventions"] for n in d.demo_names]
        assert json.loads(d.attrs["feature_map"])[INTERVENTION] == "interventions"
    assert got[0].tolist() == [False, True, True, False, False]
    assert got[1].tolist() == [False] * 3  # exported as False, so it comes back recorded


def test_interventions_mapping_and_float_recorders(tmp_path):
    """map= renames or drops the feature; a file without interventions exports no such feature; a recorder that
    writes the flag as float32 0/1 (shape [1]) imports the same flags."""
    src = _hil_file(tmp_path / "hil.hdf5")
    export_lerobot(src, tmp_path / "renamed", {"interventions": "complementary_info.teleop"})
    feats = json.loads((tmp_path / "renamed" / "meta" / "info.json").read_text())["features"]
    assert "complementary_info.teleop" in feats and INTERVENTION not in feats
    export_lerobot(src, tmp_path / "dropped", {"interventions": None})
    assert (
        INTERVENTION not in json.loads((tmp_path / "dropped" / "meta" / "info.json").read_text())["features"]
    )
    plain = _our_file(tmp_path / "plain.hdf5", image=False)
    export_lerobot(plain, tmp_path / "plain")
    assert INTERVENTION not in json.loads((tmp_path / "plain" / "meta" / "info.json").read_text())["features"]

    out = tmp_path / "float"
    export_lerobot(src, out)
    info_path, data_path = out / "meta" / "info.json", out / "data/chunk-000/file-000.parquet"
    info = json.loads(info_path.read_text())
    info["features"][INTERVENTION]["dtype"] = "float32"
    info_path.write_text(json.dumps(info))
    table = pq.read_table(data_path)
    i = table.schema.get_field_index(INTERVENTION)
    table = table.set_column(i, INTERVENTION, table[INTERVENTION].cast("float32"))
    pq.write_table(table, data_path)
    back = tmp_path / "float.hdf5"
    import_lerobot(out, back)
    with open_dataset(back) as d:
        assert d.episode(0)["interventions"].tolist() == [False, True, True, False, False]


EPISODE_STATS = ("min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99")


def test_export_writes_lerobot_06_episode_stats_and_keys(tmp_path):
    """meta/episodes holds LeRobot 0.6's ``stats/<feature>/<stat>`` for every feature, the camera's too (what
    lerobot-edit-dataset aggregates after delete / split / merge); stats.json is their aggregate; video info uses
    the current keys (``is_depth_map``, not the legacy ``video.is_depth_map``)."""
    src = _our_file(tmp_path / "demos.hdf5")
    out = tmp_path / "lerobot"
    export_lerobot(src, out)
    info = json.loads((out / "meta" / "info.json").read_text())
    eps = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    want = {f"stats/{ft}/{k}" for ft in info["features"] for k in EPISODE_STATS}
    assert want <= set(eps[0]) and not {c for c in eps[0] if c.startswith("stats/")} - want
    cam = "observation.images.corner2"
    assert np.array(eps[0][f"stats/{cam}/mean"]).shape == (3, 1, 1)
    assert eps[0][f"stats/{cam}/count"] == [9] and eps[1][f"stats/{cam}/count"] == [6]  # frames sampled
    frames = concat(src, "image/corner2")
    got = np.array(eps[1][f"stats/{cam}/max"]).reshape(3)
    assert np.allclose(got, frames[9:].reshape(-1, 3).max(0) / 255.0, atol=1e-6)
    state = concat(src, "state")
    assert np.allclose(eps[0]["stats/observation.state/mean"], state[:9].mean(0), atol=1e-5)
    assert eps[1]["stats/frame_index/max"] == [5] and eps[1]["stats/index/min"] == [9]
    stats = json.loads((out / "meta" / "stats.json").read_text())
    assert set(stats) == set(info["features"])
    assert np.allclose(stats["observation.state"]["mean"], state.mean(0), atol=1e-5)
    assert stats[cam]["count"] == [15] and np.array(stats[cam]["q50"]).shape == (3, 1, 1)
    vinfo = info["features"][cam]["info"]
    assert "video.is_depth_map" not in vinfo and vinfo["is_depth_map"] is False
    assert vinfo["video.fps"] == 80 and vinfo["video.g"] == 2 and vinfo["video.crf"] == 30


def test_export_fps_is_the_recorded_control_rate(tmp_path):
    """No silent 20 fps: the file's fps attr, robomimic's env_kwargs control_freq, or fps=; else one-line refusal."""
    bare = _our_file(tmp_path / "bare.hdf5", image=False, attrs={}, env_kwargs={"suite": "metaworld"})
    with pytest.raises(DatasetError) as err:
        export_lerobot(bare, tmp_path / "a")
    msg = str(err.value)
    assert "\n" not in msg and str(bare) in msg and "data.attrs['fps']" in msg and "pass fps=" in msg
    assert "80 Hz" in msg and not (tmp_path / "a").exists()
    assert export_lerobot(bare, tmp_path / "b", fps=80)["fps"] == 80
    robomimic = _our_file(tmp_path / "rm.hdf5", image=False, attrs={}, env_kwargs={"control_freq": 20})
    assert export_lerobot(robomimic, tmp_path / "c")["fps"] == 20
    odd = _our_file(tmp_path / "odd.hdf5", image=False, attrs={"fps": 12.5})
    with pytest.raises(DatasetError, match=r"data.attrs\['fps'\] = 12.5: expected a positive whole number"):
        export_lerobot(odd, tmp_path / "d")
    with pytest.raises(DatasetError, match="fps = 0: expected a positive"):
        export_lerobot(bare, tmp_path / "e", fps=0)
    proc = run(_cfg("cmd=export", f"src={bare}", f"out={tmp_path / 'f'}"))
    assert proc == 2


def test_export_h264_and_overwrite(tmp_path):
    """The codec fallback (PyAV builds without libsvtav1) and overwrite=true for both directions."""
    src = _our_file(tmp_path / "demos.hdf5", lengths=(4, 5), attrs={"fps": 20})  # x264's crf depends on fps
    out = tmp_path / "lerobot"
    out.mkdir()
    (out / "meta").mkdir()
    (out / "meta" / "info.json").write_text("{}")  # an old export: replaced only with overwrite
    with pytest.raises(DatasetError, match="exists; pass overwrite=true"):
        export_lerobot(src, out, codec="h264")
    export_lerobot(src, out, codec="h264", overwrite=True)
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["features"]["observation.images.corner2"]["info"]["video.codec"] == "h264"
    back = tmp_path / "back.hdf5"
    back.write_bytes(b"old")
    import_lerobot(out, back, overwrite=True)
    errs = frame_errors(concat(back, "image/corner2"), concat(src, "image/corner2"))
    assert errs.max() < FRAME_TOL, errs
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("mine")
    with pytest.raises(DatasetError, match="not a LeRobot dataset dir"):
        export_lerobot(src, other, overwrite=True)
    assert (other / "todo.txt").read_text() == "mine"


def test_fixture_import_export_keeps_names_and_drops_filled(tmp_path):
    ours = tmp_path / "fx.hdf5"
    import_lerobot(FIXTURE, ours)
    out = tmp_path / "again"
    printed: list[str] = []
    export_lerobot(ours, out, echo=printed.append)
    assert (
        "rewards          (1,)        float32  -> (not converted)  [filled on import, not exported]"
        in printed[0]
    )
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["fps"] == 10 and info["robot_type"] == "fixture_arm"
    assert "next.reward" not in info["features"] and "next.done" not in info["features"]
    assert info["features"]["observation.state"]["names"] == ["q0", "q1", "q2", "q3"]
    eps = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet")
    assert eps["tasks"].to_pylist() == [
        ["pick up the red cube"],
        ["push the blue block"],
        ["pick up the red cube"],
    ]
    back = tmp_path / "back.hdf5"
    import_lerobot(out, back)
    assert np.array_equal(concat(back, "state"), concat(ours, "state"))


# ---------------------------------------------------------------------------------------------------- errors
def _copy_fixture(tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(FIXTURE, dst)
    return dst


def _shorten_video(root: Path, keep: int) -> None:
    """Re-encode the camera mp4 with only its first ``keep`` frames (a video shorter than the episodes say)."""
    import av

    path = root / f"videos/{CAMERA}/chunk-000/file-000.mp4"
    with av.open(str(path)) as c:
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)][:keep]
    with av.open(str(path), "w") as c:
        s = c.add_stream("h264", rate=10)
        s.width, s.height, s.pix_fmt = frames[0].shape[1], frames[0].shape[0], "yuv420p"
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)


def _case(name: str, tmp_path: Path) -> tuple[list[str], list[str]]:
    """(overrides, fragments the one-line error must hold) for each bad input."""
    out = tmp_path / "out.hdf5"
    if name == "src_missing":
        return [f"src={tmp_path / 'nope'}", f"out={out}"], ["no such directory", "nope", "meta/info.json"]
    if name == "not_lerobot":
        (tmp_path / "plain").mkdir()
        (tmp_path / "plain" / "x.txt").write_text("x")
        return [f"src={tmp_path / 'plain'}", f"out={out}"], [
            "not a LeRobot dataset",
            "meta/info.json is missing",
        ]
    if name == "v21":
        root = _copy_fixture(tmp_path)
        info = json.loads((root / "meta/info.json").read_text())
        (root / "meta/info.json").write_text(json.dumps(info | {"codebase_version": "v2.1"}))
        return [f"src={root}", f"out={out}"], [
            "'v2.1'",
            "'v3.0'",
            "lerobot.scripts.convert_dataset_v21_to_v30",
        ]
    if name == "unknown_feature":
        return (
            [f"src={FIXTURE}", f"out={out}", "map={observation.stat: state}"],
            ["'observation.stat'", "did you mean 'observation.state'", "info.json"],
        )
    if name == "out_exists":
        out.write_bytes(b"keep me")
        return [f"src={FIXTURE}", f"out={out}"], [f"out={out}: exists", "overwrite=true"]
    if name == "video_missing":
        root = _copy_fixture(tmp_path)
        (root / f"videos/{CAMERA}/chunk-000/file-000.mp4").unlink()
        return [f"src={root}", f"out={out}"], [
            "episode 0",
            f"'{CAMERA}'",
            "file-000.mp4 is missing",
            "12 frames",
        ]
    if name == "video_short":
        root = _copy_fixture(tmp_path)
        _shorten_video(root, 32)  # episode 2 spans frames 27-36
        return [f"src={root}", f"out={out}"], ["episode 2", "no frame at 3.200 s", "shorter than the episode"]
    if name == "export_slash":
        src = _our_file(tmp_path / "d.hdf5", image=False)
        return (
            ["cmd=export", f"src={src}", f"out={tmp_path / 'lr'}", "map={state: observation/state}"],
            ["'obs/state'", "'observation/state'", "must not contain '/'", "'observation.state'"],
        )
    if name == "export_unknown":
        src = _our_file(tmp_path / "d.hdf5", image=False)
        return (
            ["cmd=export", f"src={src}", f"out={tmp_path / 'lr'}", "map={stat: observation.state}"],
            ["'obs/stat'", "did you mean 'obs/state'"],
        )
    raise AssertionError(name)


ERROR_CASES = [
    "src_missing",
    "not_lerobot",
    "v21",
    "unknown_feature",
    "out_exists",
    "video_missing",
    "video_short",
    "export_slash",
    "export_unknown",
]


@pytest.mark.parametrize("name", ERROR_CASES)
def test_bad_input_is_one_clear_line(name, tmp_path, capsys):
    overrides, fragments = _case(name, tmp_path)
    cmd = [] if any(o.startswith("cmd=") for o in overrides) else ["cmd=import"]
    assert run(_cfg(*cmd, *overrides)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    out = tmp_path / "out.hdf5"
    if name == "out_exists":
        assert out.read_bytes() == b"keep me"
    elif not name.startswith("export"):
        assert not out.exists()  # a failed import leaves nothing behind
        assert not [p for p in tmp_path.iterdir() if ".importing" in p.name]


def test_console_error_exit_status(tmp_path):
    """The real argv path: exit status 2 and one line, no traceback."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "robosteer.scripts.dataset", "import", f"src={tmp_path}", "out=x.hdf5"]
    proc = clirun.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "not a LeRobot dataset" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no outputs/, no .hydra/


# ---------------------------------------------------------------------------------------------------- training
def test_train_from_imported_file(tmp_path):
    """robosteer-train runs on an imported file as is (no task: evaluation stays off)."""
    data = tmp_path / "fx.hdf5"
    import_lerobot(FIXTURE, data)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    small = ["policy.mlp_hidden_dim=32", "policy.mlp_n_blocks=1", "policy.time_embed_dim=16", "batch_size=8"]
    small += ["log_every=2", "checkpoint_every=3", "progress=false", "lr_warmup_steps=2"]
    cmd = [sys.executable, "-m", "robosteer.scripts.train", "policy=diffusion", f"dataset={data}", "steps=3"]
    cmd += ["out=run", "obs_keys=[state,image/front]", *small]
    proc = clirun.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["steps"] == 3 and np.isfinite(m["final_loss"]) and m["num_episodes"] == 3
    assert m["success_rate"] is None and m["episodes"] == 0


# ---------------------------------------------------------------------------------------------------- LeRobot
def lerobot_python() -> Path | None:
    """The LeRobot venv's python, if it imports lerobot. Build the current one (LeRobot 0.6 needs Python 3.12):
    ``python3.12 -m venv /tmp/lerobot312 && /tmp/lerobot312/bin/pip install 'lerobot[training]==0.6.1'``."""
    for py in _lerobot_candidates():
        if py.exists():
            probe = subprocess.run([str(py), "-c", "import lerobot"], capture_output=True, timeout=120)
            if probe.returncode == 0:
                return py
    return None


def _lerobot_candidates() -> list[Path]:
    """$ROBOSTEER_LEROBOT_PYTHON alone when set; else the 0.6 venv (Python 3.12), then the older 0.4 one."""
    if os.environ.get("ROBOSTEER_LEROBOT_PYTHON"):
        return [Path(os.environ["ROBOSTEER_LEROBOT_PYTHON"])]
    return [Path("/tmp/lerobot312/bin/python"), Path("/tmp/lerobot-venv/bin/python")]


def lerobot_env(py: Path, tmp: Path) -> dict[str, str]:
    """Offline, throwaway HF cache; and FFmpeg for torchcodec, LeRobot's decoder (torchvision 0.29 dropped the
    pyav VideoReader LeRobot falls back to). Without a system FFmpeg, torchcodec finds PyAV's bundled copy
    through links under their plain sonames (libavutil.so.59 -> av.libs/libavutil-<hash>.so.59.x)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp / "hf"), "OMP_NUM_THREADS": "1"}
    libs = sorted(py.parent.parent.glob("lib/python3*/site-packages/av.libs"))
    if libs:
        links = tmp / "ffmpeg-links"
        links.mkdir(exist_ok=True)
        for lib in [*libs[0].glob("libav*.so.*"), *libs[0].glob("libsw*.so.*")]:
            stem, _, rest = lib.name.partition(".so.")
            (links / f"{stem.rsplit('-', 1)[0]}.so.{rest.split('.')[0]}").symlink_to(lib)
        env["LD_LIBRARY_PATH"] = os.pathsep.join([str(links), str(libs[0]), env.get("LD_LIBRARY_PATH", "")])
    return env


LOAD_SCRIPT = r"""
import json, sys
import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset

ds = LeRobotDataset(repo_id="local/x", root=sys.argv[1])
items = [ds[i] for i in range(len(ds))]
keys = [k for k, f in ds.meta.features.items() if f["dtype"] != "string"]
np.savez(sys.argv[2], **{k: np.stack([it[k].numpy() for it in items]) for k in keys})
print(json.dumps({
    "fps": ds.fps, "num_episodes": ds.num_episodes, "tasks": [it["task"] for it in items],
    "video_keys": ds.meta.video_keys, "lengths": [int(n) for n in ds.meta.episodes["length"]],
}))
"""


@pytest.fixture(scope="module")
def lerobot_py() -> Path:
    py = lerobot_python()
    if py is None:
        pytest.skip(
            "no LeRobot venv: create /tmp/lerobot-venv (see this file's docstring) or set ROBOSTEER_LEROBOT_PYTHON"
        )
    return py


@pytest.mark.slow
def test_lerobot_writes_we_import(lerobot_py, tmp_path):
    """LeRobot writes a fresh fixture (its API, its encoder); our import matches what it was fed."""
    proc = subprocess.run(
        [str(lerobot_py), str(FIXTURE_DIR / "make_fixture.py"), str(tmp_path)],
        env=lerobot_env(lerobot_py, tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "ours.hdf5"
    import_lerobot(tmp_path / "dataset", out)
    errs = check_fixture_import(out, dict(np.load(tmp_path / "expected.npz")))
    print(
        f"LeRobot-written frames, our decode: per-frame mean abs error max {errs.max():.2f}, mean {errs.mean():.2f}"
    )


@pytest.mark.slow
def test_lerobot_loads_our_export(lerobot_py, tmp_path):
    """A robosteer-collect file (state+image), exported, loaded by LeRobotDataset: arrays exact, frames close."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "MUJOCO_GL": "egl", "OMP_NUM_THREADS": "1"}
    collect = [
        sys.executable,
        "-m",
        "robosteer.scripts.collect",
        "task=reach-v3",
        "episodes=2",
        "obs=state+image",
    ]
    collect += ["image_size=48", "progress=false", "out=collect"]
    proc = subprocess.run(collect, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    src = tmp_path / "collect" / "demos.hdf5"
    out = tmp_path / "lerobot"
    export_lerobot(src, out, fps=10)

    npz = tmp_path / "lerobot.npz"
    (tmp_path / "load.py").write_text(LOAD_SCRIPT)
    proc = subprocess.run(
        [str(lerobot_py), str(tmp_path / "load.py"), str(out), str(npz)],
        env=lerobot_env(lerobot_py, tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = json.loads(proc.stdout.strip().splitlines()[-1])
    got = np.load(npz)
    with open_dataset(src) as d:
        lengths = list(d.lengths.values())
    assert meta["fps"] == 10 and meta["num_episodes"] == 2 and meta["lengths"] == lengths
    assert meta["video_keys"] == ["observation.images.corner2"]
    assert meta["tasks"] == ["reach-v3"] * sum(lengths)
    assert np.array_equal(got["episode_index"], np.repeat(np.arange(2), lengths))
    assert np.array_equal(got["frame_index"], np.concatenate([np.arange(n) for n in lengths]))
    assert np.allclose(got["timestamp"], np.concatenate([np.arange(n) for n in lengths]) / 10)
    assert np.array_equal(got["observation.state"], concat(src, "state"))  # exact
    assert np.array_equal(got["action"], concat(src, "actions"))
    assert np.array_equal(got["next.reward"], concat(src, "rewards"))
    assert np.array_equal(got["next.done"], concat(src, "dones").astype(bool))
    chw = got["observation.images.corner2"]  # (N, 3, H, W) float32 in [0, 1]
    assert chw.dtype == np.float32 and chw.min() >= 0 and chw.max() <= 1
    frames = np.round(chw.transpose(0, 2, 3, 1) * 255).astype(np.uint8)
    errs = frame_errors(frames, concat(src, "image/corner2"))
    print(
        f"our export, LeRobot's decode: per-frame mean abs error max {errs.max():.2f}, mean {errs.mean():.2f}"
    )
    assert errs.max() < FRAME_TOL, errs


PNG_SCRIPT = r"""
import sys
import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset

features = {
    "observation.image": {"dtype": "image", "shape": (16, 24, 3), "names": ["height", "width", "channels"]},
    "observation.state": {"dtype": "float32", "shape": (2,), "names": None},
    "action": {"dtype": "float32", "shape": (2,), "names": None},
}
ds = LeRobotDataset.create(repo_id="local/png", fps=5, features=features, root=sys.argv[1], use_videos=False)
rng = np.random.default_rng(0)
fed = {"image": [], "state": [], "action": []}
for T in (4, 6):
    for t in range(T):
        f = {"image": rng.integers(0, 256, (16, 24, 3), dtype=np.uint8),
             "state": rng.standard_normal(2).astype(np.float32), "action": rng.standard_normal(2).astype(np.float32),
             }
        for k, v in f.items():
            fed[k].append(v)
        ds.add_frame({"observation.image": f["image"], "observation.state": f["state"], "action": f["action"],
                      "task": "stack"})
    ds.save_episode()
ds.finalize()
np.savez(sys.argv[2], **{k: np.stack(v) for k, v in fed.items()})
"""


@pytest.mark.slow
def test_lerobot_image_features_import_exactly(lerobot_py, tmp_path):
    """``dtype: image`` features (PNG bytes inside the data parquet, no mp4) import losslessly. (No next.reward
    here: LeRobot 0.4.4's add_frame cannot store a shape (1,) float under numpy 2.4; our export's next.reward is
    checked against LeRobot's loader above.)"""
    (tmp_path / "png.py").write_text(PNG_SCRIPT)
    root, fed = tmp_path / "png", tmp_path / "fed.npz"
    proc = subprocess.run(
        [str(lerobot_py), str(tmp_path / "png.py"), str(root), str(fed)],
        env=lerobot_env(lerobot_py, tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "png.hdf5"
    s = import_lerobot(root, out)
    assert set(s["filled"]) == {"rewards", "dones"}
    want = np.load(fed)
    with open_dataset(out) as d:
        assert list(d.lengths.values()) == [4, 6]
    assert np.array_equal(concat(out, "image"), want["image"])  # PNG: exact
    assert np.array_equal(concat(out, "state"), want["state"])
    assert np.array_equal(concat(out, "actions"), want["action"])


EDIT_TRAIN_SCRIPT = r"""
set -euo pipefail
BIN=$(dirname "$PY")
R=$1; W=$2
"$BIN/lerobot-edit-dataset" --repo_id local/x --root "$R" --new_repo_id local/del --new_root "$W/del" \
    --operation.type delete_episodes --operation.episode_indices "[1]"
"$BIN/lerobot-edit-dataset" --repo_id local/del --root "$W/del" --new_root "$W/split" \
    --operation.type split --operation.splits '{"train": [0, 1], "val": [2]}'
"$BIN/lerobot-edit-dataset" --new_repo_id local/merged --new_root "$W/merged" --operation.type merge \
    --operation.repo_ids "['train', 'val']" --operation.roots "['$W/split/train', '$W/split/val']"
"$PY" "$W/../check.py" "$W/merged"
"$BIN/lerobot-train" --dataset.repo_id local/merged --dataset.root "$W/merged" --policy.type act \
    --policy.device cpu --policy.push_to_hub false --policy.pretrained_backbone_weights null \
    --policy.chunk_size 8 --policy.n_action_steps 8 --policy.dim_model 64 --policy.dim_feedforward 128 \
    --steps 3 --batch_size 2 --num_workers 0 --log_freq 1 --save_checkpoint false \
    --wandb.enable false --output_dir "$W/train"
echo TRAINED
"""

CHECK_SCRIPT = r"""
import json, sys
from lerobot.datasets.lerobot_dataset import LeRobotDataset
ds = LeRobotDataset(repo_id="local/merged", root=sys.argv[1])
stats = json.load(open(f"{sys.argv[1]}/meta/stats.json"))
print("MERGED", json.dumps({"episodes": ds.num_episodes, "fps": ds.fps, "stats_keys": sorted(stats)}))
"""


@pytest.mark.slow
def test_export_survives_lerobot_edit_then_trains(lerobot_py, tmp_path):
    """robosteer-collect (Meta-World, state + camera) -> export at the simulator's control rate ->
    lerobot-edit-dataset delete / split / merge -> lerobot-train a few steps: the per-episode stats let LeRobot's
    own tools rebuild meta/stats.json, camera included, after every edit."""
    from robosteer.sim.metaworld_env import make_metaworld_env

    mw = make_metaworld_env("reach-v3")
    rate = 1.0 / (mw.frame_skip * float(mw.model.opt.timestep))  # 80 Hz in metaworld 3.1
    env = {**os.environ, "PYTHONPATH": str(REPO), "MUJOCO_GL": "egl", "OMP_NUM_THREADS": "1"}
    collect = [sys.executable, "-m", "robosteer.scripts.collect", "task=reach-v3", "episodes=4"]
    collect += ["obs=state+image", "image_size=48", "progress=false", "out=collect"]
    proc = subprocess.run(collect, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    src = tmp_path / "collect" / "demos.hdf5"
    with open_dataset(src) as d:
        assert d.attrs["fps"] == rate  # collect records the env's control rate
    out = tmp_path / "lerobot"
    s = export_lerobot(src, out)  # no fps=: the export reads the recorded rate
    assert s["fps"] == rate == 80
    print(f"exported at fps {s['fps']} (recorded by collect)")
    (tmp_path / "edit.sh").write_text(EDIT_TRAIN_SCRIPT)
    (tmp_path / "check.py").write_text(CHECK_SCRIPT)
    work = tmp_path / "work"
    work.mkdir()
    lenv = lerobot_env(lerobot_py, tmp_path) | {
        "PY": str(lerobot_py),
        "HF_LEROBOT_HOME": str(tmp_path / "hf"),
    }
    proc = subprocess.run(
        ["bash", str(tmp_path / "edit.sh"), str(out), str(work)],
        env=lenv,
        capture_output=True,
        text=True,
        timeout=900,
    )
    tail = (proc.stdout + proc.stderr)[-4000:]
    print(tail)
    assert proc.returncode == 0, tail
    merged = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("MERGED"))[7:])
    assert merged["episodes"] == 3 and merged["fps"] == 80
    assert "observation.images.corner2" in merged["stats_keys"] and "action" in merged["stats_keys"]
    assert "TRAINED" in proc.stdout
