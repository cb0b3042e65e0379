"""Network pieces pinned where mutation testing found them unpinned: the ensemble layers' init range (nn.Linear's
±1/√in per member), the ensemble LayerNorm's per-member affine by hand, and optimizer_step clearing gradients
to None (so a parameter a loss no longer reaches is not moved by Adam's momentum)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from robosteer.policies.rl.nets import EnsembleLayerNorm, EnsembleLinear, optimizer_step

torch.set_num_threads(1)


def test_ensemble_linear_init_fills_plus_minus_one_over_sqrt_in() -> None:
    torch.manual_seed(0)
    layer = EnsembleLinear(16, 32, ensemble=4)  # bound 1/√16 = 0.25
    for p in (layer.weight, layer.bias):
        assert p.abs().max() <= 0.25
        assert p.max() > 0.2 and p.min() < -0.2  # both ends of the range are reached


def test_ensemble_layer_norm_applies_each_members_own_affine() -> None:
    norm = EnsembleLayerNorm(3, ensemble=2)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([[[2.0, 3.0, 4.0]], [[0.5, -1.0, 1.5]]]))
        norm.bias.copy_(torch.tensor([[[1.0, -2.0, 0.5]], [[-0.5, 0.25, 3.0]]]))
    x = torch.tensor([[[1.0, 2.0, 4.0], [0.0, -3.0, 3.0]], [[5.0, 1.0, 0.0], [2.0, 2.5, -1.0]]])  # (E, B, D)
    plain = F.layer_norm(x, (3,))
    torch.testing.assert_close(norm(x), plain * norm.weight + norm.bias)
    # heads: member 1 alone, with its own weight and bias
    got = norm(x[1:], heads=torch.tensor([1]))
    torch.testing.assert_close(got, plain[1:] * norm.weight[1] + norm.bias[1])
    assert not torch.allclose(got, plain[1:] * norm.weight[0] + norm.bias[0])


def test_optimizer_step_sets_gradients_to_none() -> None:
    """SGD by hand, then Adam: a parameter the second loss does not reach keeps its value (grad None)."""
    a, b = torch.nn.Parameter(torch.tensor(1.0)), torch.nn.Parameter(torch.tensor(2.0))
    sgd = torch.optim.SGD([a], lr=0.1)
    optimizer_step(sgd, 3.0 * a)  # d/da = 3
    assert a.item() == torch.tensor(1.0 - 0.3).item()
    adam = torch.optim.Adam([a, b], lr=0.1)
    optimizer_step(adam, a * b)
    b_after_first = b.detach().clone()
    optimizer_step(adam, 2.0 * a)  # b is not in this loss
    assert b.grad is None and torch.equal(b.detach(), b_after_first)
