"""What the report commands do with the options they are given: ``python -m report --help``
lists its subcommands; a report decides on the command's ``report.decide_on`` (never an
earlier run's); a finished sweep re-run with other report options gets a new report of
those runs, and one re-run with the same prints the stored verdict again."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from report import console
from report.report import REPORT_OPTIONS_TAG, decide_on, main, options_key
from runners.callbacks import REPORT_RUNS_TAG, reporting_parent, runs_key
from tests.test_report import rec, row


def test_the_report_commands_help_lists_its_subcommands(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "python -m report {compare,label-sample}" in out
    lines = out.split("subcommands:", 1)[1].splitlines()
    assert any(x.split()[0:1] == ["compare"] and "baseline" in x for x in lines)
    assert any(x.split()[0:1] == ["label-sample"] and "label" in x for x in lines)
    assert "--decide-on METRIC" in out


def test_a_report_decides_on_the_commands_metrics_not_an_earlier_runs():
    rows = [row(n, decide_on=["geval_coverage"]) for n in ("arag", "naive")]
    records = {n: [rec(f"t{k}", 4, rouge2_f1=0.2) for k in range(3)] for n in ("arag", "naive")}
    assert decide_on(rows, records, ["rouge2_f1"]) == ["rouge2_f1"]
    # the command gives none: the documented default, not what the runs logged earlier
    assert decide_on(rows, records, []) == ["geval_coverage"] == decide_on(
        [row(n, decide_on=["rouge2_f1"]) for n in ("arag", "naive")], records, [])
    # a rebuild that says nothing: as the sweep decided
    assert decide_on([row("arag", decide_on=["rouge2_f1"])], records, None) == ["rouge2_f1"]


def _parent(run_id: str, options: str | None) -> SimpleNamespace:
    tags = {"role": "sweep_parent"} | ({REPORT_OPTIONS_TAG: options} if options else {})
    return SimpleNamespace(info=SimpleNamespace(run_id=run_id, experiment_id="1"),
                           data=SimpleNamespace(tags=tags))


def test_a_finished_sweep_with_other_report_options_is_not_the_stored_report(tmp_path):
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"x": 1}\n')
    default = options_key({"decide_on": [], "human_labels": None, "baseline": None}, [], None)
    assert default == options_key(None, [], None)  # unset and default options are one
    keys = {options_key({}, ["rouge2_f1"], None), options_key({}, [], str(labels)), default}
    assert len(keys) == 3
    # the baseline's options are the comparison's, run again on every re-run anyway
    assert options_key({"baseline": "b", "fail_on": ["rouge2_f1:0.1"]}, [], None) == default
    before = options_key({}, [], str(labels))
    labels.write_text('{"x": 2}\n')  # the same file, labelled further: other options
    assert options_key({}, [], str(labels)) != before
    jobs = [SimpleNamespace(info=SimpleNamespace(run_id=i)) for i in ("r1", "r2")]
    stored = [_parent("new", options_key({}, ["rouge2_f1"], None)), _parent("old", None)]
    asked = []

    class Client:
        def search_runs(self, experiments, filter_string, **kwargs):
            asked.append(filter_string)
            return stored

    client = Client()
    assert reporting_parent(client, "1", jobs, default).info.run_id == "old"  # no tag: defaults
    assert f"tags.{REPORT_RUNS_TAG} = '{runs_key(['r2', 'r1'])}'" in asked[0]
    assert reporting_parent(client, "1", jobs, options_key({}, ["rouge2_f1"], None)
                            ).info.run_id == "new"
    assert reporting_parent(client, "1", jobs, options_key({}, [], str(labels))) is None
    assert reporting_parent(client, "1", jobs).info.run_id == "new"  # any report of them


def test_a_finished_sweep_run_again_prints_its_stored_verdict():
    note = ("**Decided: arag beats naive on `rouge2_f1` (by 0.1).**\n\n> **Caveats**\n> - "
            "synthetic\n\n**Verdict** (decided on `rouge2_f1`): arag 0.3 vs naive 0.2\n\n"
            "Artifacts: `report.html` ...")
    run = SimpleNamespace(info=SimpleNamespace(run_id="p1"),
                          data=SimpleNamespace(tags={console.NOTE_TAG: note}))
    lines = console.stored_verdict(run)
    assert lines[0] == "Decided: arag beats naive on rouge2_f1 (by 0.1)."
    assert "Verdict (decided on rouge2_f1): arag 0.3 vs naive 0.2" in lines
    assert not any("Artifacts" in x for x in lines)
    bare = SimpleNamespace(info=SimpleNamespace(run_id="p1"), data=SimpleNamespace(tags={}))
    assert "python -m report p1 writes it again" in console.stored_verdict(bare)[0]
