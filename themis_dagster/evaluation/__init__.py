"""The evaluation chain as plain functions: a task, polars frames and an answerer in, a stage's rows out.

One partition (``partition.EvaluationPartition``: a model and a task) goes through five stages,
each a function of this package that the Dagster assets (``assets/evaluation.py``) wire to the
warehouse:

| stage (table) | function | module |
|---|---|---|
| ``task_items`` | ``load_items`` | ``items.py`` |
| ``prompts`` | ``render_prompts`` | ``prompts.py`` |
| ``responses`` | ``answer_prompts`` (through an ``Answerer``) | ``responses.py``, ``answering.py`` |
| ``judgments`` | ``judge_partition``: guard, judge, second opinion or panel, refusal judge, relabel | ``judging/`` |
| ``metric_values`` | ``metric_values`` | ``metrics.py`` |

Around them: ``stage_io.py`` (read the upstream stage's rows, replace a partition's own with the
materialization they are), ``task_frames.py`` (when a stage may use a task's columnar hooks),
``request_keys.py`` (request cache keys a column at a time), ``lazy_records.py``. Nothing here
imports Dagster or a resource: what a stage needs of the warehouse is ``stage_io.Warehouse``.
"""
