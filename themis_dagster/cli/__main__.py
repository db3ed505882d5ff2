"""``python -m themis_dagster.cli``: the ``themis`` command."""

from themis_dagster.cli import console_main

console_main()
