"""A diffusion policy trained briefly on a bimodal toy samples both modes; an MSE regressor collapses to the mean."""

from __future__ import annotations

import numpy as np
import torch

from robosteer.policies import make_policy

torch.set_num_threads(1)

MODE = 0.7
META = {"obs": {"state": {"shape": [1], "type": "low_dim"}}, "action": {"shape": [1]}}
STATS = {
    "state": {"min": np.array([-1.0]), "max": np.array([1.0])},
    "action": {"min": np.array([-1.0]), "max": np.array([1.0])},
}
TOY = {
    "n_obs_steps": 1,
    "horizon": 2,
    "n_action_steps": 1,
    "mlp_hidden_dim": 64,
    "mlp_n_blocks": 2,
    "time_embed_dim": 32,
}


def toy_batch(b: int, g: torch.Generator) -> dict:
    """Same observation for every sample; the action chunk is +MODE or -MODE with probability 1/2."""
    sign = torch.randint(0, 2, (b, 1, 1), generator=g).float() * 2 - 1
    return {"obs": {"state": torch.zeros(b, 1, 1)}, "action": sign.expand(b, 2, 1) * MODE}


def train(policy_or_loss, params, steps: int = 300, lr: float = 3e-3, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(params, lr=lr)
    for _ in range(steps):
        loss = policy_or_loss(toy_batch(256, g))
        opt.zero_grad()
        loss.backward()
        opt.step()


def mode_fractions(a: torch.Tensor) -> tuple[float, float]:
    a = a.reshape(-1)
    return float((a - MODE).abs().lt(0.2).float().mean()), float((a + MODE).abs().lt(0.2).float().mean())


def test_diffusion_samples_both_modes_regressor_collapses() -> None:
    torch.manual_seed(0)
    policy = make_policy("diffusion", META, STATS, **TOY)
    train(lambda b: policy.loss(b)[0], policy.parameters())
    samples = policy.sample({"state": torch.zeros(400, 1, 1)})  # (400, 2, 1)
    hi, lo = mode_fractions(samples[:, 0])
    assert hi > 0.25 and lo > 0.25 and hi + lo > 0.85, (hi, lo)

    regressor = torch.nn.Sequential(torch.nn.Linear(1, 64), torch.nn.Mish(), torch.nn.Linear(64, 2))
    train(
        lambda b: torch.nn.functional.mse_loss(regressor(b["obs"]["state"][:, 0]), b["action"][..., 0]),
        regressor.parameters(),
    )
    with torch.no_grad():
        pred = regressor(torch.zeros(400, 1))
    hi, lo = mode_fractions(pred)
    assert hi == 0.0 and lo == 0.0 and pred.abs().max() < 0.2  # the mean of the two modes, i.e. neither
