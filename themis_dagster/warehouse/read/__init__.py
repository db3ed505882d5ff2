"""The read layer: named, typed queries over the warehouse's views, one module per view or related group.

Everything that shows results (the explorer, the reports, ``themis leaderboard``/``compare``/``cache``,
the leaderboard asset) reads through here; writes stay with their writers. Values reach SQL only as
bound parameters. The three words every page uses are defined once:

- ``ideals``: a metric's **ideal** (declared, else none: "no ideal declared", never 0);
- ``verdicts``: the **verdict** ("biased" only for a bias metric whose CI excludes its ideal) and the count;
- ``partitions``: **complete** partitions (``partition_status``; ``metrics`` shows only those).

Modules: ``query`` (bound reads, :class:`~themis_dagster.warehouse.read.query.OlderSchemaError`),
``status`` (can the warehouse be read: exists, current schema, results), ``catalog`` (models and tasks
with results), ``metrics`` (``metrics``, ``headline_metrics``, ``metric_trend``), ``partitions``
(``partition_status``), ``ideals``, ``verdicts``, ``leaderboard`` (``leaderboard``/``leaderboard_view``),
``judged`` (``judged_metrics`` and the judge calibrations), ``judgments`` (``parse_rates``,
``parse_failures``, ``refusals``), ``readings`` (``reading_disagreements``: replies a benchmark's own
reader and the project's read differently), ``drilldown`` (``metric_drilldown``/``judgment_drilldown``, paged),
``runs`` (``evaluation_runs``, ``model_precision``), ``comparisons`` (``comparisons``, ``gate_verdicts``,
``checkpoint_trends``), ``cache`` (``request_cache``), ``distributions`` (one item's distribution beside its
references), ``pairs`` (counterfactual pairs of replies) and ``perturbed`` (a perturbed variant's items
against the original).
"""
