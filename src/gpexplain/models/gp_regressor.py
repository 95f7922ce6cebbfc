"""``GPRegressor``: exact GP regression, fitted by maximum marginal likelihood, explained exactly.

The estimator standardises X and y, fits the hyperparameters of a constant-mean GP with a
kernel (squared exponential, ARD or isotropic; ARD Matern 5/2 or 3/2; ARD rational quadratic;
each with an output scale; or any GPyTorch kernel) and Gaussian noise by maximising the log
marginal likelihood with L-BFGS from a few seeded starting points (squared exponential: scipy's
L-BFGS-B on the analytic gradient, ``_se_likelihood``; other kernels: GPyTorch autograd), and
exposes the result as
an ``ExactPosterior`` in the *original* units of X and y. The conversion is exact: a kernel
``k_s`` fitted on standardised data is ``y_std^2 k_s((x - mean)/std, (x' - mean)/std)`` in
original units, which for the named (stationary, ARD) kernels is the same kernel with
lengthscales multiplied by the column standard deviations and output scale by ``y_std^2``,
and for a user-supplied GPyTorch kernel is that kernel wrapped in the input scaling
(``gpexplain.kernels.gpytorch_adapter.input_scaled``).
"""

from __future__ import annotations

import copy
import warnings

import gpytorch
import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin

from gpexplain._threads import native_threads
from gpexplain._validation import as_target
from gpexplain.kernels import as_kernel
from gpexplain.models._base import PosteriorEstimator
from gpexplain.models._fitting import (
    DEFAULT_NOISE,
    LENGTHSCALE_LOWER_BOUND,
    NOISE_LOWER_BOUND,
    best_of_starts,
    log_uniform,
    maximise_exact_marginal_likelihood,
)
from gpexplain.models._icm import fit_icm
from gpexplain.models._kernel_choices import kernel_choice
from gpexplain.models._lmc import fit_lmc
from gpexplain.models._params import MULTISTART_CONSTRAINTS, Device, Integer, Options
from gpexplain.models._se_likelihood import maximise_se_marginal_likelihood
from gpexplain.models._size import check_exact_size
from gpexplain.models._standardisation import (
    FeatureScaling,
    choice_scaling,
    target_scaling,
)
from gpexplain.models._targets import IndependentOutputsFit
from gpexplain.posterior import ExactPosterior
from gpexplain.posterior.device import check_device

__all__ = ["GPRegressor"]

_FAILURE_HINT = "try optimizer=None with a given kernel and noise, or rescale the data."



class GPRegressor(IndependentOutputsFit, PosteriorEstimator, RegressorMixin, BaseEstimator):
    """Exact Gaussian-process regression (squared-exponential, Matern, RQ or any GPyTorch kernel).

    Model: ``y = f(x) + eps``, ``f ~ GP(m0, k)``, ``eps ~ N(0, noise)``; by default
    ``k(x, x') = variance * exp(-0.5 * sum_i (x_i - x'_i)^2 / lengthscale_i^2)``.
    Hyperparameters maximise the log marginal likelihood in float64: for the squared
    exponential by scipy's L-BFGS-B on the closed-form gradient (one Cholesky per evaluation;
    Rasmussen and Williams 2006, eq. 5.9), for other kernels by torch's L-BFGS (strong Wolfe
    line search) through a GPyTorch exact GP with Cholesky forced at every size.

    Parameters
    ----------
    kernel : {"ard", "isotropic", "matern52", "matern32", "rq"}, gx.kernels.RBF or
        gpytorch.kernels.Kernel, default "ard"
        ``"ard"``: squared exponential with one lengthscale per feature; ``"isotropic"``: one
        lengthscale for the standardised features (hence per-feature lengthscales
        proportional to the column standard deviations in original units).
        ``"matern52"``, ``"matern32"``: ARD Matern kernels (nu = 5/2, 3/2); ``"rq"``: ARD
        rational quadratic ``(1 + r^2 / (2 alpha))^-alpha`` with its shape alpha fitted; each
        times an output scale, fitted like the squared exponential (same standardisation,
        restarts and bounds). An ``RBF`` instance (original units) is the first starting
        point, or the final kernel when ``optimizer=None``; a vector lengthscale means ARD.
        A GPyTorch kernel (e.g. sums and products of GPyTorch kernels) is copied (the
        argument is not modified) and trained as the covariance module on the standardised
        data, its given hyperparameters being the first start (in standardised units); its
        random restarts draw every ``lengthscale``, ``outputscale`` and RQ ``alpha`` it
        contains log-uniformly in [0.1, 10]. With ``optimizer=None`` it is used as given, in
        original units. A GPyTorch ``RBFKernel`` / ``ScaleKernel(RBFKernel)`` ends up as
        ``gx.kernels.RBF`` (closed-form explanations).
    noise : float, optional
        Noise variance in squared units of y: first starting point (or the final value when
        ``optimizer=None``). Default: 0.1 times the variance of y.
    n_restarts : int, default 3
        Additional seeded random starting points after the first.
    optimizer : {"lbfgs", None}, default "lbfgs"
        None keeps the given hyperparameters (``kernel`` must then be an ``RBF`` instance or
        a GPyTorch kernel).
    max_iter : int, default 200
        L-BFGS iterations per start.
    random_state : int, default 0
        Seed of the random starting points (and of the ``restart_rows`` subsample).
    multi_output : {"independent", "icm", "lmc"}, default "independent"
        For a 2-D y only: independent GPs per column, one ICM of all columns, or one LMC
        (a sum of ``n_components`` ICM terms, each with its own lengthscales; below).
    rank : int, optional
        ``multi_output="icm"`` or ``"lmc"`` only: the rank r of ``W`` (t x r) in ``B = W W^T +
        diag(v)`` (of each term's W_q for the LMC), 1 to t (default t, full rank). A low rank
        says the outputs share r latent functions plus their own independent parts.
    n_components : int, optional
        ``multi_output="lmc"`` only: Q >= 1, the number of terms ``B^q k_q`` (default 2;
        1 is the ICM). Refused with another ``multi_output``.
    restart_rows : int, optional
        Squared-exponential kernels with restarts only: run every start on a seeded subsample
        of this many (distinct) rows, then refine the best one on all rows, one start. The
        optimum is a local maximum of the full likelihood found with ``1 + n_restarts``
        explorations at a fraction of their cost (each evaluation is O(n^3)); the command
        line uses 500. None (default) runs every start on all rows.
    hyperparameter_rows : int, optional
        Fit the hyperparameters (every start, and ``restart_rows`` within them) on a seeded
        subsample of this many distinct rows, then condition the posterior exactly on all
        rows with one Cholesky factorisation ("subset of data" hyperparameters, Rasmussen and
        Williams 2006, Sec. 8.3.1). The fit costs O(m^3) per evaluation instead of O(n^3) and
        the conditioning O(n^3 / 3) once, in memory for about three n x n matrices: 20,000
        rows fit on a 24 GB machine. The posterior, its predictions and explanations are exact
        given those hyperparameters. None (default) fits them on all rows; the command line
        uses 3,000 above 3,000 rows.
    device : str or torch.device, optional
        Where the posterior conditions on all rows and the explanations' triangular solves
        run (``gx.ExactPosterior(device=...)``, float64 torch, e.g. "cuda"): the GPU path for
        tens of thousands of rows, with ``hyperparameter_rows`` so that the fit itself stays
        small. The hyperparameters are fitted on the CPU. None (default): NumPy on the CPU.
        Not with ``multi_output="icm"``.

    Several outputs (issue 24): ``fit(X, Y)`` with a 2-D Y of t > 1 columns (a DataFrame's
    column names become the output names, else ``y0, y1, ...``) fits one GP per column with
    these parameters, independently (its own hyperparameters, noise and mean): ``posterior_``
    is then ``gx.IndependentOutputs`` (zero covariance across outputs, by the model),
    ``predict`` returns (n_points, t) arrays, the fitted attributes below are arrays or lists
    over the outputs, ``estimators_`` holds the t single-output fits and ``output_names_``
    their names. ``multi_output="icm"`` instead fits one intrinsic coregionalisation model of
    all columns (``k((x, i), (x', j)) = B_ij k(x, x')``, ARD squared exponential,
    ``B = W W^T + diag(v)`` with W of ``rank`` columns, noise per output; Bonilla, Chai and
    Williams 2008; one L-BFGS start, ``models._icm``): ``posterior_`` is a
    ``gx.CoregionalizedPosterior`` and ``coregionalization_`` the fitted B in the units of y.
    ``multi_output="lmc"`` fits a linear model of coregionalisation, ``k((x, i), (x', j)) =
    sum_q B^q_ij k_q(x, x')`` with Q = ``n_components`` ARD squared-exponential k_q of their
    own lengthscales and ``B^q = W_q W_q^T + diag(v_q)`` (Journel and Huijbregts 1978;
    Alvarez, Rosasco and Lawrence 2012, Sec. 4.2; ``models._lmc``: the ICM first, then all
    terms from it): ``posterior_`` is a ``gx.LMCPosterior``, ``coregionalization_`` the
    (Q, t, t) fitted B^q in the units of y, ``kernel_`` the list of the Q kernels and
    ``icm_log_marginal_likelihood_`` the LML of its first stage (the ICM), near which the
    LMC's fit starts (term 1 at the ICM's optimum, the new terms small: usually, not
    provably, a lower bound of ``log_marginal_likelihood_value_``).

    Attributes
    ----------
    posterior_ : ExactPosterior (IndependentOutputs for a 2-D y)
        Posterior in original units; what explanations consume.
    kernel_ : RBF or gx.kernels.GPyTorchKernel
        Fitted kernel in original units. ``RBF`` for the squared exponential (lengthscale
        ``np.inf`` for constant columns); otherwise a GPyTorch kernel in ``.module``: for
        ``"matern52"``/``"matern32"``/``"rq"`` a ``ScaleKernel`` of the ARD kernel over the
        non-constant columns (``active_dims``) with lengthscales in the units of X, for a
        user-supplied kernel ``input_scaled(fitted, mean, std, var_y)``, i.e.
        ``var_y * k_fitted((x - mean)/std, (x' - mean)/std)`` (std 1 for constant columns).
    noise_ : float
        Fitted noise variance (squared units of y).
    mean_ : float
        Fitted constant prior mean (units of y).
    log_marginal_likelihood_value_ : float
        Optimum on the standardised targets (scikit-learn's ``normalize_y=True`` convention),
        over the distinct rows (exact duplicate rows are fitted once, with a warning); with
        ``hyperparameter_rows``, over that subsample.
    hyperparameter_rows_ : int
        How many rows the hyperparameters were fitted on (the distinct rows, or the
        ``hyperparameter_rows`` subsample of them); the posterior conditions on all rows.
    restarts_ : list of dict
        Log marginal likelihood reached from each starting point (with ``restart_rows``: on
        the subsample, each entry with ``rows``, and a last entry ``start="refined"`` on all
        rows), and ``stopped_early``:
        whether the optimiser raised (e.g. a kernel matrix not positive definite in a line
        search, typical of nearly noise-free data) and the start kept the best point it had
        evaluated.
    constant_features_ : list of str
        Columns that were constant in the training data; the kernel ignores them, so their
        attributions are exactly zero.
    feature_names_in_ : list of str
    n_features_in_ : int

    Raises
    ------
    ValueError, TypeError
        From ``fit``: bad inputs (named column/row), fewer than 2 rows, all columns constant,
        unknown kernel or optimizer; more rows than memory holds (the fit's n x n matrices are
        estimated before it starts, and the message offers ``SparseGPRegressor`` and
        ``RandomFeatureGPRegressor``).
    FitError
        From ``fit``: the optimiser failed from every starting point.

    Warns
    -----
    UserWarning
        From ``fit``: the estimated fitting time (O(n^3)) exceeds 10 minutes.
    """

    _parameter_constraints = {
        **MULTISTART_CONSTRAINTS,
        "restart_rows": Integer(2, allow_none=True),
        "hyperparameter_rows": Integer(2, allow_none=True),
        "multi_output": Options(("independent", "icm", "lmc")),
        "rank": Integer(1, allow_none=True),
        "n_components": Integer(1, allow_none=True),
        "device": Device(),
    }

    def __init__(
        self,
        kernel="ard",
        noise: float | None = None,
        n_restarts: int = 3,
        optimizer: str | None = "lbfgs",
        max_iter: int = 200,
        random_state: int = 0,
        restart_rows: int | None = None,
        hyperparameter_rows: int | None = None,
        multi_output: str = "independent",
        rank: int | None = None,
        device=None,
        n_components: int | None = None,
    ):
        self._store_parameters(locals())

    _output_lists = ("kernel_", "restarts_", "constant_features_")
    _output_arrays = ("noise_", "mean_", "log_marginal_likelihood_value_")

    # -- fitting ------------------------------------------------------------------------
    def _fit_joint(self, X, columns):
        """``multi_output="icm"`` or ``"lmc"``: one coregionalised GP of all columns
        (``models._icm``, ``models._lmc``)."""
        form = self.multi_output
        if self.device is not None:
            raise ValueError(f"device={self.device!r} is not available with multi_output="
                             f"{form!r} yet (its posterior is NumPy on the CPU); leave device "
                             "unset or use multi_output='independent'.")
        if not (isinstance(self.kernel, str) and self.kernel == "ard") or self.optimizer is None:
            raise ValueError(
                f"multi_output={form!r} fits an ARD squared-exponential {form.upper()}: use "
                f"kernel='ard' and optimizer='lbfgs' (got kernel={self.kernel!r}, "
                f"optimizer={self.optimizer!r})."
            )
        first = next(iter(columns.values()))
        X, _, names = self._validate_data(X, first)
        Y = np.column_stack([as_target(column, len(X), f"y column {name!r}")
                             for name, column in columns.items()])
        rank = len(columns) if self.rank is None else self.rank
        if rank > len(columns):
            raise ValueError(f"rank must be at most the number of outputs, {len(columns)}; got "
                             f"{rank}.")
        # One start on the task-augmented set: its (n t) x (n t) matrices are what costs.
        check_exact_size(Y.size, 1)
        with native_threads(len(X) * len(columns)):
            if form == "lmc":
                n_components = 2 if self.n_components is None else self.n_components
                posterior, lml, icm_lml = fit_lmc(X, Y, names, list(columns), self.max_iter,
                                                  n_components, rank, self.random_state)
                self.icm_log_marginal_likelihood_ = icm_lml
                self.kernel_ = list(posterior.kernels)
                self.coregionalization_ = posterior.coregionalizations
            else:
                posterior, lml = fit_icm(X, Y, names, list(columns), self.max_iter, rank)
                self.kernel_ = posterior.kernel
                self.coregionalization_ = posterior.coregionalization
        self.output_names_ = list(columns)
        self.posterior_ = posterior
        self.noise_ = np.array([posterior.noise[posterior.train_tasks == i][0]
                                for i in range(len(columns))])
        self.mean_ = posterior.mean.copy()
        self.log_marginal_likelihood_value_ = lml
        return self

    def _validate_params(self) -> None:
        """The declared constraints, then ``n_components`` only with ``multi_output="lmc"``.

        Raises
        ------
        ValueError
            ``n_components`` given with another ``multi_output`` (named).
        """
        super()._validate_params()
        if self.n_components is not None and self.multi_output != "lmc":
            raise ValueError(f"n_components applies to multi_output='lmc' (the number of its "
                             f"terms), not to multi_output={self.multi_output!r}; leave it "
                             "None.")

    def _check_params(self):
        """Validate constructor arguments; return the kernel choice and whether it is ARD."""
        choice = kernel_choice(self.kernel)
        if self.optimizer is None and not choice.has_values:
            raise ValueError(
                "optimizer=None needs kernel=gx.kernels.RBF(...) or a GPyTorch kernel with its "
                "values."
            )
        if self.restart_rows is not None and not choice.analytic_gradient:
            raise ValueError(
                "restart_rows applies to the squared-exponential kernels ('ard', 'isotropic' or "
                f"a gx.kernels.RBF), not to kernel={self.kernel!r}; leave it None."
            )
        return choice, choice.is_ard(self.optimizer)

    def _n_full_starts(self) -> int:
        """How many starts are optimised on every row (the cost ``check_exact_size`` weighs)."""
        if self.optimizer is None or self.restart_rows is not None:
            return 1
        return 1 + self.n_restarts

    def _starting_points(self, choice, ard: bool, scaling: FeatureScaling, y_scale) -> list:
        """Hyperparameters (standardised units) of the first and the random starts."""
        lengthscale, outputscale = choice.first_start(scaling, ard, y_scale)
        if self.optimizer is not None and np.any(lengthscale < LENGTHSCALE_LOWER_BOUND):
            # GPyTorch would refuse it with a RuntimeError about its noise constraint.
            bound = scaling.original_lengthscales(
                np.full(lengthscale.shape, LENGTHSCALE_LOWER_BOUND)
            )[scaling.active]
            raise ValueError(
                f"kernel lengthscale {self.kernel.lengthscale.tolist()} is below the optimiser's "
                f"lower bound, {LENGTHSCALE_LOWER_BOUND:g} standard deviations of each column "
                f"({np.round(bound, 12).tolist()} in the units of X); start from a larger "
                "lengthscale, or keep it with optimizer=None."
            )
        noise = DEFAULT_NOISE if self.noise is None else self.noise / y_scale**2
        starts = [(lengthscale, outputscale, max(noise, 2 * NOISE_LOWER_BOUND))]
        rng = np.random.default_rng(self.random_state)
        for _ in range(self.n_restarts if self.optimizer else 0):
            starts.append(
                (
                    log_uniform(rng, 0.1, 10.0, size=lengthscale.shape),
                    float(log_uniform(rng, 0.1, 10.0)),
                    float(log_uniform(rng, 1e-3, 1.0)),
                )
            )
        return starts

    def _explore_on_subsample(self, Xs, ys, starts, callback):
        """Every start on ``restart_rows`` seeded rows; returns ([best point], their records)."""
        rows = np.sort(np.random.default_rng([self.random_state, 2]).choice(
            len(ys), self.restart_rows, replace=False))
        Xsub, ysub = Xs[rows], ys[rows]

        def optimise(index, start):
            return maximise_se_marginal_likelihood(
                Xsub, ysub, start, self.max_iter, callback, index, len(starts)
            )

        def log_marginal_likelihood(hyper):
            kernel, noise, mean = hyper
            return ExactPosterior(Xsub, ysub, kernel, noise, mean=mean).log_marginal_likelihood()

        _, (kernel, noise, _), explored = best_of_starts(
            starts, optimise, log_marginal_likelihood, _FAILURE_HINT
        )
        lengthscale = np.broadcast_to(kernel.lengthscale, starts[0][0].shape).copy()
        return [(lengthscale, kernel.variance, noise)], [
            {**record, "rows": len(rows)} for record in explored
        ]

    def _fit(self, X, y, names, callback) -> None:
        """Fit the hyperparameters and build the posterior (data and parameters validated)."""
        choice, ard = self._check_params()
        device = None if self.device is None else check_device(self.device)
        check_exact_size(len(y), self._n_full_starts(), self.hyperparameter_rows, device)
        constant, scaling = choice_scaling(X, names, choice.sees_constant_columns)
        x_mean, x_scale = scaling.x_mean, scaling.x_scale
        y_mean, y_scale = target_scaling(y)
        Xs = scaling.features(X)
        ys = (y - y_mean) / y_scale
        # Rows repeated exactly (features and target) let the marginal likelihood grow
        # without bound as lengthscales and noise shrink (each copy is then predicted
        # perfectly), so the hyperparameters are fitted on the distinct rows only.
        _, distinct = np.unique(np.column_stack([Xs, ys]), axis=0, return_index=True)
        if distinct.size < len(ys):
            warnings.warn(
                f"{len(ys) - distinct.size} row(s) repeat another row exactly (features and "
                f"target); hyperparameters are fitted on the {distinct.size} distinct rows, "
                "the posterior uses all rows.",
                UserWarning,
                stacklevel=2,
            )
            distinct = np.sort(distinct)
            Xs, ys = Xs[distinct], ys[distinct]
        if self.hyperparameter_rows is not None and len(ys) > self.hyperparameter_rows:
            rows = np.sort(np.random.default_rng([self.random_state, 3]).choice(
                len(ys), self.hyperparameter_rows, replace=False))
            Xs, ys = Xs[rows], ys[rows]
        self.hyperparameter_rows_ = len(ys)

        starts = self._starting_points(choice, ard, scaling, y_scale)
        rng = np.random.default_rng([self.random_state, 1])  # shapes of restarts, not starts
        explored = []
        if (self.restart_rows is not None and self.optimizer is not None and len(starts) > 1
                and choice.analytic_gradient and len(ys) > self.restart_rows):
            starts, explored = self._explore_on_subsample(Xs, ys, starts, callback)

        def optimise(index, start):
            if self.optimizer is None:
                given = choice.given_module(start, x_mean, x_scale, y_scale)
                return (given, start[2], 0.0), False
            if choice.analytic_gradient:
                return maximise_se_marginal_likelihood(
                    Xs, ys, start, self.max_iter, callback, index, len(starts)
                )
            module = choice.module(start, index, rng)
            return _optimise(Xs, ys, module, start[2], self.max_iter, callback, index, len(starts))

        def log_marginal_likelihood(hyper):
            module, noise, constant_mean = hyper
            standard = ExactPosterior(
                Xs, ys, as_kernel(copy.deepcopy(module)), noise, mean=constant_mean
            )
            return standard.log_marginal_likelihood()

        best_lml, (module, noise, constant_mean), restarts = best_of_starts(
            starts, optimise, log_marginal_likelihood, _FAILURE_HINT
        )
        if explored:
            restarts = explored + [{**restarts[0], "start": "refined", "rows": len(ys)}]
        self.restarts_ = restarts

        self.kernel_ = choice.original_units(
            module, X.shape[1], scaling.active, x_mean, x_scale, y_scale, self.optimizer
        )
        self.noise_ = float(noise * y_scale**2)
        self.mean_ = float(y_mean + y_scale * constant_mean)
        self.log_marginal_likelihood_value_ = float(best_lml)
        self.constant_features_ = [names[i] for i in np.flatnonzero(constant)]
        self.posterior_ = ExactPosterior(
            X, y, self.kernel_, self.noise_, mean=self.mean_, feature_names=names,
            device=device,
        )


def _optimise(Xs, ys, covar_module, noise, max_iter, callback, start_index, n_starts):
    """Maximise the exact log marginal likelihood from one starting point with GPyTorch.

    ``covar_module`` (standardised units) is set to the start and trained in place, with a
    constant prior mean.

    Returns ((covar_module, noise, constant mean), stopped_early) in standardised units, or
    None when the optimiser failed before any evaluation or produced non-finite values.
    ``stopped_early``: the optimiser raised (e.g. a matrix not positive definite in a line
    search) and the best point it had evaluated is returned; nearly noise-free data drive a
    smooth kernel towards a singular K, and that point is still a good fit.
    """
    fitted = maximise_exact_marginal_likelihood(
        Xs, ys, gpytorch.means.ConstantMean(), covar_module, noise, max_iter, callback,
        start_index, n_starts,
    )
    if fitted is None:
        return None
    model, likelihood, stopped_early = fitted
    if callback is not None:
        callback((start_index + 1) * max_iter, n_starts * max_iter)
    noise = float(likelihood.noise.detach().reshape(-1)[0])
    constant_mean = float(model.mean_module.constant.detach())
    parameters = [parameter.detach() for parameter in model.covar_module.parameters()]
    if not (
        np.isfinite(noise)
        and np.isfinite(constant_mean)
        and all(bool(torch.all(torch.isfinite(value))) for value in parameters)
    ):
        return None
    return (model.covar_module.eval(), noise, constant_mean), stopped_early
