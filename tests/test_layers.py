"""The package's import graph: no cycles, and no module imports from a layer above its own.

Every ``import gpexplain...`` / ``from gpexplain... import`` (and relative import) of every
module under ``src/gpexplain`` is read with ``ast``, at module level and inside functions
(imports under ``if TYPE_CHECKING:`` are left out: they never run). Imports of third-party
modules are not edges, so a heavy optional library deferred into the function that uses it
(matplotlib, dask, cvxpy, shap, BoTorch) is always allowed.

The layers are DESIGN.md's table, bottom (0) to top; a module may import from its own layer and
those below. Package ``__init__`` modules re-export their layer's names and are ranked with it;
``gpexplain/__init__.py`` re-exports everything and sits on top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gpexplain

SOURCE = Path(gpexplain.__file__).parent

# (module name prefix, layer), bottom to top; the longest matching prefix wins.
LAYERS = {
    # Foundations that import nothing from the package. ``_torch`` is DESIGN.md's "one place
    # that turns arrays into tensors": input validation (the data row) converts tensors with it,
    # so it sits below that row.
    "gpexplain._registry": 0,
    "gpexplain._optional": 0,
    "gpexplain._version": 0,
    "gpexplain._torch": 0,
    "gpexplain._threads": 0,
    "gpexplain._quad": 0,
    # data
    "gpexplain.datasets": 1,
    "gpexplain._validation": 1,
    "gpexplain._baselines": 1,
    "gpexplain.encoding": 1,
    # execution, numerics
    "gpexplain.parallel": 2,
    "gpexplain.accuracy": 2,
    "gpexplain._numerics": 2,
    # results
    "gpexplain.attribution": 3,
    "gpexplain.global_attribution": 3,
    "gpexplain.interactions": 3,
    "gpexplain.multi_output_attribution": 3,
    "gpexplain.persistence": 3,
    "gpexplain.point_covariance": 3,
    # kernels
    "gpexplain.kernels": 4,
    "gpexplain.kernels.product_pairs": 4,  # integrals mixing two product kernels (LMC Sobol)
    # likelihoods, links
    "gpexplain.likelihoods": 5,
    "gpexplain.links": 5,
    # functionals
    "gpexplain.functionals": 6,
    "gpexplain.functionals.terms": 6,  # the LMC's term form (issue 24)
    # posterior
    "gpexplain.posterior": 7,
    "gpexplain.posterior.lmc": 7,
    # estimators
    "gpexplain.models": 8,
    "gpexplain.models._lmc": 8,
    # explanations
    "gpexplain.explain": 9,
    "gpexplain.explain._chunks": 9,  # one chunk through the generic formula (issue 24)
    # property-optimised explanations
    "gpexplain.poe": 10,
    # metrics
    "gpexplain.metrics": 11,
    # presentation; the pipeline (encoder + estimator + explanation) is a user-facing wrapper
    "gpexplain.plot": 12,
    "gpexplain.report": 12,
    "gpexplain.pipeline": 12,
    # command line
    "gpexplain.cli": 13,
    # the package's re-exports
    "gpexplain": 14,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


def _resolve(name: str) -> str:
    """The package module an import names: ``from gpexplain.a import b`` is ``gpexplain.a.b``
    when that is a module, else ``gpexplain.a``."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _imports(module: str) -> tuple[set[str], set[str]]:
    """The package modules ``module`` imports at module level and inside functions."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    top, deferred = set(), set()

    def visit(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            names = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                names = [f"{base}.{alias.name}" for alias in child.names]
            for name in names:
                if name == "gpexplain" or name.startswith("gpexplain."):
                    (deferred if in_function else top).add(_resolve(name))
            visit(child, in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            ))

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    top.discard(module)
    deferred.discard(module)
    return top, deferred


GRAPH = {module: _imports(module) for module in MODULES}


def layer(module: str) -> int:
    prefixes = [p for p in LAYERS if module == p or module.startswith(p + ".")
                or module.startswith(p + "_")]
    if not prefixes:
        raise AssertionError(f"{module} is in no layer of LAYERS (DESIGN.md): add it")
    return LAYERS[max(prefixes, key=len)]


def _cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


def test_every_module_has_a_layer():
    for module in MODULES:
        layer(module)


def test_no_import_cycle_among_module_level_imports():
    cycles = _cycles({module: top for module, (top, _) in GRAPH.items()})
    assert [sorted(c) for c in cycles] == []


def test_function_level_imports_do_not_hide_a_cycle():
    """A package import deferred into a function only to break a cycle is a cycle all the
    same: with function-level imports counted there is none either (the re-exporting root
    package, which imports everything, is left out)."""
    edges = {
        module: {m for m in top | deferred if m != "gpexplain"}
        for module, (top, deferred) in GRAPH.items() if module != "gpexplain"
    }
    assert [sorted(c) for c in _cycles(edges)] == []


def test_no_module_imports_from_a_layer_above_its_own():
    upward = sorted(
        (module, imported, layer(module), layer(imported))
        for module, (top, deferred) in GRAPH.items()
        for imported in top | deferred
        if layer(imported) > layer(module)
    )
    assert upward == []

