"""THEMIS's explorer: an interactive Streamlit app beside Dagster's UI, on the same warehouse (``themis ui``).

Read-only on the warehouse: every query goes through the read-only door of ``themis sql``
(:mod:`themis_dagster.warehouse.readonly`) with bound parameters, on a connection opened for
one page and closed at once, so a run waiting to write is never held up for long.

One module per page (``leaderboard``, ``model``, ``drilldown``, ``judges``, ``refusals``, ``figures``,
``counterfactuals``, ``perturbations``, ``compare``, ``playground``, ``runs``), run by ``app.py`` through
``st.navigation``; ``data`` holds every query, ``ui`` the links and messages the pages share, ``browse``
what the newer pages pick from their URL, ``engine_slot`` the playground's engine (which takes the
``engine`` pool slot runs take), ``launch`` the ``themis ui`` command.
"""

from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"
