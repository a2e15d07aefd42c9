"""Nothing lost, round four: every new key refuses what it cannot use, labels are read
strictly and kindly, label-sample never destroys work, spend says who paid it, a rebuilt
report is the sweep's own, and a full disk or a bad store names the path and the key."""

from __future__ import annotations

import errno
import json
import logging
from argparse import Namespace
from pathlib import Path
from types import SimpleNamespace

import pytest

from arag.config import ConfigError
from runners.validation import validate_config
from tests.conftest import all_runs, client_for, compose_cfg, run_cli
from tracking.human_labels import LabelsError, read_labels_file

LINE = {"task_id": "t1", "system": "naive", "dimension": "geval_faithfulness", "score": 4,
        "labeller": "ana"}


def _labels(tmp_path: Path, *lines: str, name: str = "labels.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# --- item 5 and 6: duplicates, edges, caps and map keys refused with the fix ---

@pytest.mark.parametrize(("overrides", "fix"), [
    (["report.slice_by=[document_tokens,document_tokens]"], "Fix: report.slice_by=[document_tokens]"),
    (["report.slice_edges.document_tokens=[nan]"], "finite number"),
    (["report.slice_edges.document_tokens=[300,inf]"], "finite number"),
    (["report.slice_edges.document_tokens=[300,100]"], "strictly increasing"),
    (["runner.max_tasks=2"], "Fix: dataset.limit=2"),
])
def test_a_setting_it_cannot_use_is_refused_with_the_fix(overrides, fix):
    with pytest.raises(ConfigError) as refused:
        validate_config(compose_cfg(overrides))
    assert fix in str(refused.value), str(refused.value)


def test_max_tasks_with_sequential_is_still_accepted():
    validate_config(compose_cfg(["runner.sequential=true", "runner.max_tasks=2",
                                 "report.decide_on=[rouge2_f1]"]))


@pytest.mark.parametrize(("override", "fix"), [
    ("system=naive,naive,stuffing", "Fix: system=naive,stuffing"),
    ("dataset=sample,sample", "Fix: dataset=sample"),
])
def test_a_sweep_value_given_twice_is_refused_before_anything_runs(override, fix):
    from runners.preflight import job_overrides

    with pytest.raises(ConfigError) as refused:
        job_overrides([override])
    assert fix in str(refused.value)
    assert len(job_overrides(["system=naive,stuffing"])) == 2


def test_a_new_key_of_a_map_setting_is_told_it_needs_a_plus():
    from runners.cli import unknown_key_message

    said = unknown_key_message("report.equivalence_margin.rouge2_f1=0.01", compose_cfg([]))
    assert "Fix: +report.equivalence_margin.rouge2_f1=0.01" in said


# --- item 7 (and issue 66's 4 and 7): labels read strictly and kindly ---

def test_a_score_outside_the_scale_is_refused_with_its_line(tmp_path):
    path = _labels(tmp_path, json.dumps(LINE), json.dumps({**LINE, "task_id": "t2", "score": 0}))
    with pytest.raises(LabelsError) as refused:
        read_labels_file(path)
    assert f"{path}:2" in str(refused.value) and "1-5" in str(refused.value)


def test_a_repeated_key_is_refused(tmp_path):
    text = json.dumps(LINE)[:-1] + ', "score": 1}'
    with pytest.raises(LabelsError) as refused:
        read_labels_file(_labels(tmp_path, text))
    assert ":1:" in str(refused.value) and "'score'" in str(refused.value)


def test_a_byte_order_mark_is_accepted(tmp_path):
    path = _labels(tmp_path, json.dumps(LINE))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert [x.score for x in read_labels_file(path)] == [4]


def test_exact_duplicate_lines_count_once_with_a_note(tmp_path, caplog):
    other = json.dumps({**LINE, "task_id": "t2", "score": 2})
    with caplog.at_level(logging.WARNING):
        labels = read_labels_file(_labels(tmp_path, json.dumps(LINE), other, json.dumps(LINE)))
    assert sorted((x.task_id, x.score) for x in labels) == [("t1", 4), ("t2", 2)]
    assert "counted once" in caplog.text and "3 (as 1)" in caplog.text


def test_every_bad_line_is_listed_up_to_20_and_id_is_told_to_become_task_id(tmp_path):
    renamed = {("id" if k == "task_id" else k): v for k, v in LINE.items()}
    bad = [json.dumps({**renamed, "id": f"t{i}"}) for i in range(25)]
    with pytest.raises(LabelsError) as refused:
        read_labels_file(_labels(tmp_path, json.dumps(LINE), *bad))
    said = str(refused.value)
    assert "25 bad line(s)" in said and "rename id to task_id" in said
    assert sum(f"labels.jsonl:{n}:" in said for n in range(2, 27)) == 20
    assert "and 5 more" in said


def test_labels_are_checked_against_what_the_sweep_will_score():
    from runners.preflight import check_labels
    from runners.settings import read
    from tracking.human_labels import HumanLabel

    label = HumanLabel("t1", "naive", "rouge2_f1", 4, "ana", "file x", where="x.jsonl:3")
    with pytest.raises(LabelsError, match="no job of this sweep has a judge"):
        check_labels("x.jsonl", [label], [read(compose_cfg([]))])
    judged = [read(compose_cfg(["judge=claude-haiku-4-5"]))]
    with pytest.raises(LabelsError) as refused:
        check_labels("x.jsonl", [label], judged)
    assert "x.jsonl:3" in str(refused.value) and "geval_faithfulness" in str(refused.value)
    check_labels("x.jsonl", [HumanLabel("t1", "naive", "geval_faithfulness", 4, "ana", "f")],
                 judged)


@pytest.mark.slow
def test_labels_on_a_sweep_with_no_judge_are_refused_before_the_parent_opens(tmp_path):
    path = _labels(tmp_path, json.dumps(LINE))
    result = run_cli(tmp_path, "system=naive,stuffing", "dataset.limit=1",
                     f"report.human_labels={path}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "no job of this sweep has a judge" in result.stderr
    assert "Traceback" not in result.stderr and all_runs(tmp_path) == []


# --- item 8 (and issue 64's label-sample part): label-sample never destroys work ---

def _args(tmp_path: Path, **given) -> Namespace:
    return Namespace(**{"out": str(tmp_path / "labels.jsonl"), "html": None, "size": 60,
                        "force": False, **given})


def test_label_sample_never_overwrites_filled_in_labels(tmp_path, capsys):
    from labelling import main

    path = _labels(tmp_path, *(json.dumps({**LINE, "task_id": f"t{i}"}) for i in range(24)))
    before = path.read_bytes()
    assert main(["any sweep", "--out", str(path)]) == 2
    err = capsys.readouterr().err
    assert "24 filled-in label(s)" in err and "--force" in err
    assert path.read_bytes() == before  # every label intact


def test_force_keeps_the_filled_in_labels_aside(tmp_path):
    from labelling.sample import set_aside

    path = _labels(tmp_path, json.dumps(LINE))
    backup = set_aside(path)
    assert backup is not None and json.loads(backup.read_text())["score"] == 4
    assert not path.exists()
    empty = _labels(tmp_path, json.dumps({**LINE, "score": None}), name="template.jsonl")
    assert set_aside(empty) is None and empty.exists()  # a bare template needs no backup


@pytest.mark.parametrize(("given", "fix"), [
    ({"size": 0}, "Fix: --size 60"), ({"size": -3}, "Fix: --size 60"),
    ({"html": "SAME"}, "Fix: --html labels.html"),
    ({"out": "/no/such/dir/x.jsonl"}, "Fix: mkdir -p /no/such/dir"),
])
def test_label_sample_refuses_what_it_should_not_write_with_the_fix(tmp_path, given, fix):
    from labelling.sample import refusal

    if given.get("html") == "SAME":
        given = {"html": str(tmp_path / "labels.jsonl")}
    assert fix in (refusal(_args(tmp_path, **given)) or "")
    assert refusal(_args(tmp_path)) is None


def test_a_dimension_no_judge_scored_is_refused_naming_the_judged_ones(tmp_path, monkeypatch,
                                                                       capsys):
    from labelling import sample as label_sample

    monkeypatch.setattr(label_sample, "sweep_records", lambda client, ref: (
        "sweep", {"naive": [{"id": "t1", "predicted": "x", "rouge2_f1": 0.2}]}, {},
        {"naive": "r1"}))
    monkeypatch.setattr(label_sample, "judged_dimensions",
                        lambda client, ids: ["geval_coverage", "geval_faithfulness"])
    out = tmp_path / "labels.jsonl"
    assert label_sample.main(["sweep", "--dimension", "rouge2_f1", "--out", str(out),
                              "--tracking-uri", f"sqlite:///{tmp_path}/m.db"]) == 2
    err = capsys.readouterr().err
    assert "rouge2_f1" in err and "Fix: --dimension geval_coverage" in err
    assert not out.exists()


def test_the_agreement_sample_draws_the_same_tasks_for_every_run():
    from labelling.sample import shared_tasks, stratified_sample

    records = {run: [{"id": f"t{i:02d}", "predicted": "x",
                      "geval_faithfulness": 1 + (i + shift) % 5} for i in range(40)]
               for run, shift in (("arag", 0), ("naive", 0), ("stuffing", 2))}
    picked = stratified_sample(records, "geval_faithfulness", 30)
    by_run = {run: {rec["id"] for r, rec in picked if r == run} for run in records}
    assert all(len(ids) == 10 for ids in by_run.values())
    assert by_run["arag"] == by_run["naive"]  # same strata: the same tasks
    assert shared_tasks(picked, 3) >= 5  # other strata: shared wherever they allow
    assert {p for run in ("arag",) for _, p in [(r, rec["geval_faithfulness"])
            for r, rec in picked if r == run]} == {1, 2, 3, 4, 5}  # still every score


# --- item 2: spend counted whole, and who paid the earlier part ---

class _Runs:
    def __init__(self, tags: dict[str, dict[str, str]]):
        self.tags = tags

    def get_run(self, run_id):
        return SimpleNamespace(data=SimpleNamespace(tags=self.tags[run_id]))


def _run(run_id: str, journal: Path, tags: dict[str, str] | None = None):
    return SimpleNamespace(info=SimpleNamespace(run_id=run_id, end_time=None),
                           data=SimpleNamespace(tags={"spend_journal": str(journal), **(tags or {})}))


def test_spend_says_this_sweeps_rounds_an_earlier_attempt_or_another_sweep(tmp_path):
    from report.writers.tables import total_line
    from tracking import spend
    from tracking.runs import SPEND_JOURNAL_TAG

    folder = tmp_path / "runs" / "h"
    folder.mkdir(parents=True)
    lines = [("system", "me", 2, 0.01), ("system", "me", 4, 0.02), ("judge", "me", 2, 0.1),
             ("judge", "me", 4, 0.2), ("judge", "killed", 2, 0.3), ("system", "other", 2, 0.4),
             ("judge", None, 2, 0.5)]
    for kind, who, n, cost in lines:
        path = folder / ("spend.jsonl" if kind == "system" else "judge_spend.r1.jsonl")
        with path.open("a") as f:
            f.write(json.dumps({"cost_usd": cost, "attempt": "a", "sweep_run": who,
                                "round_tasks": n}) + "\n")
    run = _run("r1", folder / "spend.jsonl")
    run.data.tags = {SPEND_JOURNAL_TAG: str(folder / "spend.jsonl")}
    sweep = SimpleNamespace(info=SimpleNamespace(run_id="me"),
                            data=SimpleNamespace(tags={"sweep_overrides": "system=a,b"}))
    client = _Runs({"killed": {"sweep_overrides": "system=a,b"},
                    "other": {"sweep_overrides": "system=c"}})
    rows = [{"run": "arag", "run_id": "r1", "cost_usd_total": 0.03}]
    spend.annotate(rows, [run], None, client, sweep)
    row = rows[0]
    assert row["cost_usd_spent_total"] == pytest.approx(0.03)  # both rounds: new
    assert row["judge_cost_usd_spent_total"] == pytest.approx(0.3)  # the judge's, both rounds
    assert row["run_spend_usd"] == pytest.approx(1.53)
    assert row["spent_from"] == pytest.approx({"attempt": 0.3, "sweep": 0.4, "run": 0.5})
    line = total_line(rows)
    assert "Total spent: $0.3300 new" in line and "over its 2 rounds" in line
    assert "$0.3000 by an earlier attempt of this sweep" in line
    assert "$0.4000 by other sweeps" in line and "$0.5000 by runs outside a sweep" in line
    entries = spend.journal_entries(run)
    assert spend.spend_until(entries, 2) == pytest.approx(0.01 + 0.1 + 0.3 + 0.4 + 0.5)


# --- items 9 and 10: a full disk and a bad store name the path and the key ---

def test_a_full_disk_while_the_report_is_written_names_the_path_and_the_key(
        tmp_path, monkeypatch, caplog):
    from runners import callbacks
    from runners.callbacks import MLflowSweepCallback
    from tests.test_sweep_callback import Closing, sweep_config

    artifacts = tmp_path / "artifacts"
    cfg = compose_cfg([f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",
                       f"tracking.artifact_location={artifacts}"])

    def full(client, parent, *options, **named):
        raise OSError(errno.ENOSPC, "No space left on device", str(artifacts / "1/report.md"))

    monkeypatch.setattr(callbacks, "write_sweep_report", full)
    client = Closing()
    callback = MLflowSweepCallback()
    callback.parent, callback.client, callback.sweep_dir = {"run_id": "p1"}, client, tmp_path
    callback.storage_cfg = cfg
    with caplog.at_level(logging.ERROR), pytest.raises(SystemExit):
        callback.on_multirun_end(sweep_config(tmp_path))
    said = client.tags["report_error"]
    assert str(artifacts / "1/report.md") in said and "tracking.artifact_location" in said
    assert client.status == "FAILED" and "Traceback" not in caplog.text


@pytest.mark.parametrize(("value", "fix"), [
    ("", "export MLFLOW_TRACKING_URI=sqlite:///<dir>/mlflow.db"),
    ("garbage://x", "export MLFLOW_TRACKING_URI=sqlite:///<dir>/mlflow.db"),
    ("somefolder", "mlflow.db"),
])
def test_a_bad_mlflow_tracking_uri_names_the_variable_and_a_fix_that_works(
        value, fix, monkeypatch, tmp_path):
    from tracking.storage import StorageError, check_tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", value)
    if value == "somefolder":
        value = str(tmp_path / "somefolder")
        monkeypatch.setenv("MLFLOW_TRACKING_URI", value)
    with pytest.raises(StorageError) as refused:
        check_tracking(SimpleNamespace(uri=value, artifact_location=str(tmp_path / "a")))
    said = str(refused.value)
    assert "$MLFLOW_TRACKING_URI" in said and fix in said, said
    suggested = said.split("Fix: export MLFLOW_TRACKING_URI=")[1].split(" ")[0]
    suggested = suggested.replace("<dir>", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert check_tracking(SimpleNamespace(uri=suggested, artifact_location=str(tmp_path / "a")))


# --- items 3, 4 and 9: python -m report rebuilds the sweep's own report ---

@pytest.fixture(scope="module")
def sliced_sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sliced")
    result = run_cli(tmp, "system=naive,stuffing", "dataset=sample",
                     "report.slice_by=[document_tokens]", "report.slice_bins=2",
                     "metrics.scorers=[rouge,length]")
    assert result.returncode == 0, result.stderr[-3000:]
    parent = next(r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent")
    return tmp, parent.info.run_id


def _report(tmp: Path, run_id: str) -> str:
    folder = tmp / f"dl-{len(list(tmp.glob('dl-*')))}"
    return Path(client_for(tmp).download_artifacts(run_id, "report.md", str(folder))).read_text()


def _rebuild(tmp: Path, *args: str) -> None:
    from report.cli import main

    main([*args, "--tracking-uri", f"sqlite:///{tmp}/mlflow.db"])


@pytest.mark.slow
def test_a_rebuild_is_the_same_report_and_clears_a_failure(sliced_sweep, monkeypatch, capsys):
    tmp, run_id = sliced_sweep
    client = client_for(tmp)
    before = _report(tmp, run_id)
    assert "Where each system wins" in before
    from mlflow import MlflowClient

    logged = MlflowClient.log_artifact

    def full(self, rid, path, artifact_path=None):
        if path.endswith("compare.html"):
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return logged(self, rid, path, artifact_path)

    monkeypatch.setattr(MlflowClient, "log_artifact", full)
    with pytest.raises(SystemExit) as failed:
        _rebuild(tmp, run_id)
    assert "No space left on device" in str(failed.value.code)
    assert "tracking.artifact_location" in str(failed.value.code)
    parent = client.get_run(run_id)
    assert parent.info.status == "FAILED" and "report_error" in parent.data.tags
    monkeypatch.setattr(MlflowClient, "log_artifact", logged)
    capsys.readouterr()
    _rebuild(tmp, run_id)
    out = capsys.readouterr().out
    parent = client.get_run(run_id)
    assert parent.info.status == "FINISHED" and "report_error" not in parent.data.tags
    assert "report:" in out and "MLflow:" in out  # the verdict and where to look
    assert "Where each system wins" in _report(tmp, run_id)  # the sweep's own settings
    # an analysis that gives nothing this time leaves no artifact from before
    settings = json.loads(parent.data.tags["report_settings"])
    settings["options"]["slice_by"] = []
    client.set_tag(run_id, "report_settings", json.dumps(settings))
    _rebuild(tmp, run_id)
    rows = Path(client.download_artifacts(run_id, "slices.jsonl", str(tmp / "sl"))).read_text()
    assert rows == "" and "Where each system wins" not in _report(tmp, run_id)


@pytest.mark.slow
def test_python_m_report_refuses_what_run_py_refuses(sliced_sweep, capsys):
    tmp, run_id = sliced_sweep
    before = _report(tmp, run_id)
    with pytest.raises(SystemExit) as refused:
        _rebuild(tmp, run_id, "--decide-on", "bogus_metric")
    assert "--decide-on=['bogus_metric'] is invalid" in str(refused.value.code)
    labels = _labels(tmp, json.dumps(LINE), name="rebuild-labels.jsonl")
    with pytest.raises(SystemExit) as no_judge:  # the words run.py's pre-flight uses
        _rebuild(tmp, run_id, "--human-labels", str(labels))
    assert "no job of this sweep has a judge" in str(no_judge.value.code)
    with pytest.raises(SystemExit) as unknown:
        _rebuild(tmp, "0" * 32)
    said = str(unknown.value.code)
    assert "0" * 32 in said and f"{tmp}/mlflow.db" in said
    assert _report(tmp, run_id) == before  # nothing written


def test_full_labels_say_why_there_is_no_ppi_correction():
    from tests.test_corrected import DIM, report

    _, data = report({"arag": list(range(20)), "naive": list(range(20))})
    notes = [n for n in data["analysis"].notes if n.kind == "ppi_all_labelled"]
    assert {n.runs[0] for n in notes} == {"arag", "naive"}
    assert all(n.counts["dimension"] == DIM and n.counts["labelled"] == 20 for n in notes)
