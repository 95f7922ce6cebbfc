"""Posteriors over several outputs f_1 .. f_t of one input x (issue 24).

Two forms, both with ``output_names`` and a ``marginal(i)`` that is an ordinary single-output
``Posterior`` (so every explanation of output i is the one of that marginal):

* ``CoregionalizedPosterior``: the intrinsic coregionalisation model (ICM; Bonilla, Chai and
  Williams, *Multi-task Gaussian process prediction*, 2008; Alvarez, Rosasco and Lawrence,
  *Kernels for vector-valued functions: a review*, 2012, Sec. 4.2)

      k((x, i), (x', j)) = B_ij k(x, x'),    B = W W^T + diag(v)  (t x t, PSD)

  fitted to a task-augmented training set ``(x_n, task_n, y_n)``, n = 1..N. Its representer
  form is over the augmented set: ``K = B[task, task] * k(X, X) + diag(noise)``,
  ``a = K^{-1} (y - m0[task])``, ``Q = K^{-1}``. A linear functional L acting on x then has
  cross term ``B[i, task_n] (L k(., x_n))`` for output i and prior term ``B_ij L L' k``:

      E[L f_i]            = L m0_i + sum_n B[i, task_n] (L k(., x_n)) a_n
      Cov[L f_i, L' f_j]  = B_ij L L' k - (B[i, task] * L k(., X)) Q (B[j, task] * L' k(., X))^T

  so explanations of every output, and their covariance across outputs at the same point,
  are exact.
* ``IndependentOutputs``: one single-output posterior per output (BoTorch ``ModelListGP`` and
  batched ``SingleTaskGP``, scikit-learn ``GaussianProcessRegressor`` on a 2-D y). The outputs
  are independent a posteriori, so the covariance between outputs is zero by construction:
  ``independent`` is True and nothing is computed for it.

The marginal of output i of the ICM is a single-output posterior in representer form with
kernel ``B_ii k``, basis points the augmented inputs, ``alpha = (B[i, task] / B_ii) a`` and
quadratic form ``(left r) Q (right r)^T`` with ``r = B[i, task] / B_ii``.

``TaskAugmentedPosterior`` holds what the ICM shares with the linear model of
coregionalisation (``gpexplain.posterior.lmc.LMCPosterior``, a sum of Q such terms with their
own kernels): the validated task-augmented data, ``K = sum_q B^q[task, task] * k_q(X, X) +
diag(noise)`` and its Cholesky factor, ``a``, the quadratic form, the log marginal likelihood
and the covariance across outputs at a point, all over its ``coregionalization_terms``
(``[(k, B)]`` for the ICM).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from gpexplain._validation import as_feature_matrix, check_finite_result
from gpexplain.functionals.terms import sum_terms
from gpexplain.kernels import RBF, GPyTorchKernel, as_kernel
from gpexplain.posterior.base import Posterior
from gpexplain.posterior.exact import _as_noise, cholesky_with_jitter

__all__ = [
    "CoregionalizedPosterior",
    "IndependentOutputs",
    "MultiOutputPosterior",
    "TaskAugmentedPosterior",
    "check_coregionalization",
    "scaled_kernel",
]


def scaled_kernel(kernel, factor: float, n_features: int):
    """``factor * kernel`` as a kernel the explanation schemes know (factor > 0).

    ``gx.kernels.RBF`` stays an RBF (variance times factor, closed forms kept); a
    ``GPyTorchKernel`` becomes its module with output scale ``factor``
    (``gpexplain.kernels.gpytorch_adapter.input_scaled`` with no shift or scaling of the
    inputs; explained by quadrature, as before).

    Raises
    ------
    TypeError
        Another kernel type (named).
    ValueError
        ``factor`` not finite and > 0.
    """
    factor = float(factor)
    if not (np.isfinite(factor) and factor > 0):
        raise ValueError(f"factor must be a finite number > 0, got {factor}.")
    if isinstance(kernel, RBF):
        return RBF(kernel.lengthscale, kernel.variance * factor)
    if isinstance(kernel, GPyTorchKernel):
        from gpexplain.kernels.gpytorch_adapter import input_scaled

        return as_kernel(input_scaled(kernel.module, np.zeros(n_features), np.ones(n_features),
                                      factor))
    raise TypeError(
        f"kernel {kernel!r} cannot be scaled for a coregionalised output; supported: "
        "gx.kernels.RBF or a GPyTorch kernel."
    )


class MultiOutputPosterior:
    """A posterior over t outputs of one input (abstract base of the two forms).

    Attributes
    ----------
    output_names : list of str
        One per output, distinct.
    feature_names : list of str
    independent : bool
        True when the outputs are independent a posteriori (zero cross-output covariance,
        stated rather than computed).
    """

    output_names: list[str]
    feature_names: list[str]
    independent: bool
    _save_kind = "model"

    @property
    def n_outputs(self) -> int:
        return len(self.output_names)

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    def marginal(self, output) -> Posterior:
        """The single-output posterior of one output (by name or index)."""
        raise NotImplementedError

    @property
    def data_inputs(self) -> np.ndarray:
        return self.marginal(0).data_inputs

    def check_inputs(self, X, name: str = "X") -> np.ndarray:
        return self.marginal(0).check_inputs(X, name)

    def output_index(self, outputs=None) -> list[int]:
        """Indices of ``outputs`` (names or integer positions; None: all, in order).

        Raises
        ------
        ValueError
            An unknown name, an index out of range, a repeated or empty selection.
        TypeError
            Not a name, an integer or a sequence of them.
        """
        if outputs is None:
            return list(range(self.n_outputs))
        if isinstance(outputs, str | int | np.integer):
            outputs = [outputs]
        try:
            chosen = list(outputs)
        except TypeError:
            raise TypeError(
                f"outputs must be an output name, an index or a sequence of them, got {outputs!r}."
            ) from None
        index = []
        for entry in chosen:
            if isinstance(entry, str):
                if entry not in self.output_names:
                    raise ValueError(
                        f"outputs: unknown output {entry!r}; the outputs are {self.output_names}."
                    )
                index.append(self.output_names.index(entry))
            elif isinstance(entry, int | np.integer) and not isinstance(entry, bool):
                if not 0 <= entry < self.n_outputs:
                    raise ValueError(
                        f"outputs: index {entry} is out of range for {self.n_outputs} outputs."
                    )
                index.append(int(entry))
            else:
                raise TypeError(f"outputs entries must be names or integers, got {entry!r}.")
        if not index or len(set(index)) != len(index):
            raise ValueError(f"outputs must name distinct outputs, at least one; got {outputs!r}.")
        return index

    def predict(self, X, return_cov: bool = False):
        """Latent posterior mean and variance of every output at X.

        Parameters
        ----------
        X : array-like (n_points, n_features)
        return_cov : bool
            Also the covariance across outputs at each point.

        Returns
        -------
        mean : ndarray (n_points, n_outputs)
        var_or_cov : ndarray (n_points, n_outputs), or (n_points, n_outputs, n_outputs)
            With ``return_cov``: ``Cov[f_i(x), f_j(x)]`` at each point (zero off the diagonal
            for independent outputs).
        """
        X = self.check_inputs(X)
        parts = [self.marginal(i).predict(X) for i in range(self.n_outputs)]
        mean = np.stack([part[0] for part in parts], axis=1)
        var = np.stack([part[1] for part in parts], axis=1)
        if not return_cov:
            return mean, var
        cov = self._output_covariance(X, var)
        check_finite_result("predict", mean, cov)
        return mean, cov

    def _output_covariance(self, X, var):
        return var[:, :, None] * np.eye(self.n_outputs)[None]

    def predict_mean(self, X) -> np.ndarray:
        """Latent posterior mean of every output, (n_points, n_outputs)."""
        X = self.check_inputs(X)
        return np.stack([self.marginal(i).predict_mean(X) for i in range(self.n_outputs)], 1)


def _output_names(names, n: int) -> list[str]:
    if names is None:
        return [f"y{i}" for i in range(n)]
    if isinstance(names, str):
        raise TypeError(f"output_names must be a sequence of {n} names, got a string {names!r}.")
    names = [str(name) for name in names]
    if len(names) != n or len(set(names)) != n:
        raise ValueError(f"output_names must be {n} distinct names, got {names!r}.")
    return names


class IndependentOutputs(MultiOutputPosterior):
    """Outputs modelled by separate single-output posteriors over the same features.

    Parameters
    ----------
    posteriors : sequence of Posterior
        One per output, with the same features.
    output_names : sequence of str, optional
        Default ``y0, y1, ...``.

    Raises
    ------
    TypeError
        An entry that is not a ``Posterior``.
    ValueError
        No posteriors, different features, or bad ``output_names``.
    """

    independent = True

    def __init__(self, posteriors, output_names=None):
        posteriors = list(posteriors)
        if not posteriors:
            raise ValueError("posteriors must hold at least one posterior.")
        for index, posterior in enumerate(posteriors):
            if not isinstance(posterior, Posterior):
                raise TypeError(
                    f"posteriors[{index}] is a {type(posterior).__name__}, not a Posterior."
                )
            if list(posterior.feature_names) != list(posteriors[0].feature_names):
                raise ValueError(
                    f"posteriors[{index}] has features {posterior.feature_names}, "
                    f"posteriors[0] {posteriors[0].feature_names}: they must match."
                )
        self.posteriors = posteriors
        self.output_names = _output_names(output_names, len(posteriors))
        self.feature_names = list(posteriors[0].feature_names)

    def __repr__(self) -> str:
        return f"IndependentOutputs(outputs={self.output_names})"

    def marginal(self, output) -> Posterior:
        return self.posteriors[self.output_index(output)[0]]

    @property
    def kernel(self):
        """The first output's kernel (what argument checks that look at a kernel's type see;
        each output is explained with its own kernel)."""
        return self.posteriors[0].kernel


def check_coregionalization(B, name: str = "coregionalization") -> np.ndarray:
    """A coregionalisation matrix as float64 (t, t), symmetrised.

    Raises
    ------
    ValueError
        Not square, not finite and symmetric, or not positive semi-definite with a positive
        diagonal (the message starts with ``name``).
    """
    B = np.asarray(B, dtype=np.float64)
    if B.ndim != 2 or B.shape[0] != B.shape[1] or B.shape[0] < 1:
        raise ValueError(f"{name} must be a square matrix, got shape {B.shape}.")
    if not np.all(np.isfinite(B)) or not np.allclose(B, B.T, rtol=1e-10, atol=0):
        raise ValueError(f"{name} must be finite and symmetric.")
    if np.any(np.diag(B) <= 0) or np.linalg.eigvalsh(B).min() < -1e-10 * np.abs(B).max():
        raise ValueError(
            f"{name} must be positive semi-definite with a positive diagonal "
            f"(diagonal {np.diag(B).tolist()})."
        )
    return 0.5 * (B + B.T)


class TaskAugmentedPosterior(MultiOutputPosterior):
    """Exact posterior of a coregionalised GP conditioned on task-augmented data (abstract).

    Covariance ``k((x, i), (x', j)) = sum_q B^q_ij k_q(x, x')`` over the terms
    ``coregionalization_terms`` = [(k_q, B^q)] (one for the ICM, Q for the LMC); the
    representer form is over the n_train observations ``(x_n, task_n, y_n)``:
    ``K = sum_q B^q[tasks, tasks] * k_q(X, X) + diag(noise)``, ``a = K^{-1} (y - m0[tasks])``.

    Attributes
    ----------
    train_inputs : ndarray (n_train, n_features)
    train_tasks : ndarray of int (n_train,)
    train_targets : ndarray (n_train,)
    noise : ndarray (n_train,)
    mean : ndarray (n_outputs,)
    alpha : ndarray (n_train,)
    cholesky : ndarray (n_train, n_train)
        Lower factor of K.
    """

    independent = False

    @property
    def coregionalization_terms(self) -> list[tuple[object, np.ndarray]]:
        """``[(k_q, B^q)]``: the input kernel and t x t coregionalisation matrix of each term."""
        raise NotImplementedError

    def _condition(self, X, tasks, y, noise, mean, n_outputs: int, output_names, feature_names):
        """Validate the augmented data, then set the attributes and factor K.

        Raises
        ------
        ValueError
            Bad shapes or values (named), a kernel with non-finite values on X, a matrix that
            is not positive definite.
        """
        X, names = as_feature_matrix(X, "X", feature_names)
        n, t = X.shape[0], n_outputs
        task_values = np.asarray(tasks)
        if task_values.shape != (n,) or not np.issubdtype(task_values.dtype, np.number):
            raise ValueError(f"tasks must be {n} integers (one per row of X), got "
                             f"shape {task_values.shape}.")
        task_index = task_values.astype(np.int64)
        if np.any(task_index != task_values) or task_index.min() < 0 or task_index.max() >= t:
            raise ValueError(f"tasks must be integers in 0..{t - 1} (the rows of "
                             "coregionalization).")
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if y.shape != (n,) or not np.all(np.isfinite(y)):
            raise ValueError(f"y must be {n} finite values (one per row of X).")
        m0 = np.broadcast_to(np.asarray(mean, dtype=np.float64), (t,)).copy()
        if not np.all(np.isfinite(m0)):
            raise ValueError(f"mean must be finite, got {m0.tolist()}.")
        self.train_inputs = X
        self.train_tasks = task_index
        self.train_targets = y
        self.noise = _as_noise(noise, n)
        self.mean = m0
        self.feature_names = names
        self.output_names = _output_names(output_names, t)
        gram = sum_terms(B[np.ix_(task_index, task_index)] * kernel(X, X)
                         for kernel, B in self.coregionalization_terms)
        if not np.all(np.isfinite(gram)):
            raise ValueError(f"kernel {self._kernel_description()} gives non-finite values on X.")
        gram[np.diag_indices_from(gram)] += self.noise
        try:
            self.cholesky, self.jitter = cholesky_with_jitter(gram)
        except np.linalg.LinAlgError as error:
            raise ValueError(str(error)) from None
        self.alpha = cho_solve((self.cholesky, True), y - m0[task_index])

    def _kernel_description(self) -> str:
        return repr([kernel for kernel, _ in self.coregionalization_terms])

    def term_task_weights(self, outputs) -> np.ndarray:
        """``B^q[i, task_n]`` for each term and selected output i, (Q, len(outputs), n_train)."""
        rows = np.asarray(outputs)
        return np.stack([B[rows][:, self.train_tasks] for _, B in self.coregionalization_terms])

    def term_coregionalizations(self, outputs) -> np.ndarray:
        """``B^q_ij`` for each term and selected outputs i, j, (Q, len(outputs), len(outputs))."""
        rows = np.asarray(outputs)
        return np.stack([B[np.ix_(rows, rows)] for _, B in self.coregionalization_terms])

    def quadratic_form(self, left: np.ndarray, right: np.ndarray | None = None) -> np.ndarray:
        """``left K^{-1} right^T`` over the augmented set through the Cholesky factor."""

        def whiten(cross):
            flat = cross.reshape(-1, cross.shape[-1])
            solved = solve_triangular(self.cholesky, flat.T, lower=True, check_finite=False)
            return np.moveaxis(solved.reshape((len(self.cholesky),) + cross.shape[:-1]), 0, -1)

        W_left = whiten(left)
        W_right = W_left if right is None else whiten(right)
        return W_left @ np.swapaxes(W_right, -1, -2)

    def log_marginal_likelihood(self) -> float:
        """``log N(y | m0[tasks], K)`` of the augmented training observations (their units)."""
        residual = self.train_targets - self.mean[self.train_tasks]
        return float(-0.5 * residual @ self.alpha - np.sum(np.log(np.diag(self.cholesky)))
                     - 0.5 * len(residual) * np.log(2.0 * np.pi))

    def _output_covariance(self, X, var):
        outputs = range(self.n_outputs)
        weighted = sum_terms(kernel(X, self.train_inputs)[:, None, :] * weights[None]
                             for (kernel, _), weights in zip(
                                 self.coregionalization_terms, self.term_task_weights(outputs),
                                 strict=True))
        prior = sum_terms(kernel.diag(X)[:, None, None] * B[None]
                          for kernel, B in self.coregionalization_terms)
        cov = prior - self.quadratic_form(weighted)
        return 0.5 * (cov + np.swapaxes(cov, 1, 2))


class CoregionalizedPosterior(TaskAugmentedPosterior):
    """Exact posterior of an intrinsic coregionalisation model (ICM) on task-augmented data.

    Parameters
    ----------
    X : array-like (n_train, n_features)
        Training inputs, one row per observation.
    tasks : array-like of int (n_train,)
        The output (task) each row observes, in ``0 .. n_outputs - 1``.
    y : array-like (n_train,)
        The observed values.
    kernel : gpexplain kernel (``gx.kernels.RBF``) or GPyTorch kernel
        The input kernel k.
    coregionalization : array-like (n_outputs, n_outputs)
        B: symmetric positive semi-definite with a positive diagonal (``W W^T + diag(v)``).
    noise : float or array-like (n_train,)
        Observation-noise variance, one or per row (per task: ``noise_t[tasks]``).
    mean : float or array-like (n_outputs,), default 0.0
        Constant prior mean of each output.
    output_names, feature_names : sequence of str, optional

    Attributes
    ----------
    train_inputs : ndarray (n_train, n_features)
    train_tasks : ndarray of int (n_train,)
    alpha : ndarray (n_train,)
        ``a = K^{-1} (y - m0[tasks])`` over the augmented set.
    cholesky : ndarray (n_train, n_train)
        Lower factor of ``K = B[tasks, tasks] * k(X, X) + diag(noise)``.

    Raises
    ------
    ValueError
        Bad shapes or values (named), B not symmetric PSD with positive diagonal, a matrix
        that is not positive definite.
    """

    def __init__(self, X, tasks, y, kernel, coregionalization, noise, mean=0.0,
                 output_names=None, feature_names=None):
        B = check_coregionalization(coregionalization)
        self.kernel = as_kernel(kernel)
        self.coregionalization = B
        self._condition(X, tasks, y, noise, mean, B.shape[0], output_names, feature_names)

    def __repr__(self) -> str:
        n, d = self.train_inputs.shape
        return (f"CoregionalizedPosterior(n_train={n}, n_features={d}, "
                f"outputs={self.output_names}, kernel={self.kernel!r})")

    @property
    def coregionalization_terms(self):
        return [(self.kernel, self.coregionalization)]

    def _kernel_description(self) -> str:
        return repr(self.kernel)

    def task_weights(self, outputs) -> np.ndarray:
        """``B[i, task_n]`` for each selected output i, (len(outputs), n_train)."""
        return self.coregionalization[np.asarray(outputs)][:, self.train_tasks]

    def marginal(self, output) -> Posterior:
        return _CoregionalizedMarginal(self, self.output_index(output)[0])


class _CoregionalizedMarginal(Posterior):
    """Output i of a ``CoregionalizedPosterior`` as a single-output representer form.

    Kernel ``B_ii k``; ``alpha = r a``; ``left Q right^T = (left r) K^{-1} (right r)^T`` with
    ``r = B[i, tasks] / B_ii`` (so that the cross term ``B_ii L k(., x_n) r_n`` is the ICM's
    ``B[i, task_n] L k(., x_n)``).
    """

    def __init__(self, parent: CoregionalizedPosterior, index: int):
        self.parent = parent
        self.output = index
        diagonal = parent.coregionalization[index, index]
        self.kernel = scaled_kernel(parent.kernel, diagonal, parent.train_inputs.shape[1])
        self.ratio = parent.task_weights([index])[0] / diagonal
        self.train_inputs = parent.train_inputs
        self.alpha = self.ratio * parent.alpha
        self.mean = float(parent.mean[index])
        self.feature_names = parent.feature_names

    def __repr__(self) -> str:
        return f"marginal {self.parent.output_names[self.output]!r} of {self.parent!r}"

    def quadratic_form(self, left, right=None):
        return self.parent.quadratic_form(
            left * self.ratio, None if right is None else right * self.ratio
        )
