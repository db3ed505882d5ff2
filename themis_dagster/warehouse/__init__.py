"""The warehouse (a DuckDB file or DuckLake), one module per concern.

``tables`` declares every table once and ``frames`` maps records to frames through it;
``schema`` creates the tables and the analyst views (``sql/views*.sql``); ``transactions``,
``partitions`` (replace a partition's or a table's rows), ``appends`` and ``reads`` write and
read them; ``generations``, ``integrity``, ``request_cache`` and ``migrate`` keep stage lineage,
check the file, cache answers and migrate old files; ``readonly`` (``themis sql``),
``file_snapshot`` and ``lake_snapshot`` (``themis snapshot``), ``ducklake`` and ``lock_wait`` open it;
``read/`` is the read layer every page, report and command reads results through.
"""
