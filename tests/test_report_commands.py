"""What the report commands do with the options they are given: ``python -m report --help``
lists its subcommands; a report decides on the command's ``report.decide_on`` (never an
earlier run's); a finished sweep re-run with other report options gets a new report of
those runs, and one re-run with the same prints the stored verdict again."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mlflow
import pytest

from report import console, overview
from report.cli import main
from report.overview import BASELINE_HEADING
from report.report import (
    BASELINE_SECTION,
    REPORT_OPTIONS_TAG,
    decide_on,
    options_key,
    write_sweep_report,
)
from runners.callbacks import REPORT_RUNS_TAG, reporting_parent, runs_key
from tests.test_report import rec, row
from tracking.sweeps import sweep_info


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


def _stored_sweep(tmp_path: Path) -> tuple[Any, str]:
    """A finished sweep in a temporary store, built by hand: naive beats stuffing on every
    task on rouge2_f1, stuffing beats naive on every task on rougeL_f1."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.create_experiment("sample", artifact_location=(tmp_path / "art").as_uri())
    parent = client.create_run(exp, run_name="sweep system=naive,stuffing sample",
                               tags={"role": "sweep_parent"}).info.run_id
    for system, better in (("naive", "rouge2_f1"), ("stuffing", "rougeL_f1")):
        run = client.create_run(exp, run_name=system, tags={
            "mlflow.parentRunId": parent, "run_label": system, "system": system})
        client.log_param(run.info.run_id, "report.decide_on", '["rouge2_f1"]')
        folder = tmp_path / system
        folder.mkdir()
        evals = [{"id": f"t{k}", "rouge2_f1": 0.2 + k / 100 + (0.1 if better == "rouge2_f1"
                                                               else 0.0),
                  "rougeL_f1": 0.3 + k / 100 + (0.1 if better == "rougeL_f1" else 0.0)}
                 for k in range(12)]
        (folder / "predictions.eval.jsonl").write_text("".join(json.dumps(e) + "\n"
                                                               for e in evals))
        (folder / "predictions.jsonl").write_text("".join(json.dumps(
            {"id": e["id"], "predicted": "an answer", "ground_truth": "a reference"}) + "\n"
            for e in evals))
        for name in ("predictions.eval.jsonl", "predictions.jsonl"):
            client.log_artifact(run.info.run_id, str(folder / name))
        client.set_terminated(run.info.run_id)
    client.set_terminated(parent)
    return client, parent


@pytest.mark.slow  # two whole reports of a stored sweep: 25-45 s on the 2-core machine
def test_a_rebuild_with_other_metrics_rewrites_the_description_with_its_report(tmp_path):
    """python -m report <parent> --decide-on M records: report.md and the MLflow
    description both answer on M (never the old metric beside the new report), and the
    baseline comparison each held stays in both."""
    from mlflow.utils.mlflow_tags import MLFLOW_RUN_NOTE

    client, parent = _stored_sweep(tmp_path)
    uri = ["--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"]

    def stored() -> tuple[str, str, str]:
        folder = tmp_path / f"read{len(list(tmp_path.glob('read*')))}"
        md, page = (Path(client.download_artifacts(parent, name, str(folder))).read_text()
                    for name in ("report.md", "report.html"))
        return md, page, client.get_run(parent).data.tags[MLFLOW_RUN_NOTE]

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")  # traces: the fluent API
    try:
        # the sweep's own report and description, decided on rouge2_f1 (runners/callbacks.py)
        overview.publish(client, write_sweep_report(client, sweep_info(client.get_run(parent))))
        md, _, note = stored()
        assert "naive beats stuffing" in note and "decided on `rouge2_f1`" in note
        # a baseline comparison recorded on the sweep (python -m report compare --record)
        client.set_tag(parent, MLFLOW_RUN_NOTE, f"{note}\n\n{BASELINE_HEADING}\n\nPASSED")
        folder = tmp_path / "with-baseline"
        folder.mkdir()
        (folder / "report.md").write_text(f"{md}\n\n{BASELINE_SECTION}\n\nno regression\n")
        client.log_artifact(parent, str(folder / "report.md"))
        main([parent, *uri, "--decide-on", "rougeL_f1"])
    finally:
        mlflow.set_tracking_uri(None)
    md, page, note = stored()
    answer = note.split("\n\n", 1)[0]
    assert "stuffing beats naive" in answer and "rougeL_f1" in answer
    assert "decided on `rougeL_f1`" in note and "decided on `rouge2_f1`" not in note
    assert "naive beats stuffing" not in note
    assert "stuffing beats naive" in md and "Comparison metric: `rougeL_f1`" in md
    # the baseline's section is kept once, in the description, report.md and report.html
    assert note.count(BASELINE_HEADING) == 1 and note.endswith("PASSED")
    assert md.count(BASELINE_SECTION) == 1 and "no regression" in md
    assert "Against the baseline" in page
