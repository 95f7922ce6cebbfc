"""Gaussian expectations of a classifier's link function and of its derivatives.

A GP classifier predicts through a link: ``p(x) = sigma(f(x))`` (binary: logistic or probit
sigma, latent f = log-odds of the positive class) or ``p_c(x) = S_c(f_1(x), ..., f_C(x))``
(softmax over C independent latent GPs). Under the latent Gaussian posterior the class
probability and its input gradient are not Gaussian; what is exact is their expectation.
Seitz, *Gradient-based explanations for Gaussian process regression and classification models*
(2022), Sec. 5, eqs. 27-30, with the corrections of docs/errata.md. These expectations are
written once, here, and shared by the classifier's ``predict_proba`` (through its likelihood,
``gpexplain.likelihoods``) and the probability-level explanations, so both give one number.

One concept per module:

* ``base``: the ``Link`` base, its ``Form`` (exact quadrature or Taylor, chosen once), the
  registry ``LINKS`` and ``get_link``, and the adaptive one-dimensional Gauss-Hermite rule;
* ``binary``: what logit and probit share (Stein's lemma for the expected gradient and its
  covariance, the bivariate ``pair_expectations``); ``logit`` and ``probit`` their rules;
* ``softmax`` and ``difference_rule``: the softmax and its product trapezoid over class
  differences (randomised QMC above ``max_tensor_classes``);
* ``taylor``: the paper's second-order Taylor forms (eqs. 33 and 37), for comparison only:
  they err by more than 10% once the latent variance approaches 1.

A new link is one module defining a ``Link`` subclass with its forms, registered with
``@LINKS.register("name")``, and an import here.
"""

from gpexplain.links.base import APPROXIMATIONS, LINKS, Link, get_link
from gpexplain.links.binary import PAIR_ORDERS, BinaryLink
from gpexplain.links.logit import Logit
from gpexplain.links.probit import Probit
from gpexplain.links.softmax import Softmax, softmax_class_derivatives

__all__ = ["APPROXIMATIONS", "LINKS", "PAIR_ORDERS", "BinaryLink", "Link", "Logit", "Probit",
           "Softmax", "get_link", "softmax_class_derivatives"]
