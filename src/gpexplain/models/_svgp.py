"""The sparse variational GP pieces the SVGP estimators share: the GPyTorch model and the
initial inducing points (Hensman et al. 2013; Seitz 2022, Sec. 2.2 and App. B)."""

from __future__ import annotations

import gpytorch
import numpy as np

__all__ = ["INDUCING_INITS", "SVGPModel", "initial_inducing_points"]

INDUCING_INITS = ("kmeans", "random")


def initial_inducing_points(Xs: np.ndarray, n_inducing: int, init: str, rng) -> np.ndarray:
    """Initial Z in standardised units, (n_inducing, n_active).

    ``init="kmeans"``: k-means centres of the rows (scikit-learn ``KMeans``, one seeded
    initialisation); ``"random"``: a seeded random subset of the distinct rows.
    """
    distinct = np.unique(Xs, axis=0)
    if init == "kmeans":
        # sklearn.cluster costs 0.25 s of CPU to import: loaded when k-means is asked for.
        from sklearn.cluster import KMeans

        n_clusters = min(n_inducing, distinct.shape[0])
        seed = int(rng.integers(2**31 - 1))
        centres = KMeans(n_clusters, n_init=1, random_state=seed).fit(Xs).cluster_centers_
    else:
        size = min(n_inducing, distinct.shape[0])
        centres = distinct[rng.choice(distinct.shape[0], size=size, replace=False)]
    if centres.shape[0] < n_inducing:
        # Fewer distinct rows than inducing points: the rest are distinct rows nudged
        # apart so that Kzz stays positive definite.
        extra = distinct[rng.choice(distinct.shape[0], n_inducing - centres.shape[0])]
        centres = np.vstack([centres, extra + 1e-3 * rng.normal(size=extra.shape)])
    return centres


class SVGPModel(gpytorch.models.ApproximateGP):
    """Whitened SVGP: constant mean, the given covariance module, learned inducing locations."""

    def __init__(self, inducing_points, covar_module):
        distribution = gpytorch.variational.CholeskyVariationalDistribution(
            inducing_points.shape[0]
        )
        strategy = gpytorch.variational.VariationalStrategy(
            self, inducing_points, distribution, learn_inducing_locations=True
        )
        super().__init__(strategy)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = covar_module

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(
            self.mean_module(x), self.covar_module(x)
        )
