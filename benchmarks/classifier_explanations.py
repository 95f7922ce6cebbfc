"""Probability-level explanations of GP classifiers: exact expectations against the shortcuts.

For two binary problems, scikit-learn's ``GaussianProcessClassifier`` (Laplace) imported with
``gx.from_sklearn``,

* digits 0 vs 1 (``sklearn.datasets.load_digits``, 8x8 images, pixels / 16; baseline: the
  blank image), the paper's MNIST 0-vs-1 study on the bundled digits;
* breast cancer diagnosis (``$GPEXPLAIN_DATA_DIR/breast_cancer_wisconsin/wdbc.data``, M vs B,
  30 standardised features; baseline: the training mean),

this script explains 200 points and times, against the exact expected gradient
``E[d p / dx_k]`` and the exact integrated gradients of ``E[p]``:

(a) ours (``gx.gradients`` / ``gx.integrated_gradients`` with the logit link: Gauss-Hermite,
    Stein's lemma, adaptive Gauss-Legendre path); the gradient also with its covariance;
(b) the paper's second-order Taylor approximation (eq. 33 as corrected), ``approximation=
    "taylor"``;
(c) the plug-in ``sigma'(m) m_k`` (the gradient of sigma(m(x)));
(d) Monte Carlo over joint posterior samples of (f, grad f) at each point (1e3 and 1e5 draws;
    for IG at each of 32 Gauss-Legendre path nodes, 1e5 draws on the first 5 points only);
(e) captum's ``IntegratedGradients`` (Gauss-Legendre, 50 steps) on the plug-in probability
    ``sigma(m(x))`` written as a torch module;

and the paper's Riemann sum (eq. 22, G = 50 right-endpoint steps of the exact expected
gradient) completeness gap against ours. The reference for the expected gradient is a fixed
4096-node Gauss-Hermite rule on the same latent moments (the 1-D integrals are checked against
mpmath in tests/test_links.py); for IG, ours (complete to 1e-10). Errors are max absolute over
points and features, and relative to the largest reference attribution.

Run from the repository root (writes ``benchmarks/results/classifier_explanations.json``)::

    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/classifier_explanations.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse

import numpy as np
import torch
from _common import best_of as timed
from _common import data_path, machine_info, write_results
from captum.attr import IntegratedGradients
from scipy.special import expit
from sklearn.datasets import load_digits
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel

import gpexplain as gx
from gpexplain.explain.linked.moments import latent_gradient_moments
from gpexplain.functionals.gradient import Gradient

N_EXPLAINED = 200
MC_DRAWS = (1_000, 100_000)
MC_IG_POINTS = 5  # IG with 1e5 draws per path node: the first 5 points only
MC_IG_NODES = 32
RIEMANN_STEPS = 50
CAPTUM_STEPS = 50
REFERENCE_PANELS = 400  # x 8 Gauss-Legendre nodes


def load_problem(name: str, seed: int):
    rng = np.random.default_rng(seed)
    if name == "digits_0_vs_1":
        X, y = load_digits(n_class=2, return_X_y=True)
        X = X / 16.0
        order = rng.permutation(len(X))
        X, y = X[order], y[order]
        train, explain = slice(0, 160), slice(160, 160 + N_EXPLAINED)
        kernel = ConstantKernel(4.0) * RBF(3.0)
        baseline = np.zeros(X.shape[1])
    else:
        raw = np.genfromtxt(data_path("breast_cancer_wisconsin", "wdbc.data"), delimiter=",",
                            dtype=str)
        y = np.where(raw[:, 1] == "M", "M", "B")
        X = raw[:, 2:].astype(float)
        order = rng.permutation(len(X))
        X, y = X[order], y[order]
        train, explain = slice(0, len(X) - N_EXPLAINED), slice(len(X) - N_EXPLAINED, None)
        centre, scale = X[train].mean(0), X[train].std(0)
        X = (X - centre) / scale
        kernel = ConstantKernel(4.0) * RBF(np.full(X.shape[1], 3.0))
        baseline = X[train].mean(0)
    return X[train], y[train], X[explain], y[explain], kernel, baseline


def joint_moments(posterior, X, full):
    scheme = Gradient().bind(posterior.kernel, posterior.train_inputs)
    return latent_gradient_moments(posterior, scheme, X, full)


def reference_expected_gradient(posterior, X):
    """Composite Gauss-Legendre (REFERENCE_PANELS panels of 8 nodes), independent of our
    Gauss-Hermite and trapezoid rules: over z in [-12, 12] for f = m + s z when s <= 1
    (the Gaussian is the narrow factor), over f in [-45, 45] when s > 1 (sigma' is, and is
    below 3e-20 outside); panels at most 0.225 wide resolve both factors."""
    mean, var, grad_mean, grad_cov, _ = joint_moments(posterior, X, False)
    t, w = np.polynomial.legendre.leggauss(8)

    def composite(low, high):
        edges = np.linspace(low, high, REFERENCE_PANELS + 1)
        half = 0.5 * np.diff(edges)
        nodes = (0.5 * (edges[1:] + edges[:-1])[:, None] + half[:, None] * t[None]).ravel()
        return nodes, (half[:, None] * w[None]).ravel()

    s = np.sqrt(var)[:, None]
    z, z_weights = composite(-12.0, 12.0)
    u, u_weights = composite(-45.0, 45.0)
    narrow = s <= 1.0
    f = np.where(narrow, mean[:, None] + s * z[None], u[None])
    density = np.where(
        narrow, np.exp(-0.5 * z**2)[None] / np.sqrt(2 * np.pi) * z_weights[None],
        np.exp(-0.5 * ((u[None] - mean[:, None]) / s) ** 2) / (s * np.sqrt(2 * np.pi))
        * u_weights[None],
    )
    slope = expit(f) * expit(-f)
    first = (slope * density).sum(1)
    second = (slope * -np.tanh(f / 2) * density).sum(1)
    return first[:, None] * grad_mean + second[:, None] * grad_cov


def plug_in_gradient(posterior, X):
    mean, _, grad_mean, _, _ = joint_moments(posterior, X, False)
    return (expit(mean) * expit(-mean))[:, None] * grad_mean


def monte_carlo_gradient(posterior, X, draws, rng):
    mean, var, grad_mean, grad_cov, grad_grad_cov = joint_moments(posterior, X, True)
    out = np.empty_like(grad_mean)
    d = X.shape[1]
    for p in range(len(X)):
        joint = np.empty((d + 1, d + 1))
        joint[0, 0], joint[0, 1:], joint[1:, 0], joint[1:, 1:] = (
            var[p], grad_cov[p], grad_cov[p], grad_grad_cov[p])
        values, vectors = np.linalg.eigh(joint)
        factor = vectors * np.sqrt(np.clip(values, 0, None))
        samples = rng.standard_normal((draws, d + 1)) @ factor.T
        f = mean[p] + samples[:, 0]
        g = grad_mean[p] + samples[:, 1:]
        out[p] = ((expit(f) * expit(-f))[:, None] * g).mean(0)
    return out


def monte_carlo_ig(posterior, X, baseline, draws, rng):
    t, w = np.polynomial.legendre.leggauss(MC_IG_NODES)
    t, w = 0.5 * (t + 1), 0.5 * w
    out = np.empty_like(X)
    for p, x in enumerate(X):
        path = baseline + t[:, None] * (x - baseline)
        out[p] = (x - baseline) * (w @ monte_carlo_gradient(posterior, path, draws, rng))
    return out


def riemann_ig(posterior, X, baseline):
    """Seitz eq. 22: (x - xt) / G sum_{g=1}^{G} E[grad p](xt + g/G (x - xt))."""
    steps = np.arange(1, RIEMANN_STEPS + 1) / RIEMANN_STEPS
    path = baseline + steps[None, :, None] * (X - baseline)[:, None, :]
    flat = path.reshape(-1, X.shape[1])
    gradient = gx.gradients(posterior, flat, return_cov=False).mean
    return (X - baseline) * gradient.reshape(len(X), RIEMANN_STEPS, -1).mean(1)


def captum_plug_in_ig(posterior, X, baseline):
    kernel = posterior.kernel
    lengthscale = torch.as_tensor(np.broadcast_to(kernel.lengthscale, (X.shape[1],)).copy())
    Z = torch.as_tensor(posterior.train_inputs) / lengthscale
    alpha = torch.as_tensor(posterior.alpha)

    def probability(inputs):
        scaled = inputs / lengthscale
        squared = ((scaled[:, None, :] - Z[None]) ** 2).sum(-1)
        return torch.sigmoid(kernel.variance * torch.exp(-0.5 * squared) @ alpha)

    explainer = IntegratedGradients(probability)
    inputs = torch.as_tensor(X)
    attributions = explainer.attribute(
        inputs, baselines=torch.as_tensor(baseline)[None].expand_as(inputs),
        n_steps=CAPTUM_STEPS, method="gausslegendre", internal_batch_size=len(X) * 10,
    )
    return attributions.detach().numpy()


def errors(estimate, reference):
    gap = float(np.max(np.abs(estimate - reference)))
    return {"max_abs_error": gap,
            "relative_error": gap / float(np.max(np.abs(reference)))}


def run_problem(name, seed):
    rng = np.random.default_rng(seed)
    X_train, y_train, X, y, kernel, baseline = load_problem(name, seed)
    model, fit_seconds = timed(lambda: GaussianProcessClassifier(kernel, random_state=seed)
                               .fit(X_train, y_train))
    posterior = gx.from_sklearn(model)
    accuracy = float(np.mean(model.predict(X) == y))
    reference, reference_seconds = timed(lambda: reference_expected_gradient(posterior, X))
    latent_var = posterior.predict(X)[1]
    gradient = {}
    ours, seconds = timed(lambda: gx.gradients(posterior, X, return_cov=False), 3)
    gradient["ours_mean"] = {"seconds": seconds, **errors(ours.mean, reference)}
    ours_cov, seconds = timed(lambda: gx.gradients(posterior, X), 2)
    gradient["ours_mean_and_cov"] = {"seconds": seconds, **errors(ours_cov.mean, reference)}
    taylor, seconds = timed(lambda: gx.gradients(posterior, X, approximation="taylor"), 3)
    gradient["taylor_eq33"] = {"seconds": seconds, **errors(taylor.mean, reference)}
    plug, seconds = timed(lambda: plug_in_gradient(posterior, X), 3)
    gradient["plug_in"] = {"seconds": seconds, **errors(plug, reference)}
    for draws in MC_DRAWS:
        mc, seconds = timed(lambda draws=draws: monte_carlo_gradient(posterior, X, draws, rng))
        gradient[f"monte_carlo_{draws}"] = {"seconds": seconds, **errors(mc, reference)}

    ig = {}
    exact, seconds = timed(lambda: gx.integrated_gradients(posterior, X, baseline=baseline))
    ig["ours"] = {"seconds": seconds, "completeness_gap": exact.completeness_gap()["mean"],
                  "method": exact.method}
    taylor_ig, seconds = timed(lambda: gx.integrated_gradients(
        posterior, X, baseline=baseline, approximation="taylor"))
    ig["taylor_eq33"] = {"seconds": seconds, **errors(taylor_ig.mean, exact.mean)}
    captum_ig, seconds = timed(lambda: captum_plug_in_ig(posterior, X, baseline))
    ig["captum_plug_in"] = {"seconds": seconds, **errors(captum_ig, exact.mean),
                            "completeness_gap_to_expected_probability": float(np.max(np.abs(
                                captum_ig.sum(1) - (exact.prediction
                                                    - exact.baseline_prediction))))}
    small = MC_IG_POINTS
    for draws in MC_DRAWS:
        rows = slice(None) if draws <= 1_000 else slice(0, small)
        mc, seconds = timed(lambda draws=draws, rows=rows: monte_carlo_ig(
            posterior, X[rows], baseline, draws, rng))
        ig[f"monte_carlo_{draws}"] = {"seconds": seconds, "points": len(mc),
                                      "seconds_per_200_points": seconds * N_EXPLAINED / len(mc),
                                      **errors(mc, exact.mean[rows])}
    riemann, seconds = timed(lambda: riemann_ig(posterior, X, baseline))
    ig["riemann_G50"] = {
        "seconds": seconds, **errors(riemann, exact.mean),
        "completeness_gap": float(np.max(np.abs(
            riemann.sum(1) - (exact.prediction - exact.baseline_prediction)))),
    }
    ratios = {
        "gradient_time_ours_over_mc_1e5": gradient["ours_mean"]["seconds"]
        / gradient["monte_carlo_100000"]["seconds"],
        "gradient_error_taylor_over_ours": gradient["taylor_eq33"]["max_abs_error"]
        / max(gradient["ours_mean"]["max_abs_error"], 1e-300),
        "gradient_error_plug_in_over_mc_1e5": gradient["plug_in"]["max_abs_error"]
        / gradient["monte_carlo_100000"]["max_abs_error"],
        "ig_time_ours_over_captum": ig["ours"]["seconds"] / ig["captum_plug_in"]["seconds"],
        "ig_time_mc_1e5_over_ours_per_200_points":
            ig["monte_carlo_100000"]["seconds_per_200_points"] / ig["ours"]["seconds"],
        "riemann_completeness_gap_over_ours": ig["riemann_G50"]["completeness_gap"]
        / max(ig["ours"]["completeness_gap"], 1e-300),
    }
    return {
        "n_train": len(X_train), "n_explained": len(X), "n_features": X.shape[1],
        "fit_seconds": fit_seconds, "sklearn_kernel": str(model.kernel_),
        "test_accuracy": accuracy,
        "latent_variance": {"min": float(latent_var.min()), "median": float(np.median(latent_var)),
                            "max": float(latent_var.max())},
        "reference_seconds": reference_seconds,
        "expected_gradient": gradient, "integrated_gradients": ig, "ratios": ratios,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    payload = {"machine": machine_info(note="shared machine: 2 cores, other jobs running "
                                            "(timings are indicative; see load averages)"),
               "settings": {"n_explained": N_EXPLAINED, "mc_draws": MC_DRAWS,
                            "mc_ig_points_for_1e5": MC_IG_POINTS, "mc_ig_nodes": MC_IG_NODES,
                            "riemann_steps": RIEMANN_STEPS, "captum_steps": CAPTUM_STEPS,
                            "reference_gauss_legendre_panels_of_8": REFERENCE_PANELS,
                            "seed": args.seed}}
    for name in ("digits_0_vs_1", "wdbc"):
        payload[name] = result = run_problem(name, args.seed)
        print(name, "accuracy", round(result["test_accuracy"], 4), flush=True)
        for key, value in result["ratios"].items():
            print(f"  {key}: {value:.3g}")
        print("wrote", write_results("classifier_explanations", payload), flush=True)


if __name__ == "__main__":
    main()
