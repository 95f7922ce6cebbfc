"""Explanations of class probabilities: the link step of the explanation driver.

A GP classifier's class probability is ``p(x) = sigma(f(x))`` (binary) or
``S_c(f_1(x), ..., f_C(x))`` (softmax over independent latents). Its gradient is not a linear
functional of f, so the generic formula of the driver does not apply; what is exact is the
expectation under the latent Gaussian posterior (``gpexplain.links``). For a
``LinkedPosterior`` (``gpexplain.posterior.linked.resolve_output``) the driver calls
``explain_linked`` (``driver``), which

1. computes, per point, the joint Gaussian moments of ``f(x)`` and ``grad f(x)`` (mean,
   variance, ``E grad f``, ``Cov(f, grad f)`` and optionally ``Cov(grad f)``) from the
   posterior's representer form and the gradient functional's scheme for its kernel
   (``moments``), and maps them through the link;
2. hands them to the evaluator registered for the functional (``EVALUATORS``): expected
   gradients with their covariance (``gradient``) and integrated gradients of the expected
   probability with theirs (``integrated_gradient``; the exact covariance for binary links
   and the 2-class softmax in ``link_covariance``, the randomised-QMC estimate for softmax
   with C >= 3 in ``softmax_covariance``);
3. checks and builds the result as the Gaussian driver does.

A new probability-level explanation is one module with an evaluator registered under its
functional's class name, and an import here.
"""

from gpexplain.explain.linked import gradient, integrated_gradient
from gpexplain.explain.linked.driver import EVALUATORS, explain_linked, name_latent

__all__ = ["EVALUATORS", "explain_linked", "gradient", "integrated_gradient", "name_latent"]
