"""Named registries: the one place each list of "what exists" is written.

Every set of interchangeable parts (explanation methods, model families, links, likelihoods,
Shapley games, measures) is a ``Registry``. Entries are added where they are defined
(``@REGISTRY.register("name")`` on a class or function, or ``REGISTRY.register("name", obj)``),
looked up by name with an error that lists the accepted names and suggests the closest one, and
enumerated by the contract tests in ``tests/contracts/`` and by the command line. Nothing else
keeps a copy of a registry's names.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """An ordered mapping from names to entries, filled by registration.

    Parameters
    ----------
    kind : str
        What the entries are, as a user would say it ("link", "Shapley game"): it names the
        argument in error messages.

    Examples
    --------
    >>> LINKS = Registry("link")
    >>> @LINKS.register("logit")
    ... class Logit: ...
    >>> LINKS.get("logit") is Logit
    True
    >>> LINKS.names()
    ('logit',)
    """

    def __init__(self, kind: str):
        if not isinstance(kind, str) or not kind:
            raise TypeError("kind must be a non-empty string naming the entries.")
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T | None = None) -> Callable[[T], T] | T:
        """Add ``entry`` under ``name``; without ``entry``, a decorator that adds what it wraps.

        Entries keep their registration order, which is the order ``names`` lists them in (the
        first is the default wherever a registry supplies one).

        Raises
        ------
        TypeError
            ``name`` is not a non-empty string.
        ValueError
            ``name`` is registered already (a second registration would silently replace it).
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"a {self.kind} name must be a non-empty string, got {name!r}.")
        if name in self._entries:
            raise ValueError(f"the {self.kind} {name!r} is registered already.")

        def add(value: T) -> T:
            self._entries[name] = value
            return value

        return add if entry is None else add(entry)

    def get(self, name: str) -> T:
        """The entry registered under ``name``.

        Raises
        ------
        TypeError
            ``name`` is not a string.
        ValueError
            No entry has that name; the message lists the names and suggests the closest.
        """
        if not isinstance(name, str):
            raise TypeError(
                f"{self.kind} must be one of {self.names()} (a string), got {type(name).__name__}."
            )
        if name not in self._entries:
            raise ValueError(self.unknown_message(name))
        return self._entries[name]

    def unknown_message(self, name: str) -> str:
        """The error text for a name that is not registered (used by ``get``)."""
        close = difflib.get_close_matches(name, self._entries, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.kind} {name!r}; use one of {self.names()}.{hint}"

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._entries)

    def items(self) -> tuple[tuple[str, T], ...]:
        """``(name, entry)`` pairs, in registration order."""
        return tuple(self._entries.items())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"
