"""Explanations of a multi-output posterior: every output, and the covariance across outputs.

For a coregionalised posterior (``gpexplain.posterior.multi_output.CoregionalizedPosterior``,
ICM ``k((x, i), (x', j)) = B_ij k(x, x')``, or ``gpexplain.posterior.lmc.LMCPosterior``, LMC
``k((x, i), (x', j)) = sum_q B^q_ij k_q(x, x')``) the functional is bound once to each term's
*input* kernel k_q on the augmented training inputs (the same closed forms and quadrature
schemes as a single-output GP; ``gpexplain.functionals.terms.TermSum``), and per chunk of query
points

    C_i[p, a, n]          = sum_q B^q[i, task_n] (L_a k_q(., x_n))(x_p)     cross term of output i
    mean[p, i, a]         = C_i[p, a, :] alpha
    cov[p, (i, a), (j, b)] = sum_q B^q_ij (L_a L_b' k_q)(x_p) - C_i[p, a, :] K^{-1} C_j[p, b, :]^T

(Alvarez, Rosasco and Lawrence, *Kernels for vector-valued functions: a review*, 2012, eq. 4.3
for the ICM predictive covariance, Sec. 4.2 for the LMC; the functional form is the generic
formula of DESIGN.md on the augmented representer form). Each output's result is then
finished like a single-output one (finite check, completeness against that output's marginal
posterior, warnings).

With ``return_cov="points"`` the same formula holds between two points: for outputs i, j,
features a, b and points x_p, x_q,

    Cov[L_a f_i(x_p), L_b f_j(x_q)] = sum_q B^q_ij (L_a L_b' k_q)(x_p, x_q)
                                      - C_i[p, a, :] K^{-1} C_j[q, b, :]^T

(the functional's two-point prior term, ``Scheme.prior_between``). ``_StackedOutputs`` presents
the t outputs' D values as one functional of t D values (index ``i D + a``) to
``gpexplain.explain._points.PointCovariance``, which evaluates the joint covariance across
points, outputs and features block by block of points, memory bounded by its block size
(``MultiOutputAttribution.joint_point_cov``). Its diagonal output blocks (i = j) are each
output's ``point_cov``, its diagonal point blocks (p = q) the joint covariance at each point.

Independent outputs are explained one by one through the single-output driver; their
covariance across outputs (at a point or across points) is zero by the model and is not
computed. Streamed to Parquet (``output_path=``), every output's chunk is evaluated per block
of points instead (``_independent_chunk``, the single-output chunk once per output), so that a
row of the file holds all outputs and memory stays bounded by the chunk size; a coregionalised
posterior's chunks hold every output already.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from gpexplain.explain._chunks import ChunkTask, explain_chunk
from gpexplain.explain._parquet import write_parquet
from gpexplain.explain._points import PointCovariance
from gpexplain.explain._result import finished_attribution
from gpexplain.functionals.base import LinearFunctional
from gpexplain.functionals.terms import TermSum
from gpexplain.multi_output_attribution import MultiOutputAttribution
from gpexplain.parallel import concatenate_chunks, default_chunk_size, iter_chunks

__all__ = ["explain_multi_output"]


def explain_multi_output(posterior, X, functional: LinearFunctional, *, explain_one, outputs,
                         return_cov: bool, chunk_size, caller: str,
                         client=None, output_path=None) -> MultiOutputAttribution | Path:
    """Explain the selected outputs of ``posterior`` at X (see the module docstring).

    Parameters
    ----------
    posterior : MultiOutputPosterior
    X : array-like (n_points, n_features)
    functional : LinearFunctional
    explain_one : callable
        The single-output driver (``gpexplain.explain._driver.explain``), for independent
        outputs.
    outputs : output name, index, or sequence of them, or None (all)
    return_cov : bool or "points"
        "points": also each output's covariance across points (``point_cov`` of each
        output's ``Attribution``, from its marginal posterior) and, for a coregionalised
        posterior, the joint one across points, outputs and features
        (``MultiOutputAttribution.joint_point_cov``; None for independent outputs, whose
        blocks between outputs are zero by the model). Not with ``output_path``.
    chunk_size, caller, client : as in ``gpexplain.explain._driver.explain`` (on a cluster,
        independent outputs' chunks run output after output; a coregionalised posterior's
        chunks hold every output, and its covariances across points are evaluated there too)
    output_path : pathlib.Path, optional
        From ``check_output_path``: stream every output's results to this Parquet file chunk
        by chunk (the multi-output layout of ``gpexplain.explain._parquet``) and return it;
        each chunk holds every selected output (independent outputs too, evaluated block by
        block), so memory stays bounded by the chunk size.

    Returns
    -------
    MultiOutputAttribution, or the ``pathlib.Path`` written with ``output_path``.

    Raises
    ------
    ValueError, TypeError
        Bad ``outputs`` (named), and everything the single-output driver raises.
    NotImplementedError
        ``return_cov="points"`` with a functional without a two-point prior term (when the
        blocks are evaluated).
    """
    index = posterior.output_index(outputs)
    names = [posterior.output_names[i] for i in index]
    if posterior.independent and output_path is None:
        parts = [
            explain_one(posterior.marginal(i), X, functional, return_cov=return_cov,
                        chunk_size=chunk_size, client=client, caller=caller)
            for i in index
        ]
        return MultiOutputAttribution(parts, names, None, independent=True)
    points = return_cov == "points"
    return_cov = True if points else return_cov
    marginals = [posterior.marginal(i) for i in index]
    if posterior.independent:
        function, context, terms, training_rows, copies = _independent_context(
            marginals, functional, return_cov)
    else:
        function, context, terms, training_rows, copies = _coregionalized_context(
            posterior, marginals, functional, index, return_cov)
    X = posterior.check_inputs(X)
    if chunk_size is None:
        chunk_size = default_chunk_size(training_rows, X.shape[1], copies_per_point=copies)
    chunks = iter_chunks(function, context, X, chunk_size, client=client,
                         training_rows=training_rows)
    if output_path is not None:
        return write_parquet(output_path, chunks, functional.output_names(marginals[0]), caller,
                             output_names=names, independent=posterior.independent)
    mean, cov, prediction, reference, difference_variance = concatenate_chunks(chunks)
    parts = [
        finished_attribution(
            caller, functional, X, mean=mean[:, k],
            cov=None if cov is None else np.ascontiguousarray(cov[:, k, :, k, :]),
            prediction=prediction[:, k],
            baseline_prediction=None if reference is None else float(reference[0, k]),
            feature_names=functional.output_names(marginal), method=functional.describe(terms),
            difference_variance=None if difference_variance is None else difference_variance[:, k],
            check_completeness=functional.complete, posterior=marginal,
        )
        for k, marginal in enumerate(marginals)
    ]
    joint_point_cov = None
    if points:  # each output's own, through its marginal's representer form, and the joint
        Z = posterior.train_inputs
        parts = [replace(part, point_cov=PointCovariance(
                     marginal, functional.bind(marginal.kernel, Z), functional, X,
                     client=client))
                 for part, marginal in zip(parts, marginals, strict=True)]
        stacked = _StackedOutputs(posterior, terms, functional, index)
        joint_point_cov = PointCovariance(posterior, stacked, stacked, X, client=client)
    return MultiOutputAttribution(parts, names, cov, independent=False,
                                  joint_point_cov=joint_point_cov)


def _coregionalized_context(posterior, marginals, functional, index, return_cov):
    """The chunk function and context of a coregionalised posterior's selected outputs, its
    ``TermSum``, training rows and (n_train, D) slabs per point for the chunk size."""
    Z = posterior.train_inputs
    # What an output's marginal cannot be explained by (an LMC output's term form) is refused
    # by name before any work; the joint terms then bind each term's input kernel.
    functional.bind(marginals[0].kernel, Z)
    terms = output_terms(posterior, functional, index)
    context = (posterior, terms, functional, index, marginals, return_cov)
    return (_coregionalized_chunk, context, terms, len(Z),
            terms.copies_per_point() * (len(index) + 1))


def _independent_context(marginals, functional, return_cov):
    """The chunk function and context of independent outputs evaluated block by block
    (``_independent_chunk``): each output's ``ChunkTask`` (its own kernel and training set),
    no ``TermSum`` (None), the largest training set and the slabs of all outputs per point."""
    tasks, copies = [], 0
    for marginal in marginals:  # every output's kernel is checked before any work
        scheme = functional.bind(marginal.kernel, marginal.train_inputs)
        tasks.append(ChunkTask(marginal, scheme, functional, return_cov))
        copies += scheme.copies_per_point()
    rows = max(len(marginal.train_inputs) for marginal in marginals)
    return _independent_chunk, tuple(tasks), None, rows, copies


def _independent_chunk(block: np.ndarray, tasks) -> tuple:
    """Per block, every independent output through the single-output chunk
    (``gpexplain.explain._chunks.explain_chunk``), in ``_coregionalized_chunk``'s shapes;
    the covariance between outputs is zero by the model (filled, not computed)."""
    per_output = zip(*(explain_chunk(block, task) for task in tasks), strict=True)
    mean, cov, prediction, reference, difference_variance = (
        None if values[0] is None else np.stack(values, axis=1) for values in per_output)
    if cov is not None:  # (m, t, D, D) -> (m, t, D, t, D), zero off the output diagonal
        m, t, D = mean.shape
        joint = np.zeros((m, t, D, t, D))
        for k in range(t):
            joint[:, k, :, k, :] = cov[:, k]
        cov = joint
    return mean, cov, prediction, reference, difference_variance


class _StackedOutputs:
    """Outputs ``index`` of a coregionalised posterior explained by ``functional`` as one
    functional of t D values (value ``i D + a``: output i, feature a), for ``PointCovariance``,
    which reads from its scheme the cross terms, the two-point prior term and its price per
    pair of points, and from its functional the output weights, the names and ``n_steps``.

    Cross term ``sum_q B^q[i, task_n] (L_a k_q(., x_n))(x)`` over the augmented training set
    (with ``posterior.quadratic_form``'s K^{-1}); two-point prior term
    ``sum_q B^q_ij (L_a L_b' k_q)(x_p, x_q)``; both from ``terms`` (a ``TermSum``).
    """

    def __init__(self, posterior, terms, functional, index):
        self.terms, self.functional = terms, functional
        self.n_outputs = len(index)
        self.n_steps = getattr(functional, "n_steps", 1)
        self.names = [f"{posterior.output_names[i]}/{name}" for i in index
                      for name in functional.output_names(posterior)]

    @property
    def torch_kernel(self):  # named in PointCovariance's refusal of slow quadrature
        return self.terms.torch_kernel

    def cross(self, X: np.ndarray) -> np.ndarray:
        """(m, t D, N)."""
        stacked = self.terms.cross(X)  # (m, t, D, N)
        m, t, D, N = stacked.shape
        return stacked.reshape(m, t * D, N)

    def prior_between(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """(n1, n2, t D, t D)."""
        joint = self.terms.prior_between(X1, X2)  # (n1, n2, t, D, t, D)
        n1, n2, t, D = joint.shape[:4]
        return joint.reshape(n1, n2, t * D, t * D)

    def point_pair_seconds(self) -> float:
        return self.terms.point_pair_seconds()  # one prior term per pair serves all outputs

    def output_weights(self, X: np.ndarray) -> np.ndarray | None:
        weights = self.functional.output_weights(X)  # (m, D) or None
        return None if weights is None else np.tile(weights, (1, self.n_outputs))

    def output_names(self, posterior) -> list[str]:
        return list(self.names)


def output_terms(posterior, functional: LinearFunctional, index) -> TermSum:
    """The ``TermSum`` of ``functional`` for outputs ``index`` of a coregionalised posterior
    (``posterior.coregionalization_terms``: one term for the ICM, Q for the LMC).

    Raises
    ------
    TypeError
        No scheme for one of the terms' kernels (named by ``LinearFunctional.bind``).
    """
    kernels = [kernel for kernel, _ in posterior.coregionalization_terms]
    return TermSum(functional, kernels, posterior.train_inputs,
                   posterior.term_task_weights(index), posterior.term_coregionalizations(index))


def _coregionalized_chunk(block: np.ndarray, context) -> tuple:
    """Per block: mean (m, t, D), joint cov (m, t, D, t, D) or None, prediction (m, t), and
    per output the completeness reference and difference variance ((m, t) or None)."""
    posterior, terms, functional, index, marginals, return_cov = context
    if return_cov:
        stacked, prior = terms.cross_and_prior(block)  # (m, t, D, N), (m, t, D, t, D)
    else:
        stacked, prior = terms.cross(block), None
    mean = stacked @ posterior.alpha
    m, t, D, N = stacked.shape
    cov = None
    if prior is not None:
        flat = stacked.reshape(m, t * D, N)
        joint = prior.reshape(m, t * D, t * D) - posterior.quadratic_form(flat)
        cov = (0.5 * (joint + np.swapaxes(joint, 1, 2))).reshape(m, t, D, t, D)
    output_weights = functional.output_weights(block)
    if output_weights is not None:
        mean = mean * output_weights[:, None, :]
        if cov is not None:
            cov = (cov * output_weights[:, None, :, None, None]
                   * output_weights[:, None, None, None, :])
    prediction = posterior.mean[index][None, :] + terms.kernel_matrix(block) @ posterior.alpha
    targets = [functional.completeness_target(marginal, block, return_cov)
               for marginal in marginals]
    reference = (None if targets[0][0] is None
                 else np.tile(np.array([target[0] for target in targets]), (m, 1)))
    difference_variance = (None if targets[0][1] is None
                           else np.stack([target[1] for target in targets], axis=1))
    return mean, cov, prediction, reference, difference_variance
