"""A one-step contextual bandit as an offline dataset: success iff sign(action) == sign(state).

Each demo is one step: a success terminates (reward 0), a failure times out (reward −1, s' = s, from where
the right action still succeeds), so the optimal Q is 0 for the right sign and −1 for the wrong one, while the
Monte-Carlo return of a failed demo is −1/(1 − γ). Half of the demos fail: mixed quality.
"""

from __future__ import annotations

import numpy as np

from robosteer.policies.data import DatasetWriter


def write_bandit(path, episodes: int = 200, seed: int = 0, env_name: str = "bandit") -> None:
    rng = np.random.default_rng(seed)
    with DatasetWriter(path, {"env_name": env_name}, valid_fraction=0.0) as w:
        for _ in range(episodes):
            s = rng.uniform(-1, 1, size=(1, 2)).astype(np.float32)
            a = rng.uniform(-1, 1, size=(1, 1)).astype(np.float32)
            ok = bool(np.sign(a[0, 0]) == np.sign(s[0, 0]))
            w.add_episode(
                obs={"state": s},
                next_obs={"state": s.copy()},
                actions=a,
                rewards=np.asarray([1.0 if ok else 0.0], np.float32),
                dones=np.asarray([1 if ok else 0], np.uint8),
            )
