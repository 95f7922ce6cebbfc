"""MOFAE (NSGA-II via pymoo): a non-dominated front, elitist with respect to its seeds."""

import numpy as np
import pytest

import gpexplain as gx


def cubic(x):
    return (x**3).sum(1)


@pytest.fixture
def setting():
    X = np.random.default_rng(0).uniform(-2, 2, size=(15, 2))
    G, values = gx.poe.gradients_and_values(cubic, X)
    bases = [gx.poe.smoothgrad(cubic, X, delta, 8, seed=i).mean
             for i, delta in enumerate(np.linspace(0.1, 1.5, 8))]
    bases.append(np.zeros_like(G))
    return X, G, values, bases


def dominates(a, b):
    return np.all(a <= b) and np.any(a < b)


def test_front_is_non_dominated_and_losses_are_exact(setting):
    X, G, values, bases = setting
    result = gx.poe.mofae(bases, X, G, values, objectives=("F_grad", "R_avg", "C"),
                          population_size=30, generations=15)
    assert result.losses.shape == (len(result.explanations), 3)
    for i, a in enumerate(result.losses):
        assert not any(dominates(b, a) for j, b in enumerate(result.losses) if j != i)
    for attr, row in zip(result.explanations, result.losses, strict=True):
        recomputed = gx.poe.losses(attr.mean, X, G, values)
        assert row == pytest.approx([recomputed[k] for k in ("F_grad", "R_avg", "C")], rel=1e-12)


def test_every_seed_is_weakly_dominated_by_the_front(setting):
    X, G, values, bases = setting
    result = gx.poe.mofae(bases, X, G, values, population_size=20, generations=10)
    for W in bases:
        seed_losses = gx.poe.losses(W, X, G, values)
        point = np.array([seed_losses["F_grad"], seed_losses["R_avg"]])
        assert any(np.all(row <= point * (1 + 1e-12)) for row in result.losses)


def test_bad_objectives_are_refused(setting):
    X, G, values, bases = setting
    with pytest.raises(ValueError, match="two or more distinct names"):
        gx.poe.mofae(bases, X, G, objectives=("F_grad",))
    with pytest.raises(ValueError, match="two or more distinct names"):
        gx.poe.mofae(bases, X, G, objectives=("F_grad", "R"))
    with pytest.raises(ValueError, match="needs values"):
        gx.poe.mofae(bases, X, G, objectives=("F_func", "C"))
