"""``gpexplain explain --save-model DIR`` and ``--model-from DIR``.

A saved model directory is what ``model.save(DIR)`` writes (``gpexplain.persistence``), plus
``cli.json``: the command-line choices that built it (model, kernel, method, seed), the
target column and the ``--missing`` policy, so that ``--model-from`` explains new rows with the
same options and writes the same summary, without refitting. A table with text columns saves
the fitted ``gx.make_pipeline`` of its encoder and the model (``CategoricalPipeline.save``), so
that the same file's text columns are encoded as in the fit. A directory saved from Python (no
``cli.json``; an estimator or a fitted pipeline) works too: the model option is read off the
estimator's class. A saved ``GPClassifier`` explains in the classification mode (``--model
exact`` or ``sparse`` both fit it; ``cli.json`` says which); a model of several targets (a
``GPRegressor`` fitted on a 2-D y) in the multi-output mode, its targets its output names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
from sklearn.base import clone

from gpexplain.cli.choices import MULTI_OUTPUT_CHOICES, Choice, check_choice
from gpexplain.encoding import CategoricalEncoder
from gpexplain.models.families import FAMILIES
from gpexplain.persistence import load
from gpexplain.pipeline import CategoricalPipeline

__all__ = ["Saved", "load_model", "save_model", "saved_features", "task_of"]

CHOICES_FILE = "cli.json"


def _family_of(model) -> tuple[str, object] | None:
    """``(name, family)`` of the estimator ``model`` is an instance of, or None."""
    for name, entry in FAMILIES.items():
        if type(model) is entry.estimator:
            return name, entry
    return None


def task_of(model) -> str:
    """The task a saved estimator was fitted for (its family's; ``"multi-output"`` for a
    model of several targets)."""
    if getattr(model, "output_names_", None) is not None:
        return "multi-output"
    return _family_of(model)[1].task


@dataclass
class Saved:
    """What ``load_model`` read: the fitted estimator, the encoder of the table's text columns
    (None: the estimator's features are the table's columns), the choices, the target and
    the ``--missing`` policy of the fit (None when not recorded)."""

    model: object
    encoder: CategoricalEncoder | None
    choice: Choice
    target: str | list[str] | None
    missing: str | None


def save_model(model, encoder: CategoricalEncoder, choice: Choice, target: str | list[str],
               missing: str, directory: Path) -> None:
    """Save ``model`` (with ``encoder`` when the table has text columns, as a fitted
    ``CategoricalPipeline``) plus the choices, target and ``missing`` policy in ``cli.json``."""
    if encoder.categorical_:
        pipeline = CategoricalPipeline(clone(model))
        pipeline.encoder_, pipeline.estimator_ = encoder, model
        pipeline.save(directory)
    else:
        model.save(directory)
    record = {
        "model": choice.model, "kernel": choice.kernel, "method": choice.method,
        # None: the family's own default (the classifier's is chosen from the rows).
        "seed": choice.seed, "n_inducing": choice.n_inducing if choice.n_inducing_given else None,
        "target": target,
        "missing": missing.strip().lower(), "multi_output": choice.multi_output,
        "rank": choice.rank, "n_components": choice.n_components,
    }
    (directory / CHOICES_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def load_model(directory: Path, method: str, game: str | None = None,
               background: int | None = None) -> Saved:
    """The saved model, its encoder, its Choice with ``method`` (and Shapley ``game``,
    ``background``) applied, and the saved target and ``--missing`` policy (or None).

    Raises
    ------
    FileNotFoundError, ValueError, TypeError
        Nothing saved there, an unreadable or incompatible save (``gx.load``), something
        other than an estimator of the command line, or a ``method`` the model lacks.
    """
    model, encoder = load(directory), None
    if isinstance(model, CategoricalPipeline):
        model, encoder = model.estimator_, model.encoder_
    record_path = directory / CHOICES_FILE
    record = json.loads(record_path.read_text(encoding="utf-8")) if record_path.is_file() else {}
    found = _family_of(model)
    if found is None:
        models = ", ".join(name for name, entry in FAMILIES.items() if entry.task == "regression")
        raise TypeError(
            f"--model-from {directory} holds a {type(model).__name__}, not a fitted model of "
            f"--model {models} or a GPClassifier"
        )
    name, entry = found
    outputs = getattr(model, "output_names_", None)
    # A model of several targets: its form is the estimator's own parameter.
    multi_output = model.multi_output if outputs is not None else MULTI_OUTPUT_CHOICES[0]
    # Its --rank too (a coregionalised model's only: independent outputs ignore it).
    rank = (model.rank if outputs is not None and multi_output != MULTI_OUTPUT_CHOICES[0]
            else None)
    n_components = model.n_components if multi_output == "lmc" else None
    # The --model option: the family's own, or for the classifier the one cli.json names.
    options = entry.cli_names or (name,)
    option = record.get("model") if record.get("model") in options else options[0]
    if record.get("model", option) != option:
        raise ValueError(
            f"{record_path} says --model {record['model']} but the saved model is a "
            f"{type(model).__name__}"
        )
    # The kernel option is the estimator's own parameter (a name, for models the command line
    # built); a kernel object passed from Python is reported as such.
    own_kernel = isinstance(entry.kernels, str)
    named = isinstance(model.__dict__.get("kernel"), str) or own_kernel
    choice = check_choice(
        option, "ard" if own_kernel or not named else model.kernel, method,
        record.get("seed", 0),
        record.get("n_inducing") if "n_inducing" in FAMILIES.get(option).options else None,
        game, background, multi_output, rank, n_components=n_components,
    )
    if not named:
        choice = replace(choice, kernel=f"{type(model.kernel).__name__} (saved from Python)")
    target = record.get("target") if outputs is None else list(outputs)
    return Saved(model, encoder, choice, target, record.get("missing"))


def saved_features(frame: pd.DataFrame, saved: Saved,
                   target: str | list[str] | None) -> pd.DataFrame:
    """The saved model's feature columns of ``frame`` (those its encoder was fitted on, where
    it has one), matched by name.

    The target columns (when present) are dropped; any other column the model was not
    fitted on is refused, like a missing one: explaining rows of another table would be
    silently wrong.

    Raises
    ------
    ValueError
        Missing or extra columns (named).
    """
    frame = frame.set_axis([str(c) for c in frame.columns], axis=1)
    names = list(saved.model.feature_names_in_ if saved.encoder is None
                 else saved.encoder.columns_)
    missing = [name for name in names if name not in frame.columns]
    targets = target if isinstance(target, list) else [target]
    extra = [c for c in frame.columns if c not in names and c not in targets]
    if missing or extra:
        problems = []
        if missing:
            problems.append("missing " + ", ".join(repr(c) for c in missing))
        if extra:
            problems.append("not in the model " + ", ".join(repr(c) for c in extra))
        raise ValueError(
            f"the data's columns do not match the saved model's features ({'; '.join(problems)}); "
            f"the model was fitted on {', '.join(repr(c) for c in names)}"
            + (f" with target {target!r}" if target else "")
        )
    return frame[names]
