"""The registry every list of names is written in."""

import pytest

from gpexplain._registry import Registry


def test_register_get_names_in_order():
    registry = Registry("widget")
    registry.register("b", 2)

    @registry.register("a")
    def a():
        return 1

    assert registry.names() == ("b", "a")
    assert registry.get("a") is a and registry.get("b") == 2
    assert "a" in registry and "c" not in registry and len(registry) == 2
    assert registry.items() == (("b", 2), ("a", a))


def test_unknown_name_lists_names_and_suggests():
    registry = Registry("Shapley game")
    registry.register("interventional", 1)
    registry.register("baseline", 2)
    with pytest.raises(ValueError, match=r"game 'baselin'.*Did you mean 'baseline'"):
        registry.get("baselin")
    with pytest.raises(ValueError, match=r"use one of \('interventional', 'baseline'\)\.$"):
        registry.get("zzz")
    with pytest.raises(TypeError, match="Shapley game must be one of"):
        registry.get(3)


def test_refuses_duplicates_and_bad_names():
    registry = Registry("link")
    registry.register("logit", 1)
    with pytest.raises(ValueError, match="registered already"):
        registry.register("logit", 2)
    with pytest.raises(TypeError):
        registry.register("", 3)
    with pytest.raises(TypeError):
        Registry("")
