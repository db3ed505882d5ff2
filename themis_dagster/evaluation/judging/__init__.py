"""The judgments stage as an explicit pipeline, one module per step (``pipeline.py`` runs them in order).

``reply_guard.py`` (steps 1 and 5: guard and relabel), ``task_judge.py`` (2: the task's
``judge``), ``second_opinion.py`` (3: a judge model or a panel), ``refusal_judge.py`` (4: a
refusal judge model), and ``calibrations.py`` (the judges' stored calibrations the metrics stage
reports judged metrics with).
"""
