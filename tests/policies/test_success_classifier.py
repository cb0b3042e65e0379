"""The success classifier behind robot_reward=classifier: its frame labels, threshold and error rates against
hand-computed values, and a training run on a dataset where success is visible (policies/success_classifier.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robosteer.policies.data import DatasetWriter
from robosteer.policies.success_classifier import (
    ClassifierConfig,
    ClassifierError,
    error_rates,
    frame_labels,
    load_classifier,
    pick_threshold,
    report_line,
    save_classifier,
    train_classifier,
)


def test_frames_from_the_first_success_on_are_positive_and_k_steps_before_it_negative():
    dones = np.zeros(12)
    dones[5] = dones[8] = 1  # step 5 reached success: frame 6 is the first success frame
    np.testing.assert_array_equal(
        frame_labels(12, dones, True, final_frames=3, before_success=3),
        [0, 0, 0, 0, -1, -1, 1, 1, 1, 1, 1, 1],
    )


def test_a_success_its_steps_do_not_place_has_its_last_frames_positive():
    # no flag (an operator's verdict), or only the last step's (an episode ended on success): the last 3
    for dones in (np.zeros(8), np.eye(8)[7], None):  # None: a recording without dones
        np.testing.assert_array_equal(
            frame_labels(8, dones, True, final_frames=3, before_success=3), [0, 0, 0, -1, -1, 1, 1, 1]
        )


def test_every_frame_of_a_failed_episode_is_negative():
    dones = np.zeros(6)
    dones[2] = 1  # a failed episode's flags are not read
    np.testing.assert_array_equal(frame_labels(6, dones, False, 3, 3), np.zeros(6))


def test_the_threshold_makes_the_fewest_class_weighted_mistakes():
    # any t in (0.5, 0.6]: no positive missed, 1 of 3 negatives passes (1/3); every other t does worse.
    # The middle of that gap: 0.55
    p, y = np.array([0.9, 0.6, 0.1, 0.5, 0.7]), np.array([1, 1, 0, 0, 0])
    assert pick_threshold(p, y) == pytest.approx(0.55)


def test_a_tie_goes_to_the_higher_threshold():
    # (0.5, 0.6] and (0.8, 0.9] both make half an error (a negative passes / a positive is missed): the
    # higher gap, fewer false successes, at its middle 0.85
    p, y = np.array([0.6, 0.9, 0.5, 0.8]), np.array([1, 1, 0, 0])
    assert pick_threshold(p, y) == pytest.approx(0.85)


def test_a_threshold_needs_both_classes():
    with pytest.raises(ClassifierError, match="positives and negatives"):
        pick_threshold(np.array([0.2, 0.3]), np.array([0, 0]))


def test_error_rates_per_frame_and_per_episode():
    frames = [
        (np.array([0.1, 0.2, 0.9]), np.array([0, -1, 1]), True),  # caught
        (np.array([0.1, 0.4, 0.3]), np.array([0, -1, 1]), True),  # missed: a frame FN and an episode FN
        (np.array([0.6, 0.1, 0.1]), np.array([0, 0, 0]), False),  # a false success frame: episode FP
        (np.array([0.1, 0.1, 0.1]), np.array([0, 0, 0]), False),
    ]
    r = error_rates(0.5, frames)
    assert (r["frames_positive"], r["frames_negative"]) == (2, 8)
    assert r["frame_fp_rate"] == pytest.approx(1 / 8) and r["frame_fn_rate"] == pytest.approx(1 / 2)
    assert (r["episodes_success"], r["episodes_failed"]) == (2, 2)
    assert r["episode_fp_rate"] == pytest.approx(1 / 2) and r["episode_fn_rate"] == pytest.approx(1 / 2)


def _dataset(path, episodes=16, t_len=20, image=True, success_attr=True):
    """Episodes whose frames show a bright square once the task succeeds (every other episode fails)."""
    rng = np.random.default_rng(0)
    with DatasetWriter(path, env_args={"env_name": "push-v3"}) as w:
        for i in range(episodes):
            success = i % 2 == 0
            frames = rng.integers(0, 60, size=(t_len, 16, 16, 3), dtype=np.uint8)
            dones = np.zeros(t_len, dtype=np.uint8)
            if success:
                at = int(rng.integers(8, t_len - 3))  # step at reaches success: frames at + 1 on show it
                dones[at:] = 1
                frames[at + 1 :, 4:12, 4:12] = 255
            obs = {"state": rng.normal(size=(t_len, 3)).astype(np.float32)}
            if image:
                obs["image/corner"] = frames
            w.add_episode(
                obs=obs,
                actions=np.zeros((t_len, 4), dtype=np.float32),
                rewards=np.zeros(t_len, dtype=np.float32),
                dones=dones,
                attrs={"success": success} if success_attr else {},
            )
    return path


FAST = dict(steps=120, batch_size=16, crop=1.0, holdout=0.25)


def test_a_classifier_trained_on_visible_success_separates_held_out_episodes(tmp_path):
    data = _dataset(tmp_path / "eps.hdf5")
    model, threshold, report = train_classifier(data, ClassifierConfig(**FAST))
    assert report["camera"] == "image/corner" and report["held_out_episodes"] == 4
    assert 0.0 < threshold <= 1.0
    assert report["frame_fp_rate"] == 0.0 and report["frame_fn_rate"] == 0.0
    assert report["episode_fp_rate"] == 0.0 and report["episode_fn_rate"] == 0.0
    assert "threshold" in report_line(report) and "held-out episodes" in report_line(report)
    # saved and loaded: the same probabilities and threshold
    save_classifier(tmp_path / "clf", model, threshold, report)
    again, t2, r2 = load_classifier(tmp_path / "clf")
    frames = np.random.default_rng(1).integers(0, 255, size=(5, 16, 16, 3), dtype=np.uint8)
    np.testing.assert_allclose(again.probabilities(frames), model.probabilities(frames), rtol=1e-6)
    assert t2 == threshold and r2["camera"] == "image/corner"
    assert (tmp_path / "clf" / "report.json").exists()


def test_training_is_reproducible_from_its_seed(tmp_path):
    data = _dataset(tmp_path / "eps.hdf5")
    a, _, _ = train_classifier(data, ClassifierConfig(**{**FAST, "steps": 5}))
    b, _, _ = train_classifier(data, ClassifierConfig(**{**FAST, "steps": 5}))
    for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(va, vb), k


@pytest.mark.parametrize(
    "kwargs, config, match",
    [
        ({"image": False}, {}, "has no camera images to classify: collect with obs=state\\+image"),
        (
            {},
            {"camera": "wrist"},
            "has no camera 'image/wrist' to classify: expected one of \\['image/corner'\\]",
        ),
        ({"success_attr": False}, {}, "data/demo_0 has no 'success' attribute"),
        ({"episodes": 4}, {"holdout": 0.25}, "held-out episodes \\(1 of 4.*need successes and failures"),
        ({}, {"holdout": 1.5}, "classifier.holdout=1.5 is not valid"),
    ],
)
def test_bad_data_or_settings_are_named(tmp_path, kwargs, config, match):
    data = _dataset(tmp_path / "eps.hdf5", **kwargs)
    with pytest.raises(ClassifierError, match=match):
        train_classifier(data, ClassifierConfig(**{**FAST, **config}))


def test_a_checkpoint_of_another_kind_is_refused(tmp_path):
    from robosteer.policies.checkpoint import save_checkpoint

    save_checkpoint(tmp_path / "policy", {"m": torch.nn.Linear(2, 2)}, {"kind": "policy"})
    with pytest.raises(ClassifierError, match="holds a 'policy' checkpoint, expected a success classifier"):
        load_classifier(tmp_path / "policy")
    with pytest.raises(ClassifierError, match="not a success classifier's directory"):
        load_classifier(tmp_path / "missing")
