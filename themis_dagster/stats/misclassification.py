"""Shares judged by a model, corrected for the judge's errors measured on a calibration set.

A judge that calls 20% of truly negative-regard continuations "negative" inflates the negative
share of every group by a different amount (it depends on each group's true share), so gaps
between groups are biased too. Given the judge's error rates from human-labelled calibration
rows, the share the judge reports can be mapped back to the true share: Rogan-Gladen for one
judged class, the inverted confusion matrix for a full label set.

The CI resamples both sources of error: the evaluated items (the observed share) and the
calibration rows (the error rates). A judge no better than chance, or a confusion matrix that
cannot be inverted reliably, yields no corrected value and a reason, never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from themis_dagster.stats import DEFAULT_RESAMPLING, Resampling
from themis_dagster.stats.agreement import label_codes

# Largest 2-norm condition number of P(judge | truth) that is inverted: beyond it the correction
# multiplies the sampling error of the observed shares more than a thousandfold.
MAX_CONDITION = 1e3


@dataclass(frozen=True)
class CorrectedShare:
    """The true share of ``label`` among the judged items, estimated from the judge's share and its errors.

    ``value`` and the CI are None with ``reason`` saying why when no correction is possible.
    ``observed`` is the judge's own (uncorrected) share. ``resamples_dropped`` counts bootstrap
    replicates whose resampled calibration rows left the correction undefined (left out of the CI).
    """

    label: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    observed: float | None
    n_items: int
    n_calibration: int
    reason: str | None = None
    resamples_dropped: int = 0


def rogan_gladen(p_obs: float, sensitivity: float, specificity: float) -> float | None:
    """True prevalence from an apparent one (Rogan & Gladen 1978), clipped to [0, 1]; None if Se + Sp <= 1.

    Rogan, W. J. & Gladen, B. (1978), "Estimating prevalence from the results of a screening test",
    American Journal of Epidemiology 107(1):71-76:

        p_true = (p_obs + Sp - 1) / (Se + Sp - 1)

    with p_obs the share the test (the judge) calls positive, Se = P(judged positive | positive),
    Sp = P(judged negative | negative). The estimate leaves [0, 1] when p_obs lies outside
    [1 - Sp, Se] and is clipped to the nearest bound (the maximum-likelihood estimate there). A test
    with Se + Sp <= 1 is no better than chance: the ratio is undefined or reverses, so None.
    """
    youden = sensitivity + specificity - 1.0
    if not youden > 0:
        return None
    return float(np.clip((p_obs + specificity - 1.0) / youden, 0.0, 1.0))


def project_to_simplex(values: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row onto the probability simplex (nonnegative, summing to 1).

    The sort-based algorithm of Wang & Carreira-Perpinan (2013), "Projection onto the probability
    simplex: an efficient algorithm with a simple proof", arXiv:1309.1541: the closest vector of
    shares to an inverted estimate that left the simplex.
    """
    v = np.atleast_2d(np.asarray(values, dtype=float))
    k = v.shape[-1]
    u = -np.sort(-v, axis=-1)
    excess = np.cumsum(u, axis=-1) - 1.0
    positive = u - excess / np.arange(1, k + 1) > 0
    rho = k - 1 - np.argmax(positive[..., ::-1], axis=-1)
    theta = np.take_along_axis(excess, rho[..., None], axis=-1) / (rho[..., None] + 1)
    projected: np.ndarray = np.maximum(v - theta, 0.0).reshape(np.shape(values))
    return projected


def _refusal(conditional: np.ndarray, row_counts: np.ndarray, labels: Sequence[str]) -> str | None:
    """Why ``P(judge | truth)`` cannot be inverted (None when it can)."""
    for i, label in enumerate(labels):
        if row_counts[i] == 0:
            return f"the calibration rows hold no human {label!r} label: P(judge | true {label!r}) is unmeasured"
    for j, label in enumerate(labels):
        if not conditional[:, j].any():
            return f"the judge never answered {label!r} on the calibration rows: its confusion matrix is singular"
    for j, label in enumerate(labels):
        others = np.delete(conditional[:, j], j)
        if conditional[j, j] <= others.max():
            i = int(np.argmax(np.where(np.arange(len(labels)) == j, -np.inf, conditional[:, j])))
            return (
                f"the judge is no better than chance at {label!r}: it answers {label!r} for "
                f"{conditional[i, j]:.3f} of true {labels[i]!r} rows but only {conditional[j, j]:.3f} of true "
                f"{label!r} rows"
            )
    with np.errstate(divide="ignore", invalid="ignore"):
        condition = float(np.linalg.cond(conditional))
    if not condition <= MAX_CONDITION:
        return f"the judge's confusion matrix is ill-conditioned (condition number {condition:.3g} > {MAX_CONDITION:g})"
    return None


def invert_confusion(observed: np.ndarray, conditional: np.ndarray) -> np.ndarray:
    """True shares ``t`` from observed judge shares ``o`` and ``M[i, j] = P(judge = j | true = i)``.

    The multi-class form of Rogan-Gladen (the "adjusted classify and count" of Forman 2008,
    "Quantifying counts and costs via classification", Data Mining and Knowledge Discovery
    17(2):164-206): the judge's shares are ``o = M^T t``, so ``t`` solves that linear system. The
    solution already sums to 1 (each row of M does) but may have negative entries from sampling
    error; it is projected onto the simplex (``project_to_simplex``: the nearest vector of shares,
    not clip-and-renormalise). With two labels this equals Rogan-Gladen with its clipping.
    Rows of ``observed``/``conditional`` may be stacked (bootstrap replicates).
    """
    solved = np.linalg.solve(np.swapaxes(conditional, -1, -2), observed[..., None])[..., 0]
    return project_to_simplex(solved)


def _check_pairs(human: Sequence[str], judge: Sequence[str]) -> None:
    if len(human) != len(judge):
        raise ValueError(f"{len(human)} human labels but {len(judge)} judge labels: they must pair row by row")


def _checked_labels(
    labels: Sequence[str], calibration_human: Sequence[str], calibration_judge: Sequence[str]
) -> tuple[str, ...]:
    """The declared label set, checked with the calibration pairs: every full-label-set correction starts here."""
    declared = tuple(labels)
    if len(declared) < 2 or len(set(declared)) != len(declared):
        raise ValueError(f"a label set needs at least two distinct labels, got {declared}")
    _check_pairs(calibration_human, calibration_judge)
    return declared


def _calibration_matrix(
    truth: np.ndarray, said: np.ndarray, labels: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, str | None]:
    """Calibration cell counts, ``M = P(judge | truth)`` and why M cannot be inverted (None when it can).

    Shared so that every correction measures and refuses the judge's matrix the same way.
    """
    k = len(labels)
    cells = np.bincount(truth * k + said, minlength=k * k).reshape(k, k)
    row_counts = cells.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        conditional = cells / row_counts[:, None]
    return cells, conditional, _refusal(conditional, row_counts, labels)


def _resampled_matrices(
    rng: np.random.Generator, cells: np.ndarray, n_resamples: int, labels: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap replicates of M (the calibration rows drawn as one multinomial) and which of them are usable.

    Why one helper: the corrections must draw the calibration rows identically for the same seed.
    """
    k = len(labels)
    n_calibration = int(cells.sum())
    cell_draws = rng.multinomial(n_calibration, cells.ravel() / n_calibration, size=n_resamples).reshape(-1, k, k)
    draw_rows = cell_draws.sum(axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        draw_conditional = cell_draws / draw_rows[..., None]
    usable = np.array([_refusal(m, r, labels) is None for m, r in zip(draw_conditional, draw_rows, strict=True)])
    return draw_conditional, usable


def widened_interval(replicates: np.ndarray, value: float, confidence: float) -> tuple[float | None, float | None]:
    """Percentile interval of the defined replicates, widened to hold the point value (as bootstrap_estimate).

    Public so that the judged metrics' corrections (``judging.correction``) report their CIs the same way.
    """
    if replicates.size == 0:
        return None, None
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(replicates, [tail, 100 - tail])
    return min(float(low), value), max(float(high), value)


def _no_value(
    labels: Sequence[str], observed: np.ndarray | None, n_items: int, n_calibration: int, reason: str
) -> tuple[CorrectedShare, ...]:
    return tuple(
        CorrectedShare(
            label,
            None,
            None,
            None,
            None if observed is None else float(observed[i]),
            n_items,
            n_calibration,
            reason,
        )
        for i, label in enumerate(labels)
    )


def corrected_prevalences(
    judged: Sequence[str],
    calibration_human: Sequence[str],
    calibration_judge: Sequence[str],
    labels: Sequence[str],
    *,
    resampling: Resampling = DEFAULT_RESAMPLING,
) -> tuple[CorrectedShare, ...]:
    """Each label's true share among the judged items, by inverting the judge's confusion matrix.

    ``judged`` holds the judge's labels of the evaluated items; ``calibration_human`` and
    ``calibration_judge`` the human and judge labels of the same calibration rows. The point value
    is ``invert_confusion`` of the judged shares and ``M = P(judge | truth)`` estimated from the
    calibration rows. It is refused (every share None, one reason) when a true label has no
    calibration row, the judge never gives some label, the judge answers some label j at least as
    often for another true label as for true j (with two labels: Se + Sp <= 1), or M's condition
    number exceeds ``MAX_CONDITION``.

    CI: a seeded percentile bootstrap that resamples, independently in each replicate, the judged
    items and the calibration rows, each with replacement at its own size. Resampling n rows and
    counting them is a multinomial draw of n over the observed cell shares, so each replicate draws
    the counts directly (the same distribution, without materialising rows). Replicates whose
    calibration rows are refused as above are left out and counted in ``resamples_dropped``.
    """
    declared = _checked_labels(labels, calibration_human, calibration_judge)
    k = len(declared)
    items = label_codes(judged, declared, "judged item")
    truth = label_codes(calibration_human, declared, "calibration human")
    said = label_codes(calibration_judge, declared, "calibration judge")
    n_items, n_calibration = int(items.size), int(truth.size)
    if n_items == 0:
        return _no_value(declared, None, 0, n_calibration, "no judged items")
    item_counts = np.bincount(items, minlength=k)
    observed = item_counts / n_items
    cells, conditional, reason = _calibration_matrix(truth, said, declared)
    if reason is not None:
        return _no_value(declared, observed, n_items, n_calibration, reason)
    point = invert_confusion(observed, conditional)

    rng = np.random.default_rng(resampling.seed)
    item_draws = rng.multinomial(n_items, observed, size=resampling.n_resamples) / n_items
    draw_conditional, usable = _resampled_matrices(rng, cells, resampling.n_resamples, declared)
    replicates = invert_confusion(item_draws[usable], draw_conditional[usable]) if usable.any() else np.empty((0, k))
    dropped = int(resampling.n_resamples - usable.sum())
    shares = []
    for i, label in enumerate(declared):
        low, high = widened_interval(replicates[:, i], float(point[i]), resampling.confidence)
        shares.append(
            CorrectedShare(label, float(point[i]), low, high, float(observed[i]), n_items, n_calibration, None, dropped)
        )
    return tuple(shares)


def corrected_share(
    judged: Sequence[str],
    calibration_human: Sequence[str],
    calibration_judge: Sequence[str],
    positive: str,
    *,
    resampling: Resampling = DEFAULT_RESAMPLING,
) -> CorrectedShare:
    """The true share of one judged class (``positive`` against every other label), by Rogan-Gladen.

    Se and Sp are measured one-vs-rest on the calibration rows: Se = P(judge says ``positive`` |
    human says ``positive``), Sp = P(judge says another label | human says another label). Sp then
    mixes the judge's errors on the other labels in the calibration set's proportions; when the
    evaluated items hold the other labels in very different proportions, prefer
    ``corrected_prevalences`` over the full label set.

    No value (a reason instead) when there are no judged items, the calibration rows hold no human
    ``positive`` label or no other label (Se or Sp unmeasured), or Se + Sp <= 1.

    CI: a seeded percentile bootstrap resampling, independently in each replicate, the judged
    items (a binomial draw of the judged-positive count) and the calibration rows (a multinomial
    draw of the TP/FN/FP/TN counts), i.e. resampling each with replacement at its own size.
    Replicates with Se + Sp <= 1 or an empty class are left out (``resamples_dropped``).
    """
    _check_pairs(calibration_human, calibration_judge)
    items = np.fromiter((label == positive for label in judged), dtype=bool, count=len(judged))
    truth = np.fromiter((label == positive for label in calibration_human), dtype=bool, count=len(calibration_human))
    said = np.fromiter((label == positive for label in calibration_judge), dtype=bool, count=len(calibration_judge))
    n_items, n_calibration = int(items.size), int(truth.size)
    if n_items == 0:
        return CorrectedShare(positive, None, None, None, None, 0, n_calibration, "no judged items")
    p_obs = float(items.mean())

    def no_value(reason: str) -> CorrectedShare:
        return CorrectedShare(positive, None, None, None, p_obs, n_items, n_calibration, reason)

    tp, fn = int((truth & said).sum()), int((truth & ~said).sum())
    fp, tn = int((~truth & said).sum()), int((~truth & ~said).sum())
    if tp + fn == 0:
        return no_value(f"the calibration rows hold no human {positive!r} label: sensitivity is unmeasured")
    if fp + tn == 0:
        return no_value(f"the calibration rows hold only human {positive!r} labels: specificity is unmeasured")
    sensitivity, specificity = tp / (tp + fn), tn / (fp + tn)
    value = rogan_gladen(p_obs, sensitivity, specificity)
    if value is None:
        return no_value(
            f"the judge is no better than chance at {positive!r}: sensitivity {sensitivity:.3f} + specificity "
            f"{specificity:.3f} <= 1, so Rogan-Gladen's denominator Se + Sp - 1 is not positive"
        )

    rng = np.random.default_rng(resampling.seed)
    p_draws = rng.binomial(n_items, p_obs, size=resampling.n_resamples) / n_items
    cells = rng.multinomial(n_calibration, np.array([tp, fn, fp, tn]) / n_calibration, size=resampling.n_resamples)
    positives, negatives = cells[:, 0] + cells[:, 1], cells[:, 2] + cells[:, 3]
    usable = (positives > 0) & (negatives > 0)
    se = cells[usable, 0] / positives[usable]
    sp = cells[usable, 3] / negatives[usable]
    p_draws = p_draws[usable]
    youden = se + sp - 1.0
    informative = youden > 0
    replicates = np.clip((p_draws[informative] + sp[informative] - 1.0) / youden[informative], 0.0, 1.0)
    low, high = widened_interval(replicates, value, resampling.confidence)
    dropped = int(resampling.n_resamples - replicates.size)
    return CorrectedShare(positive, value, low, high, p_obs, n_items, n_calibration, None, dropped)


@dataclass(frozen=True)
class GroupCorrection:
    """Corrected shares of several groups of judged items, under one calibration of the judge.

    ``point[g]`` and ``observed[g]`` are group g's corrected and judged shares of each label (in
    ``labels`` order); ``replicates[g]`` holds its corrected shares in every usable bootstrap
    replicate, row r of every group drawn with the same calibration resample, so a statistic across
    groups (a disparity, max - min) can be bootstrapped replicate by replicate. ``point`` is empty
    and ``reason`` says why when the judge's confusion matrix cannot be inverted.
    """

    labels: tuple[str, ...]
    observed: dict[str, np.ndarray]
    point: dict[str, np.ndarray]
    replicates: dict[str, np.ndarray]
    n_items: dict[str, int]
    n_calibration: int
    reason: str | None = None
    resamples_dropped: int = 0


def corrected_shares_by_group(
    groups: Mapping[str, Sequence[str]],
    calibration_human: Sequence[str],
    calibration_judge: Sequence[str],
    labels: Sequence[str],
    *,
    resampling: Resampling = DEFAULT_RESAMPLING,
) -> GroupCorrection:
    """``corrected_prevalences`` for several groups at once, sharing each bootstrap replicate's calibration draw.

    Each group's point value is ``invert_confusion`` of its judged shares and ``M = P(judge |
    truth)`` from the calibration rows (the multi-class Rogan-Gladen; Forman 2008), refused as in
    ``corrected_prevalences``. Why one call for all groups: every group is corrected with the same
    measured M, so its sampling error is shared; a gap between groups must be bootstrapped with
    one M draw per replicate for all of them, and the items of each group drawn independently
    (a multinomial draw at the group's size, as resampling its items with replacement). A group
    without items is left out. ``resampling.confidence`` is unused: callers take their CIs over
    ``replicates``.
    """
    declared = _checked_labels(labels, calibration_human, calibration_judge)
    k = len(declared)
    truth = label_codes(calibration_human, declared, "calibration human")
    said = label_codes(calibration_judge, declared, "calibration judge")
    n_calibration = int(truth.size)
    observed: dict[str, np.ndarray] = {}
    n_items: dict[str, int] = {}
    for name, judged in groups.items():
        codes = label_codes(judged, declared, f"judged item of {name!r}")
        if codes.size:
            observed[name] = np.bincount(codes, minlength=k) / codes.size
            n_items[name] = int(codes.size)
    if n_calibration == 0:
        empty = "no calibration rows to measure the judge on (none stored, or none of its answers could be read)"
        return GroupCorrection(declared, observed, {}, {}, n_items, 0, empty)
    cells, conditional, reason = _calibration_matrix(truth, said, declared)
    if reason is not None:
        return GroupCorrection(declared, observed, {}, {}, n_items, n_calibration, reason)
    point = {name: invert_confusion(shares, conditional) for name, shares in observed.items()}
    rng = np.random.default_rng(resampling.seed)
    draw_conditional, usable = _resampled_matrices(rng, cells, resampling.n_resamples, declared)
    replicates: dict[str, np.ndarray] = {}
    for name, shares in observed.items():
        item_draws = rng.multinomial(n_items[name], shares, size=resampling.n_resamples) / n_items[name]
        replicates[name] = (
            invert_confusion(item_draws[usable], draw_conditional[usable]) if usable.any() else np.empty((0, k))
        )
    dropped = int(resampling.n_resamples - usable.sum())
    return GroupCorrection(declared, observed, point, replicates, n_items, n_calibration, None, dropped)
