"""The explanation-method registry: what each method is, computes and cites.

One entry per public explanation method. The command line reads its ``--method`` choices from
here, the HTML report cites from here (by the ``method_id`` the command line writes into
``summary.json``), and ``tests/contracts/`` runs every method on every model family that
declares it. A new method is its module, one ``METHODS.register`` call below, and the contract
case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpexplain._registry import Registry
from gpexplain.explain.gpx import gpx_explanation
from gpexplain.explain.gradients import gradients
from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.explain.interactions import shapley_interactions
from gpexplain.explain.sensitivity import global_sensitivity
from gpexplain.explain.shapley import global_shapley_values, shapley_values
from gpexplain.explain.variance import explain_variance

__all__ = ["METHODS", "Method", "Reference"]

LEVELS = ("latent", "probability")


@dataclass(frozen=True)
class Reference:
    """A publication, cited by authors, title and year (corrections in ``docs/errata.md``)."""

    authors: str
    title: str
    year: int
    note: str = ""

    def __str__(self) -> str:
        note = f", {self.note}" if self.note else ""
        return f"{self.authors}, {self.title} ({self.year}){note}"


@dataclass(frozen=True)
class Method:
    """One explanation method.

    Attributes
    ----------
    function : callable
        The public function, ``function(model_or_posterior, X, **options)``.
    summary : str
        One line a user reads: what the method attributes.
    local : bool
        True: one attribution per explained point (an ``Attribution``); False: one global
        result for the model (Sobol indices, global Shapley values).
    levels : tuple of {"latent", "probability"}
        What it explains for a classifier: the latent GP only, or also the expected class
        probability (``output="probability"``).
    complete : bool
        The attributions sum to the prediction minus the base value, and every result is
        checked to (``CompletenessWarning`` otherwise).
    references : tuple of Reference
    outputs : {"features", "interactions"}
        What a local result holds per point: one value per feature (an ``Attribution``), or
        the ``d + d (d - 1) / 2`` order-1 and pairwise values of a ``ShapleyInteractions``
        (complete: the index's efficiency weights, all ones for the default index).
    cli_name : str or None
        Its ``--method`` value on the command line; None where no command offers it as a
        ``--method`` (global results have their own command or output).
    """

    function: Callable
    summary: str
    local: bool
    levels: tuple[str, ...]
    complete: bool
    references: tuple[Reference, ...]
    cli_name: str | None = None
    outputs: str = "features"

    def __post_init__(self):
        unknown = set(self.levels) - set(LEVELS)
        if not self.levels or unknown:
            raise ValueError(f"levels must be a non-empty subset of {LEVELS}, got {self.levels}.")
        if self.outputs not in ("features", "interactions"):
            raise ValueError(f"outputs must be 'features' or 'interactions', got {self.outputs!r}.")


METHODS: Registry[Method] = Registry("explanation method")

_BUTLER = Reference("K. Butler, G. Feng, P. M. Djuric", "Explainable Learning with Gaussian "
                    "Processes", 2024, "Theorem 1 and Corollary 1")
_SEITZ = Reference("S. Seitz", "Gradient-based explanations for Gaussian process regression "
                   "and classification models", 2022)
_OWEN_MULTILINEAR = Reference("G. Owen", "Multilinear extensions of games", 1972)
_ADDITIVE_SHAPLEY = Reference("anonymous authors", "Exact Shapley value for local and global "
                              "explanation of additive Gaussian processes", 2024,
                              "under double-blind review")
_ORTHOGONAL_ADDITIVE = Reference("X. Lu, A. Boukouvalas, J. Hensman", "Additive Gaussian "
                                 "processes revisited", 2022)
_YOSHIKAWA_IWATA = Reference("Y. Yoshikawa, T. Iwata", "Gaussian process regression with local "
                             "explanation", 2020, "preprint")
_SOBOL = Reference("I. M. Sobol'", "Global sensitivity indices for nonlinear mathematical "
                   "models and their Monte Carlo estimates", 2001)
_GRABISCH_ROUBENS = Reference("M. Grabisch, M. Roubens", "An axiomatic approach to the concept of "
                              "interaction among players in cooperative games", 1999)
_STII = Reference("M. Sundararajan, K. Dhamdhere, A. Agarwal", "The Shapley Taylor interaction "
                  "index", 2020)
_BORDT = Reference("S. Bordt, U. von Luxburg", "From Shapley values to generalized additive "
                   "models and back", 2023, "k-SII")
_OWEN_EFFECTS = Reference("A. B. Owen", "Sobol' indices and Shapley value", 2014)

METHODS.register("integrated-gradients", Method(
    integrated_gradients,
    "integrated gradients along the straight path from a baseline, Gaussian with exact mean "
    "and covariance",
    local=True, levels=("latent", "probability"), complete=True,
    references=(_BUTLER, _SEITZ), cli_name="ig",
))
METHODS.register("gradients", Method(
    gradients,
    "the input gradient of the GP (or of the expected class probability) at each point",
    local=True, levels=("latent", "probability"), complete=False, references=(_SEITZ,),
))
METHODS.register("shapley", Method(
    shapley_values,
    "exact Shapley values of the baseline, interventional or product-measure game (product "
    "kernels) or of the orthogonal additive GP",
    local=True, levels=("latent",), complete=True,
    references=(_OWEN_MULTILINEAR, _ADDITIVE_SHAPLEY, _ORTHOGONAL_ADDITIVE), cli_name="shapley",
))
METHODS.register("shapley-interactions", Method(
    shapley_interactions,
    "exact order-1 values and pairwise Shapley interactions (k-SII, SII, STII) of the "
    "baseline, interventional or product-measure game (product kernels) or of the orthogonal "
    "additive GP, with their joint posterior covariance",
    local=True, levels=("latent",), complete=True, outputs="interactions",
    references=(_GRABISCH_ROUBENS, _STII, _BORDT, _OWEN_MULTILINEAR, _ADDITIVE_SHAPLEY),
    cli_name="interactions",
))
METHODS.register("gpx-contributions", Method(
    gpx_explanation,
    "GPX feature contributions w_l(x) z_l of a locally linear model with GP-distributed "
    "weights (what='weights': the weights themselves)",
    local=True, levels=("latent",), complete=True, references=(_YOSHIKAWA_IWATA,),
    cli_name="contributions",
))
METHODS.register("global-shapley", Method(
    global_shapley_values,
    "global Shapley values of an orthogonal additive GP (its variance decomposition)",
    local=False, levels=("latent",), complete=False,
    references=(_ADDITIVE_SHAPLEY, _ORTHOGONAL_ADDITIVE),
))
METHODS.register("global-sensitivity", Method(
    global_sensitivity,
    "Sobol indices and Shapley effects of the GP under an input measure, with their "
    "posterior moments",
    local=False, levels=("latent",), complete=False, references=(_SOBOL, _OWEN_EFFECTS),
))
METHODS.register("posterior-variance", Method(
    explain_variance,
    "why the model is unsure: exact Shapley values (product kernels) or integrated gradients "
    "(closed form for squared exponentials, quadrature otherwise) of the posterior variance, "
    "a deterministic function (zero covariance)",
    local=True, levels=("latent",), complete=True,
    references=(_OWEN_MULTILINEAR, _BUTLER),
))
