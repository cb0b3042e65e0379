"""episode_transitions against a step-by-step restatement, over every shape (property-based, hypothesis).

The module computes each chunk's reward, ending, actions, observation windows and Monte-Carlo return with
vectorised index arithmetic; here each chunk is rebuilt with a plain loop from the definitions in its
docstring, for random episode lengths, terminations anywhere (or none), To, Ta, both strides, every reward
mode and with or without recorded ``next_obs``. Observations encode their step, so a window shifted by one
is visible.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from robosteer.policies.rl.offline import episode_transitions


def naive(ep: dict, to: int, ta: int, reward: str, scale: float, discount: float | None, stride: int) -> dict:
    """Each chunk from its definition, one at a time."""
    dones = list(ep["dones"])
    terminated = any(dones)
    t_len = dones.index(True) + 1 if terminated else len(dones)
    obs = ep["obs"]["state"]
    last = obs[t_len - 1] if ep["next_obs"] is None else ep["next_obs"]["state"][t_len - 1]
    frames = [obs[t] for t in range(t_len)] + [last]  # the T+1 states

    def window(end: int) -> np.ndarray:  # To frames ending at state ``end``, padded with frame 0
        return np.stack([frames[max(end - to + 1 + i, 0)] for i in range(to)])

    rows: dict[str, list] = {k: [] for k in ("obs", "next_obs", "action", "reward", "done")}
    for s in range(0, t_len, stride):
        executed = [s + j for j in range(ta) if s + j < t_len]
        done = terminated and s + ta >= t_len
        if reward == "sparse":
            r = 0.0 if done else -1.0
        else:
            r = float(sum(float(ep["rewards"][t]) for t in executed))
            if reward == "shaped":
                r = (r / scale - len(executed)) / ta
        rows["obs"].append(window(s))
        rows["next_obs"].append(window(min(s + ta, t_len)))
        rows["action"].append(np.concatenate([ep["actions"][min(s + j, t_len - 1)] for j in range(ta)]))
        rows["reward"].append(r)
        rows["done"].append(float(done))
    out = {k: np.asarray(v) for k, v in rows.items()}
    if discount is not None:  # R_i = r_i + γ·R_(the chunk that starts where chunk i ends)
        hop = max(ta // stride, 1)
        r = out["reward"]
        tail = 0.0 if terminated else r[-1] / (1 - discount)
        ret = np.zeros(len(r))
        for i in reversed(range(len(r))):
            ret[i] = r[i] + discount * (ret[i + hop] if i + hop < len(r) else tail)
        out["mc_return"] = ret
    return out


@st.composite
def episodes(draw) -> dict:
    length = draw(st.integers(1, 14))
    action_dim = draw(st.integers(1, 3))
    t = np.arange(length, dtype=np.float32)
    obs = np.stack([t, 10 + t], axis=1)  # (T, 2): state t encodes t
    actions = np.stack([100 * t + j for j in range(action_dim)], axis=1)  # (T, A)
    rewards = np.asarray(draw(st.lists(st.integers(-8, 8), min_size=length, max_size=length)), np.float32) / 4
    dones = np.asarray(draw(st.lists(st.booleans(), min_size=length, max_size=length)))
    dones &= draw(st.booleans())  # half the episodes never terminate (time-outs)
    next_obs = {"state": obs + 0.5} if draw(st.booleans()) else None
    return {
        "obs": {"state": obs},
        "next_obs": next_obs,
        "actions": actions,
        "rewards": rewards,
        "dones": dones,
    }


@given(
    ep=episodes(),
    to=st.integers(1, 3),
    ta=st.integers(1, 5),
    back_to_back=st.booleans(),
    reward=st.sampled_from(["sparse", "dense", "shaped"]),
    discount=st.sampled_from([None, 0.9]),
)
def test_every_chunk_matches_its_definition(ep, to, ta, back_to_back, reward, discount) -> None:
    stride = ta if back_to_back else 1
    got = episode_transitions(ep, ["state"], to, ta, reward, 10.0, discount, None, stride)
    want = naive(ep, to, ta, reward, 10.0, discount, stride)
    for key in ("obs", "next_obs"):
        np.testing.assert_array_equal(got[f"{key}/state"], want[key])
    np.testing.assert_array_equal(got["action"], want["action"])
    np.testing.assert_allclose(got["reward"], want["reward"], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got["done"], want["done"])
    if discount is not None:
        np.testing.assert_allclose(got["mc_return"], want["mc_return"], rtol=1e-5, atol=1e-5)
    else:
        assert "mc_return" not in got
