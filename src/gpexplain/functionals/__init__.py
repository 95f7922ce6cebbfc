"""Linear functionals of a GP (gradient, integrated gradient, Shapley value, local linear
weight), each evaluated per kernel type by a registered scheme."""

from gpexplain.functionals.base import LinearFunctional, Scheme

__all__ = ["LinearFunctional", "Scheme"]
