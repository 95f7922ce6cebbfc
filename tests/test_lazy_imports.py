"""``import gpexplain`` loads no optional or plotting module; lazy submodules still resolve."""

import json
import subprocess
import sys

import pytest

# Top-level packages that must not be imported by ``import gpexplain`` (DESIGN.md, import cost).
_NOT_LOADED = ("matplotlib", "dask", "distributed", "cvxpy", "shap", "pymoo", "captum", "botorch")


def _run(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (this one has loaded everything) and parse its JSON."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("statement", ["import gpexplain", "import gpexplain.cli"])
def test_import_loads_no_optional_module(statement):
    """The library, and the command line with all its commands (every ``gpexplain --version``
    or ``--help`` pays this), load no plotting or optional module until one is used."""
    loaded = _run(
        f"import json, sys; {statement}; "
        "print(json.dumps(sorted({name.partition('.')[0] for name in sys.modules})))"
    )
    assert "torch" in loaded and "numpy" in loaded
    assert [name for name in _NOT_LOADED if name in loaded] == []


@pytest.mark.parametrize("name", ["plot", "poe", "metrics", "datasets"])
def test_lazy_submodule_resolves_and_is_listed(name):
    found = _run(
        "import json, sys, gpexplain as gx; "
        f"listed = {name!r} in dir(gx) and {name!r} in gx.__all__; "
        f"module = gx.{name}; "
        f"print(json.dumps([listed, module is sys.modules['gpexplain.{name}']]))"
    )
    assert found == [True, True]


def test_unknown_attribute_is_an_attribute_error():
    import gpexplain as gx

    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        gx.nonexistent  # noqa: B018


def test_require_names_the_extra_of_a_missing_module():
    from gpexplain._optional import require

    assert require("json", "none", "a test").dumps([1]) == "[1]"
    message = r'mofae needs no_such_module: pip install "gpexplain\[poe\]"'
    with pytest.raises(ImportError, match=message):
        require("no_such_module.sub", "poe", "mofae")
