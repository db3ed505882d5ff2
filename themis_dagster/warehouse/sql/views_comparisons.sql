-- Paired comparisons, regression gates and checkpoint trends (docs/comparisons.md).

-- Holm's adjustment over a family of tests, written once for comparisons and perturbation_effects:
-- a family is the rows of one (family_a, family_b) that have a p-value; with its m p-values sorted
-- ascending (rank k; ties by task, metric, subset), p_adjusted = max over j <= k of min(1, (m - j + 1) p_(j)).
-- holm_rank is a row's rank k in its family; holm_adjusted its p_adjusted, given m and k (window
-- functions cannot nest, so a view computes m and k in one step and the adjustment in the next).
CREATE OR REPLACE MACRO holm_rank(p, family_a, family_b, task, metric, subset) AS
    row_number() OVER (PARTITION BY family_a, family_b ORDER BY p NULLS LAST, task, metric, subset NULLS FIRST);
CREATE OR REPLACE MACRO holm_adjusted(p, m, k, family_a, family_b, task, metric, subset) AS
    CASE WHEN p IS NOT NULL THEN
        max(least(1.0, (m - k + 1) * p)) OVER (
            PARTITION BY family_a, family_b ORDER BY p NULLS LAST, task, metric, subset NULLS FIRST
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        )
    END;

-- One row per (model, baseline, task, subset, metric): the model's value and the baseline's
-- on the items both have (n_pairs), their difference with a paired-bootstrap CI, the test's
-- p-value and Holm's adjustment over the battery: every row of the same (model, baseline)
-- pair that has a p-value (all tasks, metrics and subsets compared so far) is one family.
CREATE OR REPLACE VIEW comparisons AS
WITH ranked AS (
    SELECT *, count(p_value) OVER (PARTITION BY model, baseline) AS family_size,
           holm_rank(p_value, model, baseline, task, metric, subset) AS p_rank
    FROM comparison_results
)
SELECT model, baseline, task, subset, metric, value, baseline_value, difference, ci_low, ci_high, p_value,
       holm_adjusted(p_value, family_size, p_rank, model, baseline, task, metric, subset) AS p_adjusted,
       n_pairs, test
FROM ranked;

-- The regression gates (data/gates.yaml) applied to headline comparisons: a model regresses
-- when it moved away from the metric's ideal by more than the margin, with Holm's
-- p_adjusted <= alpha. Away from the ideal: |value - ideal| - |baseline_value - ideal|, or
-- the difference signed by higher_is_better for a metric without an ideal value.
CREATE OR REPLACE VIEW gate_verdicts AS
SELECT c.model, c.baseline, c.task, c.subset, c.metric, c.difference, c.p_adjusted, g.margin, g.alpha,
       coalesce(
           c.p_adjusted <= g.alpha AND (
               CASE WHEN g.ideal IS NOT NULL THEN abs(c.value - g.ideal) - abs(c.baseline_value - g.ideal)
                    WHEN g.higher_is_better THEN -c.difference
                    ELSE c.difference END
           ) > g.margin,
           false
       ) AS regressed
FROM comparisons c
JOIN comparison_gates g ON g.task = c.task AND g.metric = c.metric
WHERE c.subset IS NULL;

-- Checkpoints of one family (ids differing only in a trailing step number, as in
-- reports/family.py: my-model-step-100, my-model-ckpt-100, my-model-100) across training
-- steps, each metric with its CI, the change from the previous step's checkpoint and the
-- Holm-adjusted p-value of that change from the comparison with it (NULL: not compared).
-- significant: p_adjusted_vs_previous <= 0.05. Families of one checkpoint are left out.
CREATE OR REPLACE VIEW checkpoint_trends AS
WITH evaluated AS (
    SELECT DISTINCT model FROM metrics
), split AS (
    SELECT model,
           regexp_extract(model, '^(.+?)[-_](?:(?:step|ckpt|checkpoint)[-_]?)?(\d+)$', 1) AS family,
           TRY_CAST(regexp_extract(model, '^(.+?)[-_](?:(?:step|ckpt|checkpoint)[-_]?)?(\d+)$', 2) AS BIGINT) AS step
    FROM evaluated
), members AS (
    SELECT model, family, step, count(*) OVER (PARTITION BY family) AS family_size
    FROM split
    WHERE family <> '' AND step IS NOT NULL
), points AS (
    SELECT f.family, v.model, f.step, v.task, v.subset, v.metric, v.value, v.ci_low, v.ci_high,
           lag(v.model) OVER w AS previous_model,
           v.value - lag(v.value) OVER w AS change_vs_previous
    FROM metrics v
    JOIN members f ON f.model = v.model
    WHERE f.family_size >= 2
    WINDOW w AS (PARTITION BY f.family, v.task, v.subset, v.metric ORDER BY f.step, v.model)
)
SELECT p.family, p.model, p.step, p.task, p.subset, p.metric, p.value, p.ci_low, p.ci_high,
       p.change_vs_previous,
       c.p_adjusted AS p_adjusted_vs_previous,
       c.p_adjusted <= 0.05 AS significant
FROM points p
LEFT JOIN comparisons c
  ON c.model = p.model AND c.baseline = p.previous_model AND c.task = p.task
 AND c.metric = p.metric AND c.subset IS NOT DISTINCT FROM p.subset;

-- Perturbation effects (docs/counterfactuals.md): one row per (model, variant task, scope, subset, metric),
-- the perturbed value against the original on the same items, the difference with its paired CI, the
-- metric's own test and Holm's adjustment over the battery (holm_adjusted above): every row of one
-- (model, scope) with a p-value (all tasks, perturbations, metrics and subsets measured so far) is one family.
CREATE OR REPLACE VIEW perturbation_effects AS
WITH ranked AS (
    SELECT *, count(p_value) OVER (PARTITION BY model, scope) AS family_size,
           holm_rank(p_value, model, scope, task, metric, subset) AS p_rank
    FROM perturbation_effect_results
)
SELECT model, base_task, perturbation, task, scope, subset, metric, value, original_value, difference,
       ci_low, ci_high, p_value,
       holm_adjusted(p_value, family_size, p_rank, model, scope, task, metric, subset) AS p_adjusted,
       n_pairs, n_changed, n_unchanged, test, perturbation_key
FROM ranked;
