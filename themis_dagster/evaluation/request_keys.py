"""Request fingerprints and cacheability for a whole prompts frame, without a ``Request`` per row.

``engines/fingerprint.py`` defines the fingerprint once: ``request_fingerprint`` hashes
``canonical_json`` of the model fingerprint and the ``REQUEST_FIELDS`` of a request. Building a
``Request`` per row (decoding its JSON columns) and dumping a dict per row was a fifth of
``raw_responses`` at 10^6 requests (``bench/chain_scale.py``). Here the same JSON text is
assembled a column at a time from those definitions: keys in sorted order, ``SEPARATORS``
between them, strings as ``json.dumps`` writes them (ASCII-escaped: a string of printable ASCII
without ``"`` or ``\\`` is written as is between quotes, any other through ``json.dumps``
itself), JSON columns re-dumped by ``canonical_json`` once per distinct value. The hashes are
the same, so existing caches stay valid (tests/evaluation/test_request_keys.py checks them
against ``request_fingerprint`` and against pinned values).
"""

from __future__ import annotations

import json

import polars as pl

from themis_dagster.engines.fingerprint import (
    MODEL_KEY,
    REQUEST_FIELDS,
    SEPARATORS,
    answers_repeat,
    canonical_json,
    digest,
)
from themis_dagster.warehouse.frames import json_strings

ROWS = 65536  # prompt rows fingerprinted at once

# request_fingerprint's payload keys, in canonical_json's (sorted) order, with how each is written
_PAYLOAD = tuple(sorted({MODEL_KEY: "text", **REQUEST_FIELDS}.items()))


def _json_values(column: pl.Series) -> pl.Series:
    """A JSON column's values re-dumped as ``request_fingerprint`` dumps the decoded value (``null`` for NULL).

    The warehouse stores ``json.dumps(value, sort_keys=True, default=str)``; decoding and dumping
    again gives the same text except in rare cases (a dict with non-string keys), so each
    distinct text is re-dumped once and replaced where it differs.
    """
    distinct = column.drop_nulls().unique().to_list()
    changed = {text: canonical for text in distinct if (canonical := canonical_json(json.loads(text))) != text}
    if changed:
        column = column.replace(changed)
    return column.fill_null("null")


def request_fingerprints(prompts: pl.DataFrame, model_fingerprint: str) -> pl.Series:
    """``request_fingerprint(model_fingerprint, request)`` of every row of a prompts frame, in row order.

    ``ROWS`` rows at a time: a payload per row (and its Python string, to hash) exists only for them.
    """
    if prompts.is_empty():
        return pl.Series("_fingerprint", [], dtype=pl.String)
    return pl.concat(
        [_fingerprints(prompts.slice(start, ROWS), model_fingerprint) for start in range(0, prompts.height, ROWS)]
    )


def _fingerprints(prompts: pl.DataFrame, model_fingerprint: str) -> pl.Series:
    parts: list[pl.Series] = []
    for name, kind in _PAYLOAD:
        if name == MODEL_KEY:
            column = pl.Series(name, [model_fingerprint], dtype=pl.String).extend_constant(
                model_fingerprint, prompts.height - 1
            )
        else:
            column = prompts.get_column(name)
        parts.append((json_strings(column) if kind == "text" else _json_values(column)).alias(name))
    between_items, after_key = SEPARATORS
    pieces: list[pl.Expr] = []
    for index, (name, _) in enumerate(_PAYLOAD):
        pieces += [pl.lit(("{" if index == 0 else between_items) + json.dumps(name) + after_key), pl.col(name)]
    pieces.append(pl.lit("}"))
    payloads = pl.DataFrame(parts).select(pl.concat_str(pieces).alias("payload")).get_column("payload")
    return pl.Series("_fingerprint", [digest(payload) for payload in payloads.to_list()], dtype=pl.String)


def cacheable_rows(prompts: pl.DataFrame) -> pl.Series:
    """``engines.fingerprint.cacheable`` of every row: scoring always, sampling only seeded or greedy.

    Decided once per distinct (request type, generation params), not per row.
    """
    kinds = prompts.select("request_type", "gen_params")
    verdicts = []
    for request_type, params in kinds.unique().iter_rows():
        decoded = json.loads(params) if params is not None and request_type != "loglikelihood" else None
        verdicts.append((request_type, params, answers_repeat(request_type, decoded)))
    table = pl.DataFrame(
        verdicts, schema={"request_type": pl.String, "gen_params": pl.String, "_cacheable": pl.Boolean}, orient="row"
    )
    joined = kinds.with_row_index("_row").join(table, on=["request_type", "gen_params"], how="left", nulls_equal=True)
    return joined.sort("_row").get_column("_cacheable")
