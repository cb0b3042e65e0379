"""A success classifier on camera images: the reward of a robot that reports no success.

Why (HIL-SERL's reward classifier): a real arm has no success flag, and a person cannot judge every episode
of a long run. A small CNN trained on recorded episodes says, frame by frame, whether the task is done; the
first frame it calls a success ends the episode's learning data with a success, as the simulator's flag would.

Labels come from episodes alone (robomimic layout, per-episode ``success`` attribute), as a real arm's
recordings give them:
- positives: the frames from an episode's first success on, where its steps say when that was (``dones``),
  else the last ``final_frames`` frames of a successful episode;
- negatives: the frames at least ``before_success`` steps before a success, and every frame of a failed one;
- the frames in between are left out (a few steps from success, their label is ambiguous).

Training is balanced (half positives, half negatives per batch); the threshold is set on held-out *episodes*
(the one that makes the fewest mistakes over both classes, the higher of a tie: a false success pays the
learner for nothing), and the false-positive / false-negative rates there are reported before any run
relies on the classifier, per frame and per episode (an episode is called a success if any frame is).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from robosteer.policies.encoders import ImageEncoder

log = logging.getLogger(__name__)

KIND = "success_classifier"


class ClassifierError(ValueError):
    """The classifier's data or checkpoint cannot give a classifier (named file, key and what to do)."""


@dataclass
class ClassifierConfig:
    camera: str | None = None  # image key (image/<camera>) to classify; None: the data's only camera
    final_frames: int = 3  # positives of a successful episode whose steps do not say when success came
    before_success: int = 10  # k: negatives are frames at least k steps before a success
    holdout: float = 0.25  # fraction of episodes held out to set the threshold and measure the errors
    steps: int = 1500  # gradient steps
    batch_size: int = 64
    lr: float = 3e-4
    crop: float = 0.9  # random-crop augmentation (the kept side fraction; centre crop at inference)
    seed: int = 0

    def check(self) -> None:
        for name in ("final_frames", "before_success", "steps", "batch_size"):
            if int(getattr(self, name)) < 1:
                raise ClassifierError(f"classifier.{name}={getattr(self, name)} is not valid: expected >= 1")
        if not 0.0 < self.holdout < 1.0:
            raise ClassifierError(
                f"classifier.holdout={self.holdout} is not valid: expected a fraction in (0, 1)"
            )


def frame_labels(
    n: int, dones: np.ndarray | None, success: bool, final_frames: int, before_success: int
) -> np.ndarray:
    """(n,) labels of an episode's ``n`` frames: 1 success, 0 not yet, -1 left out (too close to call).

    ``dones[t]`` is the success the step after frame t reports, so frame t + 1 is the first success frame
    when ``dones[t]`` is the first set flag; a success whose steps report nothing (an operator's verdict, a
    robot without a flag, a recording without ``dones``) is taken to be the episode's last ``final_frames``
    frames.
    """
    labels = np.zeros(n, dtype=np.int64)  # (n,)
    if not success:
        return labels
    flags = np.flatnonzero(np.asarray(dones).astype(bool)) if dones is not None else np.zeros(0, np.int64)
    first = int(flags[0]) + 1 if len(flags) and flags[0] + 1 < n else max(n - final_frames, 0)
    labels[:] = -1
    labels[first:] = 1
    labels[: max(first - before_success + 1, 0)] = 0
    return labels


class SuccessClassifier(nn.Module):
    """uint8 (N, H, W, 3) images -> success logits (N,): the policies' small image encoder, pooled over space
    (whether the scene shows success, not where things are), and a linear head."""

    def __init__(self, image_shape: tuple[int, int, int], crop: float = 0.9) -> None:
        super().__init__()
        self.image_shape = tuple(int(d) for d in image_shape)
        self.encoder = ImageEncoder(self.image_shape, crop=crop, head="pooled")
        self.head = nn.Linear(self.encoder.out_dim, 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:  # (N, H, W, 3) uint8 -> (N,)
        x = images.float() / 127.5 - 1.0  # [-1, 1], as the policies' image normalizer
        return self.head(self.encoder(x)).squeeze(-1)

    @torch.no_grad()
    def probabilities(self, images: np.ndarray, batch: int = 256) -> np.ndarray:
        """Success probability per frame (T,) of uint8 (T, H, W, 3) frames, in evaluation mode."""
        was = self.training
        self.eval()
        out = [
            torch.sigmoid(self(torch.as_tensor(images[i : i + batch]))).numpy()
            for i in range(0, len(images), batch)
        ]
        self.train(was)
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


def pick_threshold(p: np.ndarray, y: np.ndarray) -> float:
    """The threshold with the fewest errors (false positives + false negatives, each class weighted by its
    count's inverse), the higher of a tie, in the middle of the gap that makes them (between the scores
    either side): a margin both ways for unseen frames. ``p`` (N,) probabilities, ``y`` (N,) 0/1 labels."""
    pos, neg = p[y == 1], p[y == 0]
    if len(pos) == 0 or len(neg) == 0:
        raise ClassifierError("setting a threshold needs held-out positives and negatives: both are required")
    candidates = np.unique(np.concatenate([p, [1.0]]))  # call a success at p >= t
    errors = [np.mean(pos < t) + np.mean(neg >= t) for t in candidates]
    best = int(np.flatnonzero(np.isclose(errors, np.min(errors)))[-1])
    below = candidates[best - 1] if best > 0 else 0.0  # any t in (below, candidates[best]] errs alike
    return float((below + candidates[best]) / 2)


def error_rates(
    threshold: float, frames: list[tuple[np.ndarray, np.ndarray, bool]]
) -> dict[str, float | int]:
    """False-positive / false-negative rates of ``threshold`` over episodes ``(probabilities (T,), labels
    (T,), success)``: per labelled frame, and per episode (called a success if any frame reaches it)."""
    p = np.concatenate([f[0] for f in frames])
    y = np.concatenate([f[1] for f in frames])
    called = np.array([bool(np.any(f[0] >= threshold)) for f in frames])
    truth = np.array([f[2] for f in frames])
    rate = lambda hits, n: float(hits) / n if n else float("nan")  # noqa: E731
    return {
        "frames_positive": int(np.sum(y == 1)),
        "frames_negative": int(np.sum(y == 0)),
        "frame_fp_rate": rate(np.sum((p >= threshold) & (y == 0)), np.sum(y == 0)),
        "frame_fn_rate": rate(np.sum((p < threshold) & (y == 1)), np.sum(y == 1)),
        "episodes_success": int(truth.sum()),
        "episodes_failed": int((~truth).sum()),
        "episode_fp_rate": rate(np.sum(called & ~truth), np.sum(~truth)),
        "episode_fn_rate": rate(np.sum(~called & truth), np.sum(truth)),
    }


def _camera(keys: list[str], camera: str | None, path: Path) -> str:
    images = [k for k in keys if k.startswith("image")]
    if camera is not None:
        key = camera if camera.startswith("image/") else f"image/{camera}"
        if key not in images:
            raise ClassifierError(
                f"{path}: has no camera {key!r} to classify: expected one of {images or 'its image keys'}"
                + ("" if images else " (it has none: collect with obs=state+image or obs=pixels)")
            )
        return key
    if len(images) != 1:
        raise ClassifierError(
            f"{path}: "
            + (
                f"has {len(images)} cameras {images}: name one with classifier.camera="
                if images
                else "has no camera images to classify: collect with obs=state+image or obs=pixels"
            )
        )
    return images[0]


def labelled_episodes(
    path: str | Path, cfg: ClassifierConfig
) -> tuple[str, list[tuple[str, np.ndarray, np.ndarray, bool]]]:
    """``(camera key, [(name, frames (T, H, W, 3) uint8, labels (T,), success)])`` of a dataset's episodes."""
    from robosteer.policies.data import DemoFile

    path = Path(path)
    with DemoFile(path) as f:
        key = _camera(f.obs_keys, cfg.camera, path)
        out = []
        for ep in f.episodes(obs_keys=[key]):
            if "success" not in ep["attrs"]:
                raise ClassifierError(
                    f"{path}: data/{ep['name']} has no 'success' attribute: the classifier learns from "
                    "episodes that say whether they succeeded (robosteer-collect keep=all records it)"
                )
            success = bool(ep["attrs"]["success"])
            frames = np.asarray(ep["obs"][key])  # (T, H, W, 3)
            labels = frame_labels(len(frames), ep["dones"], success, cfg.final_frames, cfg.before_success)
            out.append((ep["name"], frames, labels, success))
    return key, out


def train_classifier(
    data: str | Path, cfg: ClassifierConfig
) -> tuple[SuccessClassifier, float, dict[str, Any]]:
    """Train on ``data``'s episodes (all but the held-out ones), set the threshold and measure the errors on
    the held-out episodes. Returns ``(classifier, threshold, report)``."""
    from robosteer.policies.data.hdf5 import split_names

    cfg.check()
    key, episodes = labelled_episodes(data, cfg)
    by_name = {e[0]: e for e in episodes}
    train_names, held_names = split_names(list(by_name), cfg.holdout, cfg.seed)
    for what, names in (("training", train_names), ("held-out", held_names)):
        succ = sum(by_name[n][3] for n in names)
        if succ == 0 or succ == len(names):
            raise ClassifierError(
                f"{data}: the {what} episodes ({len(names)} of {len(episodes)}, classifier.holdout="
                f"{cfg.holdout}) need successes and failures, got {succ} successes: record more episodes, "
                "failures too (robosteer-collect keep=all)"
            )
    frames = {c: [] for c in (0, 1)}
    for n in train_names:
        _, imgs, labels, _ = by_name[n]
        for c in (0, 1):
            frames[c].append(imgs[labels == c])
    pools = {c: torch.as_tensor(np.concatenate(frames[c])) for c in (0, 1)}  # {label: (N_c, H, W, 3)}
    gen = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)  # the head's and encoder's initial weights, the crop offsets
    model = SuccessClassifier(tuple(pools[1].shape[1:]), crop=cfg.crop)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    half = cfg.batch_size // 2
    target = torch.cat([torch.zeros(cfg.batch_size - half), torch.ones(half)])  # (B,)
    model.train()
    for _ in range(cfg.steps):
        neg = pools[0][torch.randint(len(pools[0]), (cfg.batch_size - half,), generator=gen)]
        pos = pools[1][torch.randint(len(pools[1]), (half,), generator=gen)]
        loss = nn.functional.binary_cross_entropy_with_logits(model(torch.cat([neg, pos])), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    held = [(model.probabilities(by_name[n][1]), by_name[n][2], by_name[n][3]) for n in held_names]
    p = np.concatenate([h[0] for h in held])
    y = np.concatenate([h[1] for h in held])
    threshold = pick_threshold(p[y >= 0], y[y >= 0])
    report = {
        "data": str(data),
        "camera": key,
        "threshold": threshold,
        "train_episodes": len(train_names),
        "held_out_episodes": len(held_names),
        "train_frames": {"positive": len(pools[1]), "negative": len(pools[0])},
        "final_loss": float(loss.detach()),
        **error_rates(threshold, held),
        "config": dataclasses.asdict(cfg),
    }
    return model, threshold, report


def report_line(report: dict[str, Any]) -> str:
    """The classifier's held-out figures in one line (printed before a run relies on it)."""
    r = report
    return (
        f"success classifier on {r['camera']}: threshold {r['threshold']:.3f}; on {r['held_out_episodes']} "
        f"held-out episodes: frames FP {r['frame_fp_rate']:.1%} of {r['frames_negative']}, FN "
        f"{r['frame_fn_rate']:.1%} of {r['frames_positive']}; episodes FP {r['episode_fp_rate']:.1%} of "
        f"{r['episodes_failed']} failed, FN {r['episode_fn_rate']:.1%} of {r['episodes_success']} successful"
    )


def save_classifier(
    path: str | Path, model: SuccessClassifier, threshold: float, report: dict[str, Any]
) -> Path:
    """One checkpoint directory (the project's format, written atomically) with the report beside it."""
    from robosteer.policies.checkpoint import jsonable, save_checkpoint

    config = {
        "kind": KIND,
        "image_shape": list(model.image_shape),
        "threshold": threshold,
        "report": jsonable(report),
    }
    out = save_checkpoint(path, {"classifier": model}, config)
    (Path(path) / "report.json").write_text(json.dumps(jsonable(report), indent=2) + "\n")
    return out


def load_classifier(path: str | Path) -> tuple[SuccessClassifier, float, dict[str, Any]]:
    """``(classifier in eval mode, threshold, its held-out report)`` from :func:`save_classifier`'s directory."""
    from robosteer.policies.checkpoint import CheckpointError, load_checkpoint, read_checkpoint_config

    try:
        config = read_checkpoint_config(path)
    except (CheckpointError, FileNotFoundError) as e:
        raise ClassifierError(f"classifier.path={path}: not a success classifier's directory ({e})") from e
    if config.get("kind") != KIND:
        raise ClassifierError(
            f"classifier.path={path}: holds a {config.get('kind')!r} checkpoint, expected a success classifier "
            "(robosteer-steer robot_reward=classifier classifier.data=EPISODES.hdf5 trains one)"
        )
    ckpt = load_checkpoint(path)
    crop = float(config["report"]["config"]["crop"])
    model = SuccessClassifier(tuple(config["image_shape"]), crop=crop)
    model.load_state_dict(ckpt.modules["classifier"])
    return model.eval(), float(config["threshold"]), dict(config["report"])
