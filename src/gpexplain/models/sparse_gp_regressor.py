"""``SparseGPRegressor``: sparse variational GP (SVGP) regression with GPyTorch, explained exactly.

The estimator standardises X and y, places inducing points by k-means (or a random subset of
the rows), and maximises the evidence lower bound (Hensman et al. 2013; Seitz 2022, eq. 6)
with Adam on minibatches over the kernel hyperparameters, the noise, the constant mean, the
inducing locations and the whitened Gaussian variational distribution ``q(v) = N(m_v, S_v)``
(GPyTorch ``VariationalStrategy`` with a ``CholeskyVariationalDistribution``). The result is a
``VariationalPosterior`` in the *original* units of X and y, exactly: with column scales
``s_x``, target scale ``s_y`` and ``u = m0 + Lz v``,

* the ARD-SE kernel on standardised inputs is an ARD-SE kernel on the original inputs with
  lengthscales ``l * s_x`` and variance ``s_y^2 * outputscale``;
* the inducing points are un-standardised, ``Z = Z_s * s_x + mean_x``;
* Kzz and its jitter scale by ``s_y^2``, so ``Lz = s_y Lz_s`` and the whitened ``m_v, S_v``
  stay as they are: ``a = Lz^{-T} m_v = a_s / s_y`` and ``Q = Q_s / s_y^2`` follow exactly.

Hence ``integrated_gradients(model, X)`` gives the closed-form IG mean and full covariance.
"""

from __future__ import annotations

import warnings

import gpytorch
import numpy as np
import torch
from linear_operator.utils.errors import NotPSDError
from linear_operator.utils.warnings import NumericalWarning
from scipy.linalg import cho_solve, solve_triangular
from sklearn.base import BaseEstimator, RegressorMixin

from gpexplain._torch import as_tensor, to_numpy
from gpexplain.kernels import RBF
from gpexplain.models._base import PosteriorEstimator
from gpexplain.models._fitting import (
    DEFAULT_NOISE,
    LENGTHSCALE_LOWER_BOUND,
    NOISE_LOWER_BOUND,
    FitError,
    gaussian_likelihood,
)
from gpexplain.models._kernel_choices import KERNELS
from gpexplain.models._params import (
    Integer,
    Options,
    PositiveNumber,
    Seed,
    Variance,
)
from gpexplain.models._standardisation import FeatureScaling, constant_columns, target_scaling
from gpexplain.models._svgp import INDUCING_INITS, SVGPModel, initial_inducing_points
from gpexplain.models._targets import IndependentOutputsFit
from gpexplain.posterior.exact import cholesky_with_jitter
from gpexplain.posterior.variational import VariationalPosterior

__all__ = ["SparseGPRegressor"]

OPTIMIZERS = ("adam", None)


class SparseGPRegressor(
    IndependentOutputsFit, PosteriorEstimator, RegressorMixin, BaseEstimator
):
    """Sparse variational Gaussian-process regression (SVGP) with a squared-exponential kernel.

    Model: ``y = f(x) + eps``, ``f ~ GP(m0, k)``, ``k(x, x') = variance * exp(-0.5 * sum_i
    (x_i - x'_i)^2 / lengthscale_i^2)``, ``eps ~ N(0, noise)``, approximated through
    ``n_inducing`` inducing variables ``u = f(Z)`` with ``q(u)`` Gaussian (Titsias 2009;
    Hensman et al. 2013). GPyTorch in float64 with Cholesky forced at every size.

    Parameters
    ----------
    n_inducing : int, default 128
        Number of inducing points M (at most the number of training rows). Cost per step
        is O(batch_size M^2 + M^3).
    kernel : {"ard", "isotropic"} or gx.kernels.RBF, default "ard"
        As in ``GPRegressor``. An ``RBF`` instance (original units) is the initial value, or
        the final kernel when ``optimizer=None``.
    batch_size : int, default 256
        Rows per minibatch; a value above the number of rows means full-batch steps.
    n_epochs : int, default 50
        Passes over the (shuffled) training rows.
    learning_rate : float, default 0.01
        Adam step size (Seitz 2022 App. B uses 0.01).
    noise : float, optional
        Noise variance in squared units of y: initial value (final with ``optimizer=None``).
        Default: 0.1 times the variance of y.
    inducing_init : {"kmeans", "random"}, default "kmeans"
        Initial inducing locations: k-means centres of the standardised rows (scikit-learn
        ``KMeans``, one seeded initialisation) or a seeded random subset of distinct rows.
    optimizer : {"adam", None}, default "adam"
        ``"adam"`` maximises the ELBO over everything. None keeps the given kernel, noise and
        the initial inducing points and sets q(u) to its closed-form optimum for them
        (Titsias 2009), the maximiser of the ELBO over q.
    random_state : int, default 0
        Seed of the inducing-point initialisation, the variational initialisation and the
        minibatch order (the global torch and NumPy random states are left untouched).
    multi_output : {"independent"}, default "independent"
        For a 2-D y only: one SVGP per column, independently (below); the only form for now.

    Several outputs (issue 24): ``fit(X, Y)`` with a 2-D Y of t > 1 columns (a DataFrame's
    column names become the output names, else ``y0, y1, ...``) fits one SVGP per column with
    these parameters (the same seed, so each equals the single-output fit of its column), as
    ``GPRegressor`` does: ``posterior_`` is then ``gx.IndependentOutputs`` (zero covariance
    across outputs, by the model), ``predict`` returns (n_points, t) arrays, ``kernel_``,
    ``constant_features_``, ``gpytorch_model_`` and ``gpytorch_likelihood_`` are lists over
    the outputs, ``noise_``, ``mean_``, ``inducing_points_`` and ``elbo_history_`` arrays with
    the output first, ``estimators_`` holds the t single-output fits and ``output_names_``
    their names.

    Attributes
    ----------
    posterior_ : VariationalPosterior (IndependentOutputs for a 2-D y)
        Whitened SVGP posterior in original units; what explanations consume.
    kernel_ : RBF
        Fitted kernel in original units; lengthscale ``np.inf`` for constant columns.
    noise_ : float
        Fitted noise variance (squared units of y).
    mean_ : float
        Fitted constant prior mean (units of y).
    inducing_points_ : ndarray (n_inducing, n_features)
        Fitted inducing locations in original units.
    elbo_history_ : ndarray (n_epochs,)
        Mean minibatch ELBO per data point (standardised targets) in each epoch; for
        ``optimizer=None`` one value, the full-data ELBO per data point.
    gpytorch_model_, gpytorch_likelihood_ : gpytorch modules
        The trained model and likelihood, in standardised units (eval mode, float64).
        Training state, not saved by ``save`` (None after ``gx.load``): ``posterior_`` holds
        everything predictions and explanations use.
    constant_features_ : list of str
    feature_names_in_ : list of str
    n_features_in_ : int

    Raises
    ------
    ValueError, TypeError
        From ``fit``: bad inputs (named), fewer than 2 rows, all columns constant,
        ``n_inducing`` above the number of rows, bad ``batch_size``/``n_epochs``/
        ``learning_rate``/``noise``, unknown kernel, optimizer or initialisation.
    FitError
        From ``fit``: training diverged to non-finite values.
    """

    def __init__(
        self,
        n_inducing: int = 128,
        kernel="ard",
        batch_size: int = 256,
        n_epochs: int = 50,
        learning_rate: float = 0.01,
        noise: float | None = None,
        inducing_init: str = "kmeans",
        optimizer: str | None = "adam",
        random_state: int = 0,
        multi_output: str = "independent",
    ):
        self._store_parameters(locals())

    _not_saved = ("gpytorch_model_", "gpytorch_likelihood_")  # see persistence.py
    _parameter_constraints = {
        "n_inducing": Integer(1),
        "batch_size": Integer(1),
        "n_epochs": Integer(1),
        "learning_rate": PositiveNumber(),
        "noise": Variance(),
        "inducing_init": Options(INDUCING_INITS),
        "optimizer": Options(OPTIMIZERS),
        "random_state": Seed(),
        "multi_output": Options(("independent",)),
    }
    _output_lists = ("kernel_", "constant_features_", "gpytorch_model_", "gpytorch_likelihood_")
    _output_arrays = ("noise_", "mean_", "inducing_points_", "elbo_history_")

    # -- fitting ------------------------------------------------------------------------
    def _check_params(self, n_rows: int) -> bool:
        """Validate constructor arguments against the data; return whether the kernel is ARD."""
        if isinstance(self.kernel, RBF):
            ard = self.kernel.ard or self.optimizer is None
        elif self.kernel in KERNELS:
            ard = self.kernel == "ard"
        else:
            raise ValueError(
                f"unknown kernel {self.kernel!r}; use one of {KERNELS} or a gx.kernels.RBF."
            )
        if self.optimizer is None and not (isinstance(self.kernel, RBF) and self.noise is not None):
            raise ValueError(
                "optimizer=None needs kernel=gx.kernels.RBF(...) and noise=... with their values."
            )
        if self.n_inducing > n_rows:
            raise ValueError(
                f"n_inducing={self.n_inducing} exceeds the {n_rows} training rows; use at most "
                f"{n_rows} (or GPRegressor, which is exact, for so few rows)."
            )
        return ard

    def _fit(self, X, y, names, callback) -> None:
        """Train the SVGP and build its posterior (data and parameters validated)."""
        ard = self._check_params(X.shape[0])
        constant = constant_columns(X, names)
        scaling = FeatureScaling(X, np.flatnonzero(~constant))
        y_mean, y_scale = target_scaling(y)
        Xs, ys = scaling.features(X), (y - y_mean) / y_scale
        rng = np.random.default_rng(self.random_state)
        Z = initial_inducing_points(Xs, self.n_inducing, self.inducing_init, rng)

        X_t, y_t = as_tensor(Xs), as_tensor(ys)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.random_state)
            model, likelihood = self._build(Z, ard, scaling, y_scale)
            with (
                gpytorch.settings.max_cholesky_size(10**9),
                warnings.catch_warnings(),
            ):
                # Jitter added far from the optimum is expected, not news.
                warnings.simplefilter("ignore", category=NumericalWarning)
                try:
                    if self.optimizer is None:
                        history = [_set_optimal_variational(model, likelihood, X_t, y_t)]
                    else:
                        history = self._train(model, likelihood, X_t, y_t, callback)
                except NotPSDError as error:  # linear_operator's text names none of ours
                    raise FitError(
                        "SVGP training met a covariance matrix that is not positive definite "
                        "even with jitter (inducing points nearly coinciding, or a lengthscale "
                        "or noise collapsing); use fewer n_inducing, a lower learning_rate, or "
                        "rescale the data."
                    ) from error
        model.eval()
        likelihood.eval()

        strategy = model.variational_strategy
        q = strategy.variational_distribution
        values = {
            "lengthscale": to_numpy(model.covar_module.base_kernel.lengthscale).ravel(),
            "outputscale": float(model.covar_module.outputscale.detach()),
            "noise": float(likelihood.noise.detach().reshape(-1)[0]),
            "constant mean": float(model.mean_module.constant.detach()),
            "inducing points": to_numpy(strategy.inducing_points),
            "variational mean": to_numpy(q.mean),
            "variational covariance": to_numpy(q.covariance_matrix),
        }
        bad = [name for name, value in values.items() if not np.all(np.isfinite(value))]
        if values["outputscale"] <= 0:  # softplus underflow after a runaway step
            bad.append("outputscale (zero)")
        if bad or not np.all(np.isfinite(history)):
            raise FitError(
                "SVGP training diverged to degenerate "
                + (", ".join(bad) if bad else "ELBO values")
                + "; lower learning_rate, or rescale the data."
            )

        self.kernel_ = RBF(
            scaling.original_lengthscales(values["lengthscale"]),
            values["outputscale"] * y_scale**2,
        )
        self.noise_ = values["noise"] * y_scale**2
        self.mean_ = y_mean + y_scale * values["constant mean"]
        self.inducing_points_ = scaling.unstandardise(values["inducing points"])
        self.elbo_history_ = np.asarray(history, dtype=np.float64)
        self.constant_features_ = [names[i] for i in np.flatnonzero(constant)]
        self.gpytorch_model_, self.gpytorch_likelihood_ = model, likelihood
        self.posterior_ = VariationalPosterior(
            self.inducing_points_,
            values["variational mean"],
            values["variational covariance"],
            self.kernel_,
            self.mean_,
            whitened=True,
            jitter=strategy.jitter_val * y_scale**2,
            data_inputs=X,
            feature_names=names,
        )

    def _build(self, Z: np.ndarray, ard: bool, scaling: FeatureScaling, y_scale: float):
        """The GPyTorch SVGP and likelihood, float64, at their initial values."""
        likelihood = gaussian_likelihood()
        ard_dims = Z.shape[1] if ard else 1
        covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(
                ard_num_dims=ard_dims if ard_dims > 1 else None,
                lengthscale_constraint=gpytorch.constraints.GreaterThan(LENGTHSCALE_LOWER_BOUND),
            )
        )
        model = SVGPModel(as_tensor(Z), covar_module)
        model = model.double()
        lengthscale, outputscale = np.ones(Z.shape[1] if ard else 1), 1.0
        if isinstance(self.kernel, RBF):
            lengthscale = scaling.standardised_lengthscales(self.kernel, ard)
            outputscale = self.kernel.variance / y_scale**2
        noise = DEFAULT_NOISE if self.noise is None else self.noise / y_scale**2
        model.covar_module.base_kernel.lengthscale = as_tensor(lengthscale, like=model)
        model.covar_module.outputscale = torch.tensor(float(outputscale))
        likelihood.noise = torch.tensor(max(float(noise), 2 * NOISE_LOWER_BOUND))
        return model, likelihood

    def _train(self, model, likelihood, X_t, y_t, callback) -> list[float]:
        """Adam on the minibatch ELBO; returns the mean ELBO per epoch."""
        model.train()
        likelihood.train()
        objective = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=X_t.shape[0])
        optimizer = torch.optim.Adam(
            [*model.parameters(), *likelihood.parameters()], lr=self.learning_rate
        )
        generator = torch.Generator().manual_seed(self.random_state)
        loader = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(X_t, y_t),
            batch_size=int(self.batch_size),
            shuffle=True,
            generator=generator,
        )
        total = int(self.n_epochs) * len(loader)
        history = []
        step = 0
        for _ in range(int(self.n_epochs)):
            epoch_elbo = []
            for X_batch, y_batch in loader:
                optimizer.zero_grad()
                elbo = objective(model(X_batch), y_batch)
                if not torch.isfinite(elbo):
                    raise FitError(
                        f"SVGP training diverged (non-finite ELBO at step {step + 1}); "
                        "lower learning_rate, or rescale the data."
                    )
                (-elbo).backward()
                optimizer.step()
                epoch_elbo.append(float(elbo.detach()))
                step += 1
                if callback is not None:
                    callback(step, total)
            history.append(float(np.mean(epoch_elbo)))
        return history


def _set_optimal_variational(model, likelihood, X_t, y_t) -> float:
    """Set the whitened q(v) to the ELBO's closed-form optimum (Titsias 2009); return the ELBO.

    With ``A = Lz^{-1} Kzx`` and noise variance s2: ``S_v = (I + A A^T / s2)^{-1}`` and
    ``m_v = S_v A (y - m0) / s2``, computed through the Cholesky factor of ``I + A A^T / s2``.
    """
    strategy = model.variational_strategy
    with torch.no_grad():
        Z = strategy.inducing_points
        Kzz = to_numpy(model.covar_module(Z).to_dense())
        Kzx = to_numpy(model.covar_module(Z, X_t).to_dense())
        noise = float(likelihood.noise)
        residual = to_numpy(y_t) - float(model.mean_module.constant)
        Kzz[np.diag_indices_from(Kzz)] += strategy.jitter_val
        Lz, _ = cholesky_with_jitter(Kzz)
        A = solve_triangular(Lz, Kzx, lower=True)
        inner = A @ A.T / noise
        inner[np.diag_indices_from(inner)] += 1.0
        L_inner = np.linalg.cholesky(inner)
        m_v = cho_solve((L_inner, True), A @ residual) / noise
        # S_v = L_inner^{-T} L_inner^{-1}: its Cholesky factor is the lower factor of that.
        inverse_root = solve_triangular(L_inner, np.eye(len(m_v)), lower=True, trans="T")
        S_v = inverse_root @ inverse_root.T
        distribution = strategy._variational_distribution
        distribution.variational_mean.copy_(as_tensor(m_v, like=model))
        distribution.chol_variational_covar.copy_(as_tensor(np.linalg.cholesky(S_v), like=model))
        strategy.variational_params_initialized.fill_(1)
        model.train()
        likelihood.train()
        objective = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=X_t.shape[0])
        return float(objective(model(X_t), y_t))
