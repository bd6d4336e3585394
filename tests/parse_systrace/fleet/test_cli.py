"""The command line: parse_systrace fleet build|summary|query, and the line without the extra."""
from __future__ import annotations

import csv
import io
import json

from nnscope.parse_systrace.__main__ import main as parse_systrace_main
from nnscope.parse_systrace.fleet import __main__ as cli


def test_without_the_extra_one_line_names_it(monkeypatch, capsys, tmp_path):
    real = cli.importlib.util.find_spec
    monkeypatch.setattr(cli.importlib.util, "find_spec",
                        lambda name: None if name == "distributed" else real(name))
    assert parse_systrace_main(["fleet", "build", str(tmp_path / "x.fleet"), str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.err == "parse_systrace fleet: needs the fleet extra: pip install 'nnscope[fleet]'\n"
    assert captured.out == ""


def test_query_prints_rows_as_text_json_and_csv(embedded, capsys):
    sql = "SELECT device, count(*) AS traces FROM traces GROUP BY device ORDER BY device"
    assert cli.main(["query", str(embedded[0]), sql]) == 0
    assert capsys.readouterr().out.splitlines()[2].split() == ["galaxy", "72"]
    assert cli.main(["query", str(embedded[0]), sql, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0] == {"device": "galaxy", "traces": 72}
    assert cli.main(["query", str(embedded[0]), sql, "--csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["device,traces", "galaxy,72", "pixel6,72", "pixel7,72"]


def test_a_bad_query_is_one_line_and_exit_1(embedded, capsys):
    assert cli.main(["query", str(embedded[0]), "SELECT nope FROM traces"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("parse_systrace fleet query: ") and err.count("\n") == 1


def test_summary_csv_has_a_row_per_group_phase_and_layer(embedded, capsys):
    assert cli.main(["summary", str(embedded[0]), "--by", "device", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert list(rows[0]) == ["device", "phase", "layer", "count", "median", "p90", "spread",
                             "min", "p10", "p25", "p75", "max"]
    (cell,) = [r for r in rows if (r["device"], r["phase"], r["layer"]) == ("pixel7", "PE", "LD")]
    assert int(cell["count"]) == 72 and float(cell["median"]) > 0


def test_an_unknown_group_column_is_a_usage_error(embedded, capsys):
    try:
        cli.main(["summary", str(embedded[0]), "--by", "colour"])
    except SystemExit as exit_:
        assert exit_.code == 2
    assert "unknown group column 'colour'; valid: device, build, model" in capsys.readouterr().err


def test_build_from_a_manifest(lab, tmp_path, capsys):
    root, truth = lab
    manifest = tmp_path / "lab.csv"
    chosen = sorted(p for p in truth.traces if p.startswith("pixel7/b100/"))[:4]
    manifest.write_text("path,rack\n" + "".join(f"{root / p},r{i % 2}\n" for i, p in enumerate(chosen)))
    dataset = tmp_path / "manifest.fleet"
    assert cli.main(["build", str(dataset), "--manifest", str(manifest), "--workers", "1",
                     "--no-progress", "--json"]) == 0
    captured = capsys.readouterr()
    assert "4 traces added, 0 errors" in captured.err
    assert {record["rack"] for record in json.loads(captured.out)} == {"r0", "r1"}


def test_the_fleet_page_shows_distributions_and_the_comparison(embedded, tmp_path, capsys):
    from nnscope.dashboards.__main__ import main as dashboard_main

    summary, comparison, page = tmp_path / "summary.json", tmp_path / "compare.json", tmp_path / "fleet.html"
    assert cli.main(["summary", str(embedded[0]), "--json"]) == 0
    summary.write_text(capsys.readouterr().out)
    a, b = f"{embedded[0]}:build=b100", f"{embedded[0]}:build=b101"
    assert cli.main(["compare", a, b, "--json"]) == 0
    comparison.write_text(capsys.readouterr().out)
    assert dashboard_main([str(summary), "--compare", str(comparison), "-o", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "NNAPI fleet report" in text
    assert "Execution · Driver (PE LD)" in text and "pixel6 / b101 / asr" in text
    assert "pixel6 / asr PE LD" in text  # the regression, in the forest plot
    assert text.count("<svg") > 20


def test_trace_keys_record_the_driver_a_trace_shows(lab, tmp_path, capsys):
    root, truth = lab
    chosen = [p for device in ("pixel6", "galaxy")
              for p in sorted(p for p in truth.traces if p.startswith(f"{device}/b100/asr/"))[:3]]
    for path in chosen:
        (tmp_path / "in" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "in" / path).symlink_to(root / path)
    dataset = str(tmp_path / "keys.fleet")
    assert cli.main(["build", dataset, str(tmp_path / "in"), "--trace-keys", "--workers", "1",
                     "--no-progress", "--no-summary"]) == 0
    capsys.readouterr()
    assert cli.main(["summary", dataset, "--by", "driver,model", "--csv"]) == 0
    groups = {tuple(line.split(",")[:2]) for line in capsys.readouterr().out.splitlines()[1:]}
    assert groups == {("SampleDriver", "asr"), ("", "asr")}  # galaxy runs on the CPU: no driver
