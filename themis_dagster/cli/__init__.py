"""``themis``: run evaluations, manage models and query the warehouse from a terminal.

``themis run`` executes the same Dagster job the UI launches, one in-process run per
task, recorded in the Dagster instance (so ``dagster dev`` shows them), with the
engine loaded once for all tasks of a model.

One module per subcommand, each with a ``register(subparsers)`` hook that adds its parser
and sets ``func``; ``common`` holds what several share. Heavy modules (Dagster, the
definitions, engines) are imported inside the commands, so ``themis --help`` stays quick.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from themis_dagster.cli import (
    backfill,
    cache,
    common,
    compare,
    doctor,
    import_,
    leaderboard,
    models,
    perturbations,
    run,
    snapshot,
    sql,
    ui,
)
from themis_dagster.errors import ConfigError

__all__ = ["build_parser", "console_main", "main"]

SUBCOMMANDS = (
    run,
    backfill,
    models,
    sql,
    import_,
    snapshot,
    cache,
    compare,
    perturbations,
    leaderboard,
    ui,
    doctor,
)  # in --help's order


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="themis", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from themis_dagster.runs.reachability import UnreachableError
    from themis_dagster.warehouse.ducklake import WarehouseConfigError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ConfigError, WarehouseConfigError, UnreachableError) as error:  # each names its setting
        print(f"themis: configuration error:\n{error}", file=sys.stderr)
        return 2


def console_main() -> None:
    """The ``themis`` command: ``main()``, then a quick exit after an in-process vLLM engine.

    With vLLM's engine in this process, the interpreter's own teardown (torch, oneDNN and
    vLLM's threads) takes about 2.5 s after every result is committed and every engine shut
    down; the command skips it (``os._exit``) once its output is flushed. ``main`` itself
    returns normally, so callers in Python (tests) keep a usable interpreter. For the same
    reason ``themis run`` leaves an in-process engine's teardown to the operating system.
    """
    common.QUICK_EXIT = True
    code = main()
    if "vllm" in sys.modules:
        import logging

        from themis_dagster.engines.vllm.tempfiles import remove_dist_stores

        remove_dist_stores()  # the skipped teardown would have deleted vLLM's /tmp/vllm_dist_* file
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
