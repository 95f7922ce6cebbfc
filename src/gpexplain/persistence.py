"""Save and load fitted estimators and attributions, in a safe, versioned format.

No pickle: a saved object is a JSON document (``gpexplain.json``: the format and library
versions, the kind of object, and its state as a tree) plus its arrays in an ``.npz`` file read
with ``allow_pickle=False``. The tree holds numbers, strings, lists, dicts, arrays and tensors,
and objects of an allow-list of classes: gpexplain's own, GPyTorch's (kernels, constraints,
priors, means, likelihoods) and a few of torch and scikit-learn's scaling classes. An object
is restored by creating its class without running any constructor and setting its saved
attributes, so loading runs no code named by the file; functions (a GPyTorch constraint's
transform) are restored only from a fixed list of transforms, and methods (a GPyTorch prior's
parameter closure) only as methods of an allowed class bound to a restored object. Any
estimator built from these pieces saves and loads with no code of its own (its fitted
attributes are walked); an estimator lists attributes that are not part of the fitted
model in ``_not_saved`` (e.g. the training-time GPyTorch modules of ``SparseGPRegressor``),
which are None after loading (also in an estimator held by another, as ``estimators_`` of a
model of several outputs). Posteriors (e.g. from ``gx.from_botorch``) save the same way.

This module sits in the results layer and imports nothing above it, so it knows the objects it
saves only through what their classes declare (DESIGN.md's layer table; ``tests/test_layers.py``):

* ``_save_kind = "model"``: saved as the state tree above (the posteriors declare it; any
  gpexplain class with a ``fit`` method, i.e. an estimator, is saved so too);
* ``_save_kind = <another kind>`` with ``_save_to(path)`` and a classmethod
  ``_load_from(path, header, arrays)``: a format of the class's own, written with this module's
  header and arrays (``_header``, ``_write``) and read back by the class the header names
  (restored by name, like every class here). ``Attribution`` is one: a directory a user can
  also read without gpexplain (see ``gpexplain.attribution``).
"""

from __future__ import annotations

import importlib
import json
import os
import types
import warnings
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np

from gpexplain._torch import to_numpy
from gpexplain._version import __version__

__all__ = ["FORMAT_VERSION", "load", "save"]

FORMAT_VERSION = 1
_HEADER = "gpexplain.json"
_ARRAYS = "arrays.npz"
_HEADER_IN_FILE = "__gpexplain__"  # the JSON, inside a single-file .npz save
_CLASS_PREFIXES = ("gpexplain.", "gpytorch.", "torch.nn.modules.", "sklearn.preprocessing.")


def save(obj, path) -> Path:
    """Save a fitted estimator or an ``Attribution``.

    Parameters
    ----------
    obj : fitted gpexplain estimator, posterior or Attribution
        A posterior: e.g. from ``gx.from_botorch`` or ``gx.ExactPosterior``.
    path : str or os.PathLike
        A directory (created if needed; files in it with the names used here are
        overwritten), or for an estimator or posterior a single file ending in ``.npz``.

    Returns
    -------
    pathlib.Path
        Where it was written.

    Raises
    ------
    TypeError
        ``obj`` is none of these, or holds an object of a class that cannot be saved safely
        (named, with its attribute path); ``path`` not a path.
    ValueError
        An Attribution to a ``.npz`` file (it is a directory with a Parquet table).
    """
    path = _as_path(path)
    # What a class declares (see the module docstring), not isinstance checks: the posteriors
    # and Attribution are defined in layers this module may not import.
    kind = getattr(type(obj), "_save_kind", None)
    if kind is None and hasattr(obj, "fit") and type(obj).__module__.startswith("gpexplain."):
        kind = "model"  # an estimator
    if kind is None:
        raise TypeError(
            f"save takes a fitted gpexplain estimator, a posterior (e.g. from gx.from_botorch) "
            f"or an Attribution, got {type(obj).__name__}."
        )
    if kind != "model":
        return obj._save_to(path)  # a format of the class's own (an Attribution's directory)
    encoder = _Encoder()
    excluded = set(getattr(obj, "_not_saved", ()))
    state = {key: value for key, value in _state_of(obj).items() if key not in excluded}
    header = _header("model", obj)
    header["not_saved"] = sorted(excluded)
    header["state"] = encoder.encode(state, type(obj).__name__)
    _write(path, header, encoder.arrays)
    return path


def load(path, expected=None):
    """Load what ``save`` (or ``model.save``, ``Attribution.save``) wrote.

    Parameters
    ----------
    path : str or os.PathLike
        The directory or ``.npz`` file.
    expected : type, optional
        Refuse anything that is not an instance of this class (e.g. ``gx.GPRegressor``, or
        ``gx.Attribution``).

    Returns
    -------
    estimator, posterior or Attribution
        Identical to what was saved: predictions and explanations of a loaded estimator are
        bit-identical to the original's on the same machine.

    Raises
    ------
    FileNotFoundError
        Nothing saved there.
    ValueError
        Not a gpexplain save, a format version this gpexplain cannot read, or a file written
        by another gpexplain major.minor version (whose classes may differ); the versions are
        named.
    TypeError
        The saved object is not an instance of ``expected`` (or ``expected`` is not a class),
        or the file names a class or function outside the allow-list (a tampered file).
    """
    path = _as_path(path)
    if expected is not None and not isinstance(expected, type):
        raise TypeError(f"expected must be a class (e.g. gx.GPRegressor), got {expected!r}.")
    header, arrays = _read(path)
    kind = header.get("kind")
    with arrays:
        if kind == "model":
            obj = _Decoder(arrays).decode(header["state"])
            cls = _allowed_class(header["class"])
            estimator = cls.__new__(cls)
            estimator.__dict__.update(obj)
            estimator.__dict__.update(dict.fromkeys(header.get("not_saved", [])))
            obj = estimator
        else:
            obj = _own_format_class(path, header)._load_from(path, header, arrays)
    if expected is not None and not isinstance(obj, expected):
        raise TypeError(
            f"{path} holds a {type(obj).__name__} ({kind}), not a {expected.__name__}."
        )
    return obj


# -- header, files, versions ----------------------------------------------------------------
def _as_path(path) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}.")
    return Path(os.fspath(path))


def _versions() -> dict[str, str]:
    import gpytorch
    import torch

    return {
        "gpexplain": __version__,
        "torch": torch.__version__,
        "gpytorch": gpytorch.__version__,
        "numpy": np.__version__,
    }


def _header(kind: str, obj) -> dict:
    return {
        "format": "gpexplain",
        "format_version": FORMAT_VERSION,
        "versions": _versions(),
        "kind": kind,
        "class": _class_name(type(obj)),
    }


def _write(path: Path, header: dict, arrays: dict[str, np.ndarray]) -> None:
    text = json.dumps(header, allow_nan=False)
    if path.suffix == ".npz":
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, **arrays, **{_HEADER_IN_FILE: np.array(text)})
        return
    path.mkdir(parents=True, exist_ok=True)
    np.savez(path / _ARRAYS, **arrays)
    (path / _HEADER).write_text(text, encoding="utf-8")


def _read(path: Path) -> tuple[dict, _Arrays]:
    """The header and the arrays of a save; the arrays are read when asked for, and the
    caller closes them (``with arrays:``)."""
    if path.is_file() and path.suffix == ".npz":
        arrays = _parsed(path, path, lambda file: _Arrays(path, file))
        if _HEADER_IN_FILE not in arrays:
            arrays.close()
            raise ValueError(f"{path} is an .npz file but not a gpexplain save (no header).")
        text = str(arrays[_HEADER_IN_FILE])
    elif path.is_dir():
        if not (path / _HEADER).is_file():
            raise ValueError(f"{path} is not a gpexplain save (no {_HEADER} in it).")
        text = _parsed(path, path / _HEADER, lambda file: file.read_text(encoding="utf-8"))
        arrays = _parsed(path, path / _ARRAYS, lambda file: _Arrays(path, file))
    else:
        raise FileNotFoundError(f"no gpexplain save at {path} (a directory or an .npz file).")
    with _closed_on_error(arrays):
        header = _parsed(path, path, lambda _: json.loads(text))
        if not isinstance(header, dict):
            raise ValueError(f"{path} is not a gpexplain save (its header is not a JSON object).")
        _check_versions(path, header)
    return header, arrays


class _closed_on_error:
    """Close ``arrays`` if the block raises (on success the caller keeps them open)."""

    def __init__(self, arrays):
        self.arrays = arrays

    def __enter__(self):
        return self.arrays

    def __exit__(self, kind, error, traceback):
        if kind is not None:
            self.arrays.close()


#: A member of an arrays file may expand to at most this many times its stored size (plus
#: the slack below): gpexplain stores arrays uncompressed (``np.savez``), so a larger ratio is
#: not its file. A deflated member expands up to ~1000x: a 4 MB file took 30 s and 4.4 GiB to
#: read before this check.
_MAX_EXPANSION = 4
_EXPANSION_SLACK_BYTES = 2**20


class _Arrays:
    """The arrays of a save, read from the ``.npz`` archive one by one as they are asked for
    (an array the state does not reference is never read), each refused before it is read
    if it would expand far beyond its stored size.

    A mapping from names to arrays (``[]``, ``get``, ``in``) and a context manager that closes
    the archive.
    """

    def __init__(self, save: Path, file: Path):
        self.save, self.file = save, file
        self.archive = np.load(file, allow_pickle=False)
        if not isinstance(self.archive, np.lib.npyio.NpzFile):  # a plain .npy, already read
            raise ValueError("not an .npz archive")

    def __contains__(self, name) -> bool:
        return name in self.archive.files

    def get(self, name, default=None):
        return self[name] if name in self else default

    def __getitem__(self, name) -> np.ndarray:
        info = self.archive.zip.getinfo(f"{name}.npy")
        if info.file_size > _MAX_EXPANSION * info.compress_size + _EXPANSION_SLACK_BYTES:
            raise ValueError(
                f"the gpexplain save at {self.save} is damaged or not written by gpexplain: "
                f"array {name!r} in {self.file.name} would expand from {info.compress_size} "
                f"stored bytes to {info.file_size} (gpexplain stores arrays uncompressed); "
                "save it again."
            )
        return _parsed(self.save, self.file, lambda _: self.archive[name])

    def close(self) -> None:
        self.archive.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def _parsed(save: Path, file: Path, parse):
    """``parse(file)``, a damaged or truncated file refused in one sentence (the parser's own
    exception type and text kept in it) instead of the parser's exception."""
    try:
        return parse(file)
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as error:
        raise ValueError(
            f"the gpexplain save at {save} is damaged or incomplete: reading {file.name} failed "
            f"({type(error).__name__}: {error}); save it again."
        ) from None


def _check_versions(path: Path, header: dict) -> None:
    if header.get("format") != "gpexplain":
        raise ValueError(f"{path} is not a gpexplain save.")
    saved = header.get("versions", {})
    if header.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path} has save format version {header.get('format_version')!r} (written by "
            f"gpexplain {saved.get('gpexplain')}); this gpexplain reads format version "
            f"{FORMAT_VERSION}. Load it with the gpexplain version that wrote it."
        )
    current = _versions()
    if _minor(saved.get("gpexplain", "")) != _minor(current["gpexplain"]):
        raise ValueError(
            f"{path} was written by gpexplain {saved.get('gpexplain')}; this is gpexplain "
            f"{current['gpexplain']}, whose classes may differ. Load it with gpexplain "
            f"{saved.get('gpexplain')} (or refit)."
        )
    changed = [
        f"{name} {saved[name]} (now {current[name]})"
        for name in ("torch", "gpytorch", "numpy")
        if saved.get(name) not in (None, current[name])
    ]
    if changed:
        warnings.warn(
            f"{path} was saved with {', '.join(changed)}; predictions may differ in the last "
            "digits.",
            UserWarning,
            stacklevel=3,
        )


def _minor(version: str) -> tuple[str, ...]:
    return tuple(version.split(".")[:2])


def _own_format_class(path: Path, header: dict):
    """The class that reads a save of a kind other than "model" (e.g. "attribution"): the one
    the header names, restored by name through the allow-list, which must declare that kind."""
    kind = header.get("kind")
    try:
        cls = _allowed_class(header.get("class", ""))
    except (TypeError, ImportError):
        cls = None
    if kind is None or getattr(cls, "_save_kind", None) != kind:
        raise ValueError(f"{path} holds an unknown kind of object {kind!r}.")
    return cls


# -- the state tree ------------------------------------------------------------------------
def _class_name(cls) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _allowed_class(name: str):
    module_name, _, qualname = name.partition(":")
    if not module_name.startswith(_CLASS_PREFIXES):
        raise TypeError(f"the save names class {name!r}, outside the allowed packages.")
    target = importlib.import_module(module_name)
    factory, local, _ = qualname.partition(".<locals>.")
    if local:
        # A class defined inside a module-level function, which returns it (InputScaledKernel:
        # ``gpexplain.kernels.gpytorch_adapter._input_scaled_class``, which defers importing
        # gpytorch). Found by name like any other class, so this module imports no kernel
        # module; the function is called (with no arguments) only when it declares itself
        # such a factory, and what it returns must carry the saved name (checked below).
        function = getattr(target, factory, None)
        target = function() if getattr(function, "_returns_saved_class", False) else None
    else:
        for part in qualname.split("."):
            target = getattr(target, part, None)
    # The name must be the class's own: no reaching other classes through module attributes.
    if not isinstance(target, type) or _class_name(target) != name:
        raise TypeError(f"the save names {name!r}, which is not an allowed class.")
    return target


def _allowed_functions() -> dict:
    """The functions a saved object may hold: GPyTorch constraints' transforms."""
    import gpytorch.utils.transforms as transforms
    import torch

    functions = [torch.exp, torch.log, torch.sigmoid, torch.nn.functional.softplus]
    functions += [
        value for value in vars(transforms).values()
        if callable(value) and not isinstance(value, type)
    ]
    return {f"{getattr(f, '__module__', None) or 'torch'}:{f.__name__}": f for f in functions}


def _is_hook_table(key, value) -> bool:
    """torch.nn.Module's hook tables: hooks are not part of a fitted model."""
    return isinstance(key, str) and "hook" in key and isinstance(value, OrderedDict)


class _Encoder:
    """Object tree -> JSON tree, arrays set aside; shared objects are stored once."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}
        self.seen: dict[int, int] = {}
        self.keep_alive: list = []  # ids stay unique while encoding
        self.functions = {id(f): name for name, f in _allowed_functions().items()}

    def _array(self, values: np.ndarray) -> str:
        if values.dtype.hasobject:
            raise TypeError("object arrays cannot be saved safely")
        key = f"a{len(self.arrays)}"
        self.arrays[key] = values
        return key

    def _labels(self, values: np.ndarray, where: str) -> dict:
        """An object array of plain labels (e.g. a classifier's text ``classes_``) as a JSON
        list: never pickled, so anything else in an object array is refused."""
        flat = values.ravel().tolist()
        if not all(isinstance(v, str) or type(v) in (bool, int, float) for v in flat):
            raise TypeError(
                f"cannot save {where}: an object array is saved only when it holds plain "
                "labels (str, int, float, bool)."
            )
        return {"labels": [self.encode(str(v) if isinstance(v, str) else v, where)
                           for v in flat], "shape": list(values.shape)}

    def encode(self, obj, where: str):
        import torch

        if obj is None or type(obj) in (bool, str, int):
            return obj
        if type(obj) is float:
            return obj if np.isfinite(obj) else {"float": repr(obj)}
        if id(obj) in self.seen:
            return {"ref": self.seen[id(obj)]}
        reference = len(self.seen)
        self.seen[id(obj)] = reference
        self.keep_alive.append(obj)
        node = self._node(obj, where, torch)
        node["id"] = reference
        return node

    def _node(self, obj, where, torch) -> dict:
        if isinstance(obj, np.ndarray) and obj.dtype.hasobject:
            return self._labels(obj, where)
        if isinstance(obj, np.ndarray | np.generic):
            return {"ndarray": self._array(np.asarray(obj)), "scalar": np.ndim(obj) == 0
                    and isinstance(obj, np.generic)}
        if isinstance(obj, torch.Tensor):
            return {
                "tensor": self._array(to_numpy(obj)),
                "parameter": isinstance(obj, torch.nn.Parameter),
                "requires_grad": bool(obj.requires_grad),
            }
        if isinstance(obj, torch.Size):
            return {"size": list(obj)}
        if isinstance(obj, list | tuple | set | frozenset):
            kind = type(obj).__name__
            if kind not in ("list", "tuple", "set", "frozenset"):
                raise TypeError(f"cannot save {where}: {type(obj).__name__} is not allowed.")
            return {kind: [self.encode(value, f"{where}[{i}]") for i, value in enumerate(obj)]}
        if isinstance(obj, dict):
            if type(obj) not in (dict, OrderedDict):
                raise TypeError(f"cannot save {where}: {type(obj).__name__} is not allowed.")
            items = [
                [self.encode(key, where), self.encode(
                    OrderedDict() if _is_hook_table(key, value) else value, f"{where}[{key!r}]"
                )]
                for key, value in obj.items()
            ]
            return {"dict": items, "ordered": type(obj) is OrderedDict}
        if id(obj) in self.functions:
            return {"function": self.functions[id(obj)]}
        if isinstance(obj, types.MethodType):  # e.g. a GPyTorch prior's parameter closure
            return {"method": obj.__func__.__name__, "self": self.encode(obj.__self__, where)}
        name = _class_name(type(obj))
        if not name.startswith(_CLASS_PREFIXES) or not hasattr(obj, "__dict__"):
            raise TypeError(
                f"cannot save {where}: objects of class {name} are not on the allow-list of "
                "safe classes (gpexplain, GPyTorch, torch.nn modules, scikit-learn scalers)."
            )
        _allowed_class(name)  # what load will accept
        # An estimator inside another (``estimators_`` of a model of several outputs) leaves
        # out its ``_not_saved`` attributes too: None after loading, as at the top.
        excluded = set(getattr(type(obj), "_not_saved", ()))
        state = {key: None if key in excluded else value
                 for key, value in _state_of(obj).items()}
        return {"object": name, "state": self.encode(state, where)}


def _state_of(obj) -> dict:
    """The attributes saved of ``obj``: ``vars(obj)``, or what its class's ``_saved_state``
    returns (a result's lazy covariance across points, made dense)."""
    hook = getattr(type(obj), "_saved_state", None)
    return hook(obj) if hook is not None else vars(obj)


class _Decoder:
    """JSON tree -> objects; the inverse of ``_Encoder``."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        self.arrays = arrays
        self.objects: dict[int, object] = {}
        self.functions = _allowed_functions()

    def decode(self, node):
        if node is None or isinstance(node, bool | str | int | float):
            return node
        if "float" in node:
            return float(node["float"])
        if "ref" in node:
            return self.objects[node["ref"]]
        obj = self._build(node)
        self.objects[node["id"]] = obj
        return obj

    def _build(self, node):
        import torch

        if "labels" in node:
            labels = np.empty(len(node["labels"]), dtype=object)
            labels[:] = [self.decode(value) for value in node["labels"]]
            return labels.reshape(node["shape"])
        if "ndarray" in node:
            values = self.arrays[node["ndarray"]]
            return values[()] if node["scalar"] else values
        if "tensor" in node:
            tensor = torch.from_numpy(np.array(self.arrays[node["tensor"]]))
            if node["parameter"]:
                return torch.nn.Parameter(tensor, requires_grad=node["requires_grad"])
            return tensor.requires_grad_(node["requires_grad"])
        if "size" in node:
            return torch.Size(node["size"])
        for kind, build in (("list", list), ("tuple", tuple), ("set", set),
                            ("frozenset", frozenset)):
            if kind in node:
                return build(self.decode(value) for value in node[kind])
        if "dict" in node:
            build = OrderedDict if node["ordered"] else dict
            return build((self._key(key), self.decode(value)) for key, value in node["dict"])
        if "method" in node:
            owner = self.decode(node["self"])
            function = getattr(type(owner), node["method"], None)
            if not isinstance(function, types.FunctionType):
                raise TypeError(f"the save names method {node['method']!r}, not allowed.")
            return types.MethodType(function, owner)
        if "function" in node:
            if node["function"] not in self.functions:
                raise TypeError(f"the save names function {node['function']!r}, not allowed.")
            return self.functions[node["function"]]
        cls = _allowed_class(node["object"])
        obj = cls.__new__(cls)
        self.objects[node["id"]] = obj  # before its attributes: they may refer back to it
        obj.__dict__.update(self.decode(node["state"]))
        return obj

    def _key(self, node):
        key = self.decode(node)
        return tuple(key) if isinstance(key, list) else key
