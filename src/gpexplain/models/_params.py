"""Declarative parameter validation and training-data handling shared by every estimator.

After scikit-learn's ``_parameter_constraints``: each estimator lists, per constructor
parameter, what it accepts; ``ValidatedEstimator._validate_params`` checks them all at the
start of ``fit`` with one message shape, ``"<name> must be <what is accepted>, got <value>."``,
raised as ``InvalidParameterError`` (a ``ValueError`` and a ``TypeError``, so callers catching
either see it). Cross-parameter rules (e.g. ``optimizer=None`` needs given hyperparameters)
stay in the estimators. ``_validate_data`` reads X and y and records ``feature_names_in_`` and
``n_features_in_`` in one place.

(scikit-learn's own ``sklearn.utils._param_validation`` is private API and words its messages
differently from the ones this library documents, so the small layer lives here.)
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from numbers import Integral, Real

from gpexplain._validation import as_feature_matrix, as_target
from gpexplain.models._fitting import OPTIMIZERS

__all__ = [
    "MULTISTART_CONSTRAINTS",
    "Device",
    "Integer",
    "InvalidParameterError",
    "Options",
    "PositiveNumber",
    "Seed",
    "ValidatedEstimator",
    "Variance",
]


class InvalidParameterError(ValueError, TypeError):
    """A constructor parameter has a value or type the estimator does not accept."""


def _is_integer(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class Integer:
    """An integer >= ``minimum`` (or None when ``allow_none``)."""

    minimum: int = 1
    allow_none: bool = False

    def check(self, name: str, value) -> None:
        if value is None and self.allow_none:
            return
        if not _is_integer(value) or value < self.minimum:
            what = "a positive integer" if self.minimum == 1 else f"an integer >= {self.minimum}"
            raise InvalidParameterError(
                f"{name} must be {what}{' or None' if self.allow_none else ''}, got {value!r}."
            )

    def invalid_values(self) -> tuple:
        """Values this constraint refuses, one of each kind of mistake (for contract tests).

        Returns
        -------
        tuple
            ``minimum - 1`` (too small), ``minimum + 1.5`` (not an integer), ``True`` (a bool,
            refused although ``int`` subclasses it) and ``str(minimum)`` (a number as text),
            plus ``None`` when None is not allowed. E.g. ``Integer(1).invalid_values()`` is
            ``(0, 2.5, True, "1")`` followed by ``None``.
        """
        values = (self.minimum - 1, self.minimum + 1.5, True, str(self.minimum))
        return values if self.allow_none else (*values, None)


@dataclass(frozen=True)
class Device:
    """None (NumPy on the CPU) or a torch device this machine has (``posterior.device``)."""

    def check(self, name: str, value) -> None:
        if value is None:
            return
        from gpexplain.posterior.device import check_device

        try:
            check_device(value)
        except (TypeError, ValueError) as error:
            raise InvalidParameterError(f"{name}: {error}") from None

    def invalid_values(self) -> tuple:
        """A number, and a name torch does not know."""
        return (0.5, "gpu0")


@dataclass(frozen=True)
class Seed:
    """A random seed: an integer >= 0 (the estimators' runs are reproducible by design)."""

    def check(self, name: str, value) -> None:
        if not _is_integer(value) or value < 0:
            raise InvalidParameterError(
                f"{name} must be an integer >= 0 (a seed), got {value!r}."
            )

    def invalid_values(self) -> tuple:
        """Values this constraint refuses (for contract tests).

        Returns
        -------
        tuple
            ``(-1, 1.5, None, True, "0")``: negative, fractional, missing, a bool, text.
        """
        return (-1, 1.5, None, True, "0")


@dataclass(frozen=True)
class Variance:
    """A positive finite variance (or None, meaning "start from the default")."""

    allow_none: bool = True

    def check(self, name: str, value) -> None:
        if value is None and self.allow_none:
            return
        if not (
            isinstance(value, Real) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0
        ):
            raise InvalidParameterError(
                f"{name} must be a positive finite variance, got {value!r}."
            )

    def invalid_values(self) -> tuple:
        """Values this constraint refuses (for contract tests).

        Returns
        -------
        tuple
            Zero, negative, infinite and NaN variances, a number as text and a bool, plus
            ``None`` when None is not allowed.
        """
        values = (0.0, -1.0, math.inf, math.nan, "0.1", True)
        return values if self.allow_none else (*values, None)


@dataclass(frozen=True)
class PositiveNumber:
    """A positive finite real number (or None when ``allow_none``)."""

    allow_none: bool = False

    def check(self, name: str, value) -> None:
        if value is None and self.allow_none:
            return
        if not (
            isinstance(value, Real) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0
        ):
            raise InvalidParameterError(
                f"{name} must be a positive number{' or None' if self.allow_none else ''}, "
                f"got {value!r}."
            )

    def invalid_values(self) -> tuple:
        """Values this constraint refuses (for contract tests).

        Returns
        -------
        tuple
            Zero, negative, infinite and NaN numbers, a number as text and a bool, plus None
            when None is not allowed.
        """
        values = (0.0, -1.0, math.inf, math.nan, "1", True)
        return values if self.allow_none else (*values, None)


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values (None may be one of them)."""

    values: tuple

    def check(self, name: str, value) -> None:
        if not any(value is option or (
            isinstance(value, str) and value == option) for option in self.values
        ):
            named = [repr(option) for option in self.values if option is not None]
            allowed = " or ".join(
                [", ".join(named)] + (["None"] if None in self.values else [])
            )
            raise InvalidParameterError(f"unknown {name} {value!r}; use {allowed}.")

    def invalid_values(self) -> tuple:
        """Values this constraint refuses (for contract tests).

        Returns
        -------
        tuple
            An unknown string (the accepted strings joined, so it is none of them) and a value
            of a type no option has (a number, or bytes when a number is an option), plus
            ``None`` when None is not an option.
        """
        strings = [option for option in self.values if isinstance(option, str)]
        unknown = "-".join(["not", *strings])
        types = {type(option) for option in self.values}
        wrong_type = next(value for value in (3, 2.5, b"x") if type(value) not in types)
        values = (unknown, wrong_type)
        return values if None in self.values else (*values, None)


class ValidatedEstimator:
    """Mixin: ``_parameter_constraints`` checked by ``_validate_params``; ``_validate_data``."""

    _parameter_constraints: dict = {}

    def _store_parameters(self, arguments: dict) -> None:
        """Store each constructor argument (``locals()`` of ``__init__``) unchanged under its
        own name: scikit-learn's rule for ``__init__`` (``get_params``, ``set_params`` and
        ``clone`` read them back; validation waits for ``fit``)."""
        for name in inspect.signature(type(self).__init__).parameters:
            if name != "self":
                setattr(self, name, arguments[name])

    def _validate_params(self) -> None:
        """Check every constrained constructor parameter (InvalidParameterError names it)."""
        for name, constraint in self._parameter_constraints.items():
            constraint.check(name, getattr(self, name))

    def _validate_data(self, X, y, name: str = "X", min_rows: int = 2):
        """``(X, y, feature names)`` as float64 arrays, with the feature attributes recorded.

        Raises
        ------
        ValueError
            Bad inputs, named by row and column (``gpexplain._validation``).
        """
        X, names = as_feature_matrix(X, name, min_rows=min_rows)
        y = as_target(y, X.shape[0])
        self._record_features(names)
        return X, y, names

    def save(self, path):
        """Save the fitted estimator to a directory (or a ``.npz`` file); ``gx.load`` reads it.

        JSON and ``.npz`` arrays (no pickle), with the format and library versions recorded;
        see ``gpexplain.persistence``. The loaded estimator predicts and explains
        bit-identically.

        Parameters
        ----------
        path : str or os.PathLike

        Returns
        -------
        pathlib.Path

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        """
        from sklearn.utils.validation import check_is_fitted

        from gpexplain.persistence import save

        check_is_fitted(self)
        return save(self, path)

    def _record_features(self, names) -> None:
        """``feature_names_in_`` and ``n_features_in_``: the explained features' names."""
        self.feature_names_in_ = list(names)
        self.n_features_in_ = len(self.feature_names_in_)



#: The constraints every multi-start L-BFGS estimator shares.
MULTISTART_CONSTRAINTS = {
    "noise": Variance(),
    "n_restarts": Integer(0),
    "optimizer": Options(OPTIMIZERS),
    "max_iter": Integer(1),
    "random_state": Seed(),
}
