"""Hydra's ConfigStore holds robosteer's structured configs (scripts/schemas.py) for every test that
composes a command's config, as each console script's main() does before Hydra runs.

The optional GPU backend's environment (.venv-gpu, `make gpu-test`) has no Hydra and its tests compose
no config, so the registration is skipped there rather than failing the whole session at import.

``tiny_state_demos``: a tiny push-v3 state dataset (random walks) for the training tests' mechanics.
``pixel_base_run``: one tiny policy trained from pixels, collected and trained once per session, for the script
and benchmark tests that steer, evaluate or probe a pixel base."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import clirun
import pytest

if importlib.util.find_spec("hydra") is not None:
    from robosteer.scripts import schemas

    schemas.register(eval_sources=True)  # the tests compose robosteer-eval's config too

# Property-based tests (hypothesis) run derandomised with few examples and no deadline, so CI is repeatable and
# fast on 2 cores; HYPOTHESIS_PROFILE=dev explores more (random draws, 200 examples). .venv-gpu has no hypothesis.
if importlib.util.find_spec("hypothesis") is not None:
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "ci",
        derandomize=True,
        max_examples=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    # function-scoped fixtures here are stateless factories (e.g. ``synthetic``): reusing them across examples is safe
    settings.register_profile(
        "dev", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# `make test` runs the suite on two workers (pytest-xdist, --dist loadgroup). A group's tests stay on one worker, in
# order, so its module-scoped fixtures are built once: a module is a group, except that the tests sharing the
# session's pixel base form one, steer's robot tests another (they balance the two workers), and the tests that
# start a Ray cluster share one worker, so two clusters never start at once.
RAY_TESTS = ("tests/real/test_learner.py", "::test_learner_on_ray_")
ROBOT_TESTS = ("tests/scripts/test_steer.py", ("twin", "robot", "operator", "classifier"))


def _worker_group(item: pytest.Item) -> str:
    path = item.nodeid.split("::")[0]
    if any(part in item.nodeid for part in RAY_TESTS):
        return "ray"
    if "pixel_base_run" in getattr(item, "fixturenames", ()):
        return "pixel_base_run"
    if path == ROBOT_TESTS[0] and any(word in item.name for word in ROBOT_TESTS[1]):
        return f"{path}::robot"
    return path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_worker_group(item)))


# The repository root (tests/ is one level down). On PYTHONPATH it makes `import robosteer` load this
# checkout's robosteer/ (whose __init__ reaches up to policies/, sim/, ...), not an installed copy, so a
# subprocess runs the code under test, also in a temporary copy (make faults) or a mutation stage.
REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "MUJOCO_GL": "egl"}


@pytest.fixture(scope="session")
def pixel_base_run(tmp_path_factory) -> tuple[Path, Path]:
    """(work dir, a tiny diffusion run trained with obs=pixels on 2 push-v3 demos at 32 px, in <work>/base)."""
    work = tmp_path_factory.mktemp("pixels")

    def run(module: str, *args: str) -> None:
        cmd = [sys.executable, "-m", module, *args, "progress=false"]
        p = clirun.run(cmd, cwd=work, env=ENV, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]

    run("robosteer.scripts.collect", "task=push-v3", "episodes=2", "obs=pixels", "image_size=32", "out=demos")
    tiny = [
        "policy.mlp_hidden_dim=32",
        "policy.mlp_n_blocks=1",
        "policy.time_embed_dim=16",
        "policy.horizon=8",
    ]
    tiny += ["policy.n_action_steps=4", "policy.num_inference_steps=2", "policy.rgb_channels=[8]"]
    tiny += ["policy.n_obs_steps=2"]  # a stacked window (obs=pixels defaults to 1): per-step faults show
    data = f"dataset={work / 'demos' / 'demos.hdf5'}"
    run(
        "robosteer.scripts.train",
        data,
        "obs=pixels",
        "steps=3",
        "batch_size=16",
        "lr_warmup_steps=1",
        *tiny,
        "out=base",
    )
    return work, work / "base"


@pytest.fixture(scope="module")
def tiny_state_demos(tmp_path_factory) -> Path:
    """A tiny push-v3 state dataset (4 random-walk episodes of 12 steps, a quarter held out): the training
    mechanics, not task success."""
    import numpy as np

    from robosteer.policies.data import DatasetWriter

    path = tmp_path_factory.mktemp("demos") / "demos.hdf5"
    rng = np.random.default_rng(0)
    with DatasetWriter(path, {"env_name": "push-v3"}, valid_fraction=0.25) as w:
        for _ in range(4):
            n = 12
            w.add_episode(
                {"state": rng.standard_normal((n, 39)).astype(np.float32)},
                rng.uniform(-1, 1, (n, 4)).astype(np.float32),
                np.zeros(n, np.float32),
                np.r_[np.zeros(n - 1), 1].astype(bool),
            )
    return path
