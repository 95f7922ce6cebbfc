"""The contract every kernel satisfies, after GPyTorch's ``BaseKernelTestCase``.

Run over cases of every concrete ``Kernel`` subclass exported by ``gpexplain.kernels`` (found
by introspecting ``gpexplain.kernels.__all__``; a class without a case fails
``test_every_kernel_class_has_a_case``): ``diag`` equals the diagonal of the Gram matrix,
``k(X1, X2) = k(X2, X1)^T``, the Gram matrix is symmetric positive semi-definite (smallest
eigenvalue >= -1e-10 of the largest), and the GPyTorch view ``torch_kernel`` evaluates to the
same matrix as NumPy (1e-12 of the largest entry; both are float64 evaluations of one formula).
The kernels are the functional contract's (``tests/contracts/test_functionals.py``), so the
two contracts see the same kernels.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import gpexplain.kernels
from gpexplain.kernels import RBF, Kernel, LocallyLinear
from gpexplain.kernels.measures import Empirical, Gaussian
from tests.contracts._models import cases
from tests.contracts.test_functionals import (
    ATOMS,
    D,
    _additive,
    _input_scaled_periodic_times_linear,
    _matern52,
    _matern_product,
    _random_features,
)

LOCALLY_LINEAR_DIAG = (
    "known defect: LocallyLinear.diag adds weight_noise |z|^2 but __call__ (the Gram matrix) "
    "does not, so a GPX posterior's predict(X) variances differ from the diagonal of "
    "predict(X, return_cov=True)"
)

# name -> (kernel builder, number of input columns)
CASES = {
    "rbf-ard": (lambda: RBF([0.8, 1.1, 1.6], 1.2), D),
    "rbf-isotropic": (lambda: RBF(0.9, 0.7), D),
    "gpytorch-matern52": (_matern52, D),
    "gpytorch-input-scaled-periodic-times-linear": (_input_scaled_periodic_times_linear, D),
    "gpytorch-matern-times-rq": (_matern_product, D),
    "random-features": (_random_features, D),
    "orthogonal-additive-gaussian": (
        lambda: _additive(Gaussian([0.1, -0.2, 0.0], [0.7, 1.1, 0.9])), D,
    ),
    "orthogonal-additive-empirical": (lambda: _additive(Empirical(ATOMS)), D),
    # inputs [x (2 columns), z (D columns)]
    "locally-linear": (lambda: LocallyLinear(RBF([0.8, 1.3], 1.1), 2), 2 + D),
    "locally-linear-weight-noise": (lambda: LocallyLinear(RBF([0.8, 1.3], 1.1), 2, 0.3), 2 + D),
}
# (test, case) pairs that fail today: known defects, each xfail flips when fixed.
KNOWN_DEFECTS = {("diag", "locally-linear-weight-noise"): LOCALLY_LINEAR_DIAG}


def _cases(test):
    return cases(CASES, test, KNOWN_DEFECTS)


def _kernel_classes():
    """Concrete ``Kernel`` subclasses in ``gpexplain.kernels.__all__``."""
    classes = (getattr(gpexplain.kernels, name) for name in gpexplain.kernels.__all__)
    return [cls for cls in classes
            if isinstance(cls, type) and issubclass(cls, Kernel) and not inspect.isabstract(cls)]


def _case(name):
    make, n_columns = CASES[name]
    rng = np.random.default_rng(7)
    return make(), rng.uniform(-1.2, 1.2, size=(8, n_columns)), rng.uniform(-1.5, 1.5,
                                                                            size=(5, n_columns))


def test_every_kernel_class_has_a_case():
    classes = _kernel_classes()
    assert len(classes) >= 5, classes
    covered = {type(CASES[name][0]()) for name in CASES}
    missing = [cls.__name__ for cls in classes if cls not in covered]
    assert not missing, f"kernel classes without a contract case: {missing}"


@pytest.mark.parametrize("name", _cases("diag"))
def test_diag_is_the_diagonal_of_the_gram_matrix(name):
    kernel, X1, _ = _case(name)
    gram = kernel(X1, X1)
    assert gram.shape == (len(X1), len(X1)) and kernel.diag(X1).shape == (len(X1),)
    np.testing.assert_allclose(kernel.diag(X1), np.diag(gram), rtol=0,
                               atol=1e-12 * np.abs(gram).max())


@pytest.mark.parametrize("name", _cases("gram"))
def test_gram_matrix_is_symmetric_positive_semidefinite(name):
    kernel, X1, X2 = _case(name)
    gram = kernel(X1, X1)
    assert np.all(np.isfinite(gram))
    np.testing.assert_allclose(gram, gram.T, rtol=0, atol=1e-14 * np.abs(gram).max())
    cross = kernel(X1, X2)
    assert cross.shape == (len(X1), len(X2))
    np.testing.assert_allclose(cross, kernel(X2, X1).T, rtol=0, atol=1e-14 * np.abs(cross).max())
    eigenvalues = np.linalg.eigvalsh(0.5 * (gram + gram.T))
    assert eigenvalues.min() >= -1e-10 * eigenvalues.max(), eigenvalues


@pytest.mark.parametrize("name", _cases("torch"))
def test_torch_view_agrees_with_numpy(name):
    kernel, X1, X2 = _case(name)
    module = kernel.torch_kernel(X1.shape[1])
    with torch.no_grad():
        value = module(torch.as_tensor(X1), torch.as_tensor(X2)).to_dense().numpy()
    expected = kernel(X1, X2)
    assert value.dtype == np.float64
    np.testing.assert_allclose(value, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
