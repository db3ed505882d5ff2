"""Judge calibration: human-labelled sets against which a judge model's verdicts are checked.

A judge's label (BOLD's regard, LangBiTe's second opinion, refusal detection) is a measurement
with errors; its calibration sets (``calibration_sets``) give the human labels it is measured
against, and ``themis_dagster.stats.agreement`` / ``misclassification`` turn the comparison
into agreement statistics and corrected shares.
"""
