"""What ``--model``, ``--kernel``, ``--method``, ``--game`` and ``--n-inducing`` accept, read
off the registries (model families, explanation methods, Shapley games) and checked together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpexplain.explain.methods import METHODS
from gpexplain.functionals.games import GAMES
from gpexplain.models.families import (
    DEFAULT_N_INDUCING,
    FAMILIES,
    PRODUCT_KERNELS,
    ModelFamily,
    Settings,
)

__all__ = [
    "DEFAULT_BACKGROUND",
    "DEFAULT_GAME",
    "GAME_CHOICES",
    "KERNEL_CHOICES",
    "MODEL_HELP",
    "METHOD_CHOICES",
    "MODEL_CHOICES",
    "MULTI_OUTPUT_CHOICES",
    "Choice",
    "check_choice",
    "check_device_task",
    "family",
]

DEFAULT_BACKGROUND = 50
DEFAULT_GAME = "interventional"
# Each family's own name, and the --model values that choose a classification family.
MODEL_CHOICES = tuple(dict.fromkeys(
    cli_name for name, entry in FAMILIES.items() for cli_name in entry.cli_names or (name,)
))
KERNEL_CHOICES = tuple(dict.fromkeys(
    kernel for _, entry in FAMILIES.items() if isinstance(entry.kernels, tuple)
    for kernel in entry.kernels
))
METHOD_CHOICES = ("auto", *(method.cli_name for _, method in METHODS.items() if method.cli_name))
_MODELS = [f"{name} ({entry.summary})" if entry.summary else name
           for name, entry in FAMILIES.items() if entry.task == "regression"]
MODEL_HELP = f"GP model: {', '.join(_MODELS[:-1])} or {_MODELS[-1]}."
GAME_CHOICES = (DEFAULT_GAME, *(name for name in GAMES.names() if name != DEFAULT_GAME))
# The forms of a model of several --target columns some family fits (its first: the default).
MULTI_OUTPUT_CHOICES = tuple(dict.fromkeys(
    form for _, entry in FAMILIES.items() for form in entry.multi_output
))


def cli_method(name: str) -> str:
    """The ``--method`` value of a family's method; a method no ``--method`` names (GPX's
    contributions, reached by ``auto``) keeps its own name."""
    return METHODS.get(name).cli_name or name if name in METHODS else name


def family(model: str, task: str = "regression") -> ModelFamily:
    """The family that ``--model model`` fits to a target of ``task``.

    Raises
    ------
    ValueError
        No family of that task is chosen by ``model`` (the message names the alternative).
    """
    for name, entry in FAMILIES.items():
        if entry.task == task and model in (entry.cli_names or (name,)):
            return entry
    raise ValueError(
        f"--model {model} is a regression model; a classification target is fitted by the "
        "sparse variational GP classifier (leave --model at its default, or use --task "
        "regression)"
    )


@dataclass(frozen=True)
class Choice:
    """A validated combination of command-line options."""

    model: str
    kernel: str
    method: str
    seed: int
    n_inducing: int
    options: dict = field(default_factory=dict)
    n_inducing_given: bool = False
    multi_output: str = MULTI_OUTPUT_CHOICES[0]
    rank: int | None = None  # --rank of --multi-output icm or lmc (None: full rank)
    device: str | None = None  # --device of --model exact (None: NumPy on the CPU)
    n_components: int | None = None  # --n-components of --multi-output lmc (None: 2)

    @property
    def kernel_label(self) -> str:
        """The kernel as reported: the --kernel choice, or the model's own kernel."""
        own = family(self.model).kernels
        return own if isinstance(own, str) else self.kernel

    @property
    def uses_baseline(self) -> bool:
        """Integrated gradients and the baseline game need a baseline; other Shapley values and
        GPX weights do not."""
        return self.method == "ig" or self.options.get("game") == "baseline"

    def settings(self, n_rows: int) -> Settings:
        """The family-independent estimator settings, for ``n_rows`` training rows."""
        return Settings(self.kernel, self.seed, n_rows, self.n_inducing, self.n_inducing_given,
                        self.device)


def _one_of(value: str, allowed, option: str) -> str:
    text = value.strip().lower()
    if text not in allowed:
        raise ValueError(f"unknown {option} {value!r}; use {', '.join(allowed)}")
    return text


def check_choice(
    model: str, kernel: str, method: str, seed: int, n_inducing: int | None,
    game: str | None = None, background: int | None = None,
    multi_output: str = MULTI_OUTPUT_CHOICES[0], rank: int | None = None,
    device: str | None = None, n_components: int | None = None,
) -> Choice:
    """Validate the options together; ValueError names the option and what is accepted.
    (Whether ``multi_output`` applies, and whether ``rank`` is at most the number of targets,
    depends on the targets: ``gpexplain.cli.multi_output.check_targets``.)"""
    model = _one_of(model, MODEL_CHOICES, "--model")
    multi_output = _one_of(multi_output, MULTI_OUTPUT_CHOICES, "--multi-output")
    _check_rank(rank, multi_output)
    _check_n_components(n_components, multi_output)
    kernel = _one_of(kernel, KERNEL_CHOICES, "--kernel")
    method = _one_of(method, METHOD_CHOICES, "--method")
    chosen = family(model)
    kernels = chosen.kernels
    if isinstance(kernels, str):
        if kernel != KERNEL_CHOICES[0]:
            raise ValueError(
                f"--kernel {kernel} does not apply to --model {model}, whose kernel is its own "
                f"({kernels}); leave --kernel at its default"
            )
    elif kernel not in kernels:
        raise ValueError(f"--model {model} supports --kernel {', '.join(kernels)}, not {kernel}")
    methods = tuple(map(cli_method, chosen.methods))
    if method == "auto":
        method = methods[0]
    elif method not in methods:
        accepted = " or ".join(m for m in methods if m in METHOD_CHOICES) or "auto"
        raise ValueError(f"--method {method} does not apply to --model {model}; use {accepted}")
    if seed < 0:
        raise ValueError(f"--seed must be an integer >= 0, got {seed}")
    # Whether the family fitted takes --n-inducing is known once the task is (the default
    # --model fits the classifier to a class target): check_n_inducing then.
    if n_inducing is not None and not any(
        "n_inducing" in entry.options and model in (entry.cli_names or (name,))
        for name, entry in FAMILIES.items()
    ):
        raise ValueError(_n_inducing_refusal())
    if n_inducing is not None and n_inducing < 1:
        raise ValueError(f"--n-inducing must be a positive integer, got {n_inducing}")
    options = {}
    # A family with a kernel of its own (the additive GP) has its own game; the others play
    # one of the product-kernel games.
    if method in ("shapley", "interactions") and not isinstance(kernels, str):
        game = _one_of(game or DEFAULT_GAME, GAME_CHOICES, "--game")
        if background is not None and (game != "interventional" or background < 1):
            raise ValueError(
                "--background N (a positive number of rows) applies to --game interventional only"
            )
        if kernel not in PRODUCT_KERNELS:
            raise ValueError(
                f"--method {method} needs a product kernel (--kernel ard or isotropic); --kernel "
                f"{kernel} is a function of the joint distance of all features: use --method ig"
            )
        options = {"game": game, "background": background or DEFAULT_BACKGROUND, "seed": seed}
    elif game is not None or background is not None:
        raise ValueError("--game and --background apply to --model exact --method shapley only "
                         "(or --method interactions)")
    if device is not None:
        _check_device(device, model, multi_output)
    return Choice(model, kernel, method, seed, n_inducing or DEFAULT_N_INDUCING, options,
                  n_inducing is not None, multi_output, rank, device, n_components)


def _check_device(device: str, model: str, multi_output: str) -> None:
    """ValueError for a ``--device`` torch does not know or this machine lacks, or given
    where no posterior runs on a device (another --model, or a coregionalised
    --multi-output: icm, lmc)."""
    from gpexplain.posterior.device import check_device

    if "device" not in family(model).options:
        raise ValueError(f"--device applies to --model {_taking('device')} (the exact GP's "
                         f"conditioning and solves), not to --model {model}")
    if multi_output != MULTI_OUTPUT_CHOICES[0]:
        raise ValueError(f"--device does not apply to --multi-output {multi_output} yet (its "
                         "posterior is NumPy on the CPU)")
    try:
        check_device(device)
    except ValueError as error:
        raise ValueError(f"--device: {error}") from None


def _check_rank(rank, multi_output: str) -> None:
    """ValueError for a ``--rank`` that is not a positive integer, or given without
    a coregionalised ``--multi-output`` (icm, lmc; independent outputs have no
    coregionalisation matrix)."""
    if rank is None:
        return
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"--rank must be a positive integer (the rank of the ICM's "
                         f"coregionalisation matrix), got {rank!r}")
    if multi_output == MULTI_OUTPUT_CHOICES[0]:
        raise ValueError(f"--rank applies to --multi-output icm or lmc (the rank of the "
                         f"coregionalisation matrices B = W W^T + diag(v)), not to "
                         f"--multi-output {multi_output}")


def _check_n_components(n_components, multi_output: str) -> None:
    """ValueError for an ``--n-components`` that is not a positive integer, or given without
    ``--multi-output lmc`` (the number of its terms)."""
    if n_components is None:
        return
    if isinstance(n_components, bool) or not isinstance(n_components, int) or n_components < 1:
        raise ValueError(f"--n-components must be a positive integer (the number of the LMC's "
                         f"terms), got {n_components!r}")
    if multi_output != "lmc":
        raise ValueError(f"--n-components applies to --multi-output lmc (the number of its "
                         f"terms), not to --multi-output {multi_output}")


def check_device_task(choice: Choice, task: str) -> None:
    """ValueError when --device was given for a class target (the classifier is a sparse
    variational GP, not the exact one)."""
    if choice.device is not None and task == "classification":
        raise ValueError("--device applies to the exact GP of a numeric target, not to the "
                         "classifier of a class target")


def check_n_inducing(choice: Choice, task: str) -> None:
    """ValueError when --n-inducing was given and the family fitted for ``task`` has no
    inducing points (several targets: the regression family of ``--model``)."""
    fitted = "classification" if task == "classification" else "regression"
    if choice.n_inducing_given and "n_inducing" not in family(choice.model, fitted).options:
        raise ValueError(_n_inducing_refusal())


def _n_inducing_refusal() -> str:
    return (f"--n-inducing applies to --model {_taking('n_inducing')} and to the classifier "
            "of a class target only")


def _taking(option: str) -> str:
    """The regression families that take ``option``, as ``--model`` names them."""
    return ", ".join(name for name, entry in FAMILIES.items()
                     if entry.task == "regression" and option in entry.options)
