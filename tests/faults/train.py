"""Planted faults in the imitation trainer's action-noise augmentation (``policies/train/trainer.py``)."""

TRAINER = "policies/train/trainer.py"
TESTS = ["tests/policies/train/test_action_noise.py"]

_FAULTS = [  # (name, old, new) in policies/train/trainer.py
    (
        "train: action noise is not clipped to the demos' range",
        "torch.clamp(noisy, self.low, self.high)",
        "noisy",
    ),
    (
        "train: action noise scales the variance, not the std",
        "noisy = action + self.std * torch.randn(",
        "noisy = action + self.std**2 * torch.randn(",
    ),
    (
        "train: the augmented batch never reaches the loss",
        "                        batch = self.action_noise(batch)\n",
        "                        self.action_noise(batch)\n",
    ),
    (
        "train: action noise draws from an unsaved generator (resume not exact)",
        "noisy = action + self.std * torch.randn(action.shape, device=action.device)",
        "noisy = action + self.std * torch.randn(action.shape, device=action.device, generator=torch.Generator().manual_seed(int(time.time_ns() % 1000)))",
    ),
]
FAULTS = [{"name": n, "file": TRAINER, "old": old, "new": new, "tests": TESTS} for n, old, new in _FAULTS]
