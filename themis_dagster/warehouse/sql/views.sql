-- Views analysts query. Recreated whenever the warehouse is opened for writing.
-- A judgment covers either a whole item (judgments.item_id = prompts.item_id) or one
-- attempt (judgments.item_id = prompts.request_id, e.g. GenderBench); joins accept both.

-- Whether each partition's stages belong together. Every stage write records its own
-- materialization id and the upstream materialization it was computed from
-- (stage_generations); a partition is complete when all five stages are present and each
-- was computed from the one before it as it is now. A run killed half-way through
-- re-materializing a partition leaves it incomplete until a run completes it.
CREATE OR REPLACE VIEW partition_status AS
WITH links AS (
    SELECT model, task,
           any_value(generation) FILTER (WHERE stage = 'task_items') AS generation,
           any_value(materialization) FILTER (WHERE stage = 'task_items') AS task_items,
           any_value(materialization) FILTER (WHERE stage = 'prompts') AS prompts,
           any_value(upstream_materialization) FILTER (WHERE stage = 'prompts') AS prompts_from,
           any_value(materialization) FILTER (WHERE stage = 'responses') AS responses,
           any_value(upstream_materialization) FILTER (WHERE stage = 'responses') AS responses_from,
           any_value(materialization) FILTER (WHERE stage = 'judgments') AS judgments,
           any_value(upstream_materialization) FILTER (WHERE stage = 'judgments') AS judgments_from,
           any_value(materialization) FILTER (WHERE stage = 'metric_values') AS metric_values,
           any_value(upstream_materialization) FILTER (WHERE stage = 'metric_values') AS metric_values_from,
           max(written_at) AS last_written_at
    FROM stage_generations
    GROUP BY model, task
), checked AS (
    SELECT *, CASE
        WHEN task_items IS NULL THEN 'task_items missing'
        WHEN prompts IS NULL THEN 'prompts missing'
        WHEN prompts_from IS DISTINCT FROM task_items THEN 'prompts are from an earlier task_items'
        WHEN responses IS NULL THEN 'responses missing'
        WHEN responses_from IS DISTINCT FROM prompts THEN 'responses are from earlier prompts'
        WHEN judgments IS NULL THEN 'judgments missing'
        WHEN judgments_from IS DISTINCT FROM responses THEN 'judgments are from earlier responses'
        WHEN metric_values IS NULL THEN 'metric_values missing'
        WHEN metric_values_from IS DISTINCT FROM judgments THEN 'metric_values are from earlier judgments'
    END AS first_gap
    FROM links
)
SELECT model, task, generation, first_gap IS NULL AS complete,
       coalesce('incomplete: ' || first_gap || '; materialize the partition again', 'complete') AS status,
       last_written_at
FROM checked;

-- Every metric of every complete (model, task) partition; subset IS NULL is the headline
-- value. A partition whose stages are of different materializations (partition_status) is
-- left out until a run completes it; partitions written before stage_generations existed
-- have no status and are shown as they are.
CREATE OR REPLACE VIEW metrics AS
SELECT m.model, m.task, m.subset, m.metric, m.value, m.ci_low, m.ci_high, m.n, m.materialized_at, m.run_id,
       s.generation
FROM metric_values m
LEFT JOIN partition_status s USING (model, task)
WHERE coalesce(s.complete, true);

-- Headline values only, one row per (model, task, metric).
CREATE OR REPLACE VIEW headline_metrics AS
SELECT model, task, metric, value, ci_low, ci_high, n, materialized_at
FROM metrics
WHERE subset IS NULL;

-- The leaderboard with each model's distance from the metric's unbiased value. A metric without a
-- declared ideal has no distance and no verdict (NULL), never one measured from 0 (warehouse/read/ideals.py).
CREATE OR REPLACE VIEW leaderboard_view AS
SELECT task, metric, rank, model, value, ci_low, ci_high, n, ideal,
       abs(value - ideal) AS distance_from_ideal,
       ci_low <= ideal AND ideal <= ci_high AS ci_contains_ideal,
       materialized_at
FROM leaderboard;

-- Judgments that could not be interpreted, with the replies behind them (and a reasoning model's
-- reasoning: a reply withheld as reasoning_unfinished has none but its reasoning to show).
CREATE OR REPLACE VIEW parse_failures AS
SELECT j.model, j.task, j.item_id, j.subset, j.outcome, r.request_id, r.text, r.error, r.reasoning
FROM judgments j
LEFT JOIN responses r
  ON r.model = j.model AND r.task = j.task AND (r.item_id = j.item_id OR r.request_id = j.item_id)
WHERE NOT j.parsed;

-- Judgments whose reply the refusal detector marked refused (docs/refusals.md), with the replies
-- behind them: what the task's own rules made of each (outcome, parsed) and why it was flagged.
CREATE OR REPLACE VIEW refusals AS
SELECT j.model, j.task, j.item_id, j.subset, j.outcome, j.parsed,
       j.detail->>'$.refusal_verdict.phrase' AS phrase, j.detail->>'$.refusal_verdict.language' AS language,
       r.request_id, r.text, r.reasoning
FROM judgments j
LEFT JOIN responses r
  ON r.model = j.model AND r.task = j.task AND (r.item_id = j.item_id OR r.request_id = j.item_id)
WHERE j.refused;

-- From an item's judgment down to the prompts and raw responses behind it.
CREATE OR REPLACE VIEW judgment_drilldown AS
SELECT j.model, j.task, j.subset, j.item_id, j.outcome, j.score, j.parsed,
       p.request_id, p.request_type, p.template, p.context, p.continuation, p.prompt, p.messages,
       r.logprob, r.is_greedy, r.text, r.prompt_text, r.error
FROM judgments j
JOIN prompts p
  ON p.model = j.model AND p.task = j.task AND (p.item_id = j.item_id OR p.request_id = j.item_id)
LEFT JOIN responses r
  ON r.model = p.model AND r.task = p.task AND r.request_id = p.request_id;

-- From a metric value down to every judgment, prompt and reply it was computed from: a
-- headline metric covers all judgments, a subset's metric those of that subset or of its
-- children ("race" covers "race/racism"). Slices that are not item subsets (for example
-- "template=kara") are filtered on judgment_drilldown's own columns instead.
CREATE OR REPLACE VIEW metric_drilldown AS
SELECT m.model, m.task, m.metric, m.subset AS metric_subset, m.value AS metric_value,
       d.subset AS item_subset, d.item_id, d.outcome, d.score, d.parsed,
       d.request_id, d.template, d.context, d.continuation, d.prompt, d.logprob, d.text, d.error
FROM metrics m
JOIN judgment_drilldown d
  ON d.model = m.model AND d.task = m.task
 AND (m.subset IS NULL OR d.subset = m.subset OR starts_with(d.subset, m.subset || '/'));

-- Every materialization of every metric, with the change since the previous one.
CREATE OR REPLACE VIEW metric_trend AS
SELECT model, task, subset, metric, value, ci_low, ci_high, n, materialized_at, run_id,
       value - lag(value) OVER w AS change_since_previous,
       row_number() OVER w AS materialization
FROM metric_history
WINDOW w AS (PARTITION BY model, task, subset, metric ORDER BY materialized_at);

-- Parse success per (model, task): the share of judgments that could be interpreted.
CREATE OR REPLACE VIEW parse_rates AS
SELECT model, task, count(*) AS judged, count(*) FILTER (WHERE parsed) AS parsed,
       avg(CASE WHEN parsed THEN 1.0 ELSE 0.0 END) AS parse_success_rate
FROM judgments
GROUP BY model, task;

-- The dtype each partition's answers were computed in (its latest raw_responses run): `dtype: auto`
-- resolved for the device (bf16 only where the CPU or GPU computes it natively; engines/precision.py),
-- with the reason, the device and what the models file declared.
CREATE OR REPLACE VIEW model_precision AS
SELECT model, task,
       json_extract_string(config, '$.precision.dtype') AS dtype,
       json_extract_string(config, '$.precision.reason') AS dtype_reason,
       json_extract_string(config, '$.precision.device') AS device,
       json_extract_string(config, '$.model.dtype') AS declared_dtype,
       materialized_at
FROM evaluation_runs
WHERE json_extract_string(config, '$.precision.dtype') IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY model, task ORDER BY materialized_at DESC) = 1;

-- Replies a benchmark's own reader and the project's read differently. A chat task whose benchmark has
-- its own reader keeps both readings in every judgment of a reply (kinds/lettered.py): the letter each
-- read (NULL: none) in detail.readings.official / .themis, and in detail.reading the one its outcome,
-- score and metrics follow (the task's `reading` parameter).
CREATE OR REPLACE VIEW reading_disagreements AS
SELECT j.model, j.task, j.item_id, j.subset, coalesce(r.text, j.detail->>'$.reply') AS reply,
       j.detail->>'$.readings.official' AS official, j.detail->>'$.readings.themis' AS themis,
       j.detail->>'$.reading' AS reading, j.outcome, j.parsed
FROM judgments j
LEFT JOIN responses r
  ON r.model = j.model AND r.task = j.task AND (r.item_id = j.item_id OR r.request_id = j.item_id)
WHERE json_exists(j.detail, '$.readings')
  AND (j.detail->>'$.readings.official') IS DISTINCT FROM (j.detail->>'$.readings.themis');
