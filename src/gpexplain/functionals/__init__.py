"""Linear functionals of a GP (gradient, integrated gradient, Shapley value, local linear
weight), each evaluated per kernel type by a registered scheme. Imports kernels only."""

from gpexplain.functionals.base import LinearFunctional, Scheme
from gpexplain.functionals.gradient import Gradient
from gpexplain.functionals.integrated_gradient import IntegratedGradient
from gpexplain.functionals.local_linear_weight import LocalLinearWeight
from gpexplain.functionals.product_shapley import ProductShapley
from gpexplain.functionals.shapley import AdditiveShapley
from gpexplain.functionals.terms import CoregionalTerms, TermSum

__all__ = [
    "AdditiveShapley",
    "CoregionalTerms",
    "Gradient",
    "IntegratedGradient",
    "LinearFunctional",
    "LocalLinearWeight",
    "ProductShapley",
    "Scheme",
    "TermSum",
]
