"""Request fingerprints and cacheability for a whole prompts frame, without a ``Request`` per row.

``engines/fingerprint.py::request_fingerprint`` hashes ``json.dumps(payload, sort_keys=True,
default=str)`` of a request's content. Building a ``Request`` per row (decoding its JSON
columns) and dumping a dict per row was a fifth of ``raw_responses`` at 10^6 requests
(``bench/chain_scale.py``). Here the same JSON text is assembled a column at a time: keys in
sorted order, ``", "``/``": "`` separators, strings as ``json.dumps`` writes them
(ASCII-escaped: a string of printable ASCII without ``"`` or ``\\`` is written as is
between quotes, any other through ``json.dumps`` itself), JSON columns re-dumped canonically
once per distinct value. The hashes are the same, so existing caches stay valid
(tests/test_fingerprints_columnar.py checks them against ``request_fingerprint``).
"""

from __future__ import annotations

import hashlib
import json

import polars as pl

from themis_dagster.exchange import GenerationParams
from themis_dagster.warehouse.frames import json_strings

ROWS = 65536  # prompt rows fingerprinted at once

# request_fingerprint's payload keys, in json.dumps(sort_keys=True) order, with how each is written
_PAYLOAD = (
    ("context", "string"),
    ("continuation", "string"),
    ("gen_params", "json"),
    ("messages", "json"),
    ("model", "string"),
    ("prompt", "string"),
    ("request_type", "string"),
)


def _canonical_json(text: str) -> str:
    """The text ``json.dumps(sort_keys=True, default=str)`` writes for the value ``text`` holds."""
    return json.dumps(json.loads(text), sort_keys=True, default=str)


def _json_values(column: pl.Series) -> pl.Series:
    """A JSON column's values re-dumped as ``request_fingerprint`` dumps the decoded value (``null`` for NULL).

    The warehouse stores ``json.dumps(value, sort_keys=True, default=str)``; decoding and dumping
    again gives the same text except in rare cases (a dict with non-string keys), so each
    distinct text is re-dumped once and replaced where it differs.
    """
    distinct = column.drop_nulls().unique().to_list()
    changed = {text: canonical for text in distinct if (canonical := _canonical_json(text)) != text}
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
        if name == "model":
            column = pl.Series(name, [model_fingerprint], dtype=pl.String).extend_constant(
                model_fingerprint, prompts.height - 1
            )
        else:
            column = prompts.get_column(name)
        parts.append((json_strings(column) if kind == "string" else _json_values(column)).alias(name))
    pieces: list[pl.Expr] = []
    for index, (name, _) in enumerate(_PAYLOAD):
        pieces += [pl.lit(("{" if index == 0 else ", ") + json.dumps(name) + ": "), pl.col(name)]
    pieces.append(pl.lit("}"))
    payloads = pl.DataFrame(parts).select(pl.concat_str(pieces).alias("payload")).get_column("payload")
    sha256 = hashlib.sha256
    return pl.Series(
        "_fingerprint", [sha256(payload.encode()).hexdigest() for payload in payloads.to_list()], dtype=pl.String
    )


def cacheable_rows(prompts: pl.DataFrame) -> pl.Series:
    """``engines.fingerprint.cacheable`` of every row: scoring always, sampling only seeded or greedy.

    Decided once per distinct (request type, generation params), not per row.
    """
    kinds = prompts.select("request_type", "gen_params")
    verdicts = []
    for request_type, params in kinds.unique().iter_rows():
        if request_type == "loglikelihood":
            verdicts.append((request_type, params, True))
            continue
        parsed = GenerationParams.model_validate(json.loads(params) if params is not None else {})
        verdicts.append((request_type, params, parsed.seed is not None or parsed.temperature == 0.0))
    table = pl.DataFrame(
        verdicts, schema={"request_type": pl.String, "gen_params": pl.String, "_cacheable": pl.Boolean}, orient="row"
    )
    joined = kinds.with_row_index("_row").join(table, on=["request_type", "gen_params"], how="left", nulls_equal=True)
    return joined.sort("_row").get_column("_cacheable")
