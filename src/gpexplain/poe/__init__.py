"""Property-optimised explanations (POE; Tadesse et al., *Transparent trade-offs between
properties of explanations*, 2025).

Users state the mix of properties they need (weights lambda of faithfulness, robustness,
smoothness and complexity) and get the explanations optimal for exactly that mix, with the
properties reported:

* ``losses`` / ``objective``: the six properties of Table 2;
* ``transductive``: optimal explanations of a fixed set of points (Sec. 5);
* ``similarity``: similarities between points or features (Gaussian, uniform, k-NN,
  negative kernel precision);
* ``InductivePOE``: an explanation function by GP inference (Sec. 4), with covariance;
* ``gradients_and_values`` / ``as_target``: f and grad f of a GP model, a torch function or
  user callables;
* baselines: ``smoothgrad``, ``lime`` (with intercept), ``lime_no_intercept`` (the paper's
  equation), ``agg``, ``mofae`` (NSGA-II by pymoo).
"""

from gpexplain.explain.methods import Reference
from gpexplain.poe import similarity
from gpexplain.poe._inputs import PROPERTIES, POESolverError
from gpexplain.poe.baselines import agg, lime, lime_no_intercept, smoothgrad
from gpexplain.poe.inductive import InductivePOE, LocalInducingPoints, local_inducing_points
from gpexplain.poe.losses import losses, objective
from gpexplain.poe.mofae import MOFAEResult, mofae
from gpexplain.poe.target import Target, as_target, gradients_and_values
from gpexplain.poe.transductive import POEResult, transductive

#: What the ``poe`` command's summary (and so its HTML report) cites.
REFERENCES = (Reference("H. Tadesse, A. Hüyük, Y. Yacoby, W. Pan, F. Doshi-Velez",
                        "Transparent trade-offs between properties of explanations", 2025),)

__all__ = [
    "REFERENCES",
    "InductivePOE",
    "LocalInducingPoints",
    "MOFAEResult",
    "PROPERTIES",
    "POEResult",
    "POESolverError",
    "Target",
    "agg",
    "as_target",
    "gradients_and_values",
    "lime",
    "lime_no_intercept",
    "local_inducing_points",
    "losses",
    "mofae",
    "objective",
    "similarity",
    "smoothgrad",
    "transductive",
]
