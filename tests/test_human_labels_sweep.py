"""End to end: a judged sample sweep (the real anthropic SDK against the fake judge) says
its judge is unvalidated; the sample to label is written; the same command given the
filled-in labels (``report.human_labels``) asks no model and reports again, with kappa per
dimension in the report and the agreement quoted by the console and the MLflow description."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest

from labelling import main as label_sample
from report.cli import main as report_main
from tests.anthropic_fake import FakeAnthropic
from tests.conftest import all_runs, client_for
from tests.test_judge_sweep import cli, judge

pytestmark = pytest.mark.slow
# the fake judge's unreadable replies are kept as they are (judge.reask_unreadable=0): the
# labelled re-run then has nothing to ask again, so any request it sends is a fault
SWEEP = ("-m", "system=naive,stuffing", "dataset=sample", "metrics.scorers=[rouge,geval,length]",
         "judge.reask_unreadable=0")


def latest_parent(tmp: Path):
    return max((r for r in all_runs(tmp) if r.data.tags.get("role") == "sweep_parent"),
               key=lambda r: r.info.start_time)


def parent_text(tmp: Path, name: str) -> tuple[str, str]:
    """The latest sweep parent's report.md and description."""
    client = client_for(tmp)
    parent = latest_parent(tmp)
    text = Path(client.download_artifacts(parent.info.run_id, "report.md",
                                          str(tmp / name))).read_text()
    return text, client.get_run(parent.info.run_id).data.tags["mlflow.note.content"]


def fill(template: Path, tmp: Path) -> Path:
    """ana scores as the judge did; bo, on the first coverage items, one point lower."""
    judged = {}
    for run in all_runs(tmp):
        if run.data.tags.get("system"):
            path = client_for(tmp).download_artifacts(run.info.run_id, "predictions.eval.jsonl",
                                                       str(tmp / run.info.run_id))
            for rec in map(json.loads, Path(path).read_text().splitlines()):
                judged[(run.data.tags["run_label"], rec["id"])] = rec
    lines = []
    for k, item in enumerate(map(json.loads, template.read_text().splitlines())):
        score = judged[(item["system"], item["task_id"])][item["dimension"]]
        if score is None:
            continue  # an unreadable judge reply: left unlabelled
        lines.append({**item, "score": score, "labeller": "ana"})
        if k < 8 and item["dimension"] == "geval_coverage":
            lines.append({**item, "score": max(1, score - 1), "labeller": "bo"})
    labels = tmp / "labels.jsonl"
    labels.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return labels


def test_labels_given_to_the_sweeps_own_command_report_the_judges_agreement(tmp_path):
    with FakeAnthropic(judge) as fake:
        sweep = cli(tmp_path, fake.url, *SWEEP)
        assert sweep.returncode == 0, sweep.stderr[-3000:]
        text, note = parent_text(tmp_path, "before")
        first = latest_parent(tmp_path).info.run_id
        assert "Judge unvalidated" in text and "Judge unvalidated" in note
        assert "Agreement with your labels" not in text
        template = tmp_path / "template.jsonl"
        assert label_sample([first, "--size", "12",
                             "--out", str(template), "--html", str(tmp_path / "label.html"),
                             "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"]) == 0
        items = [json.loads(x) for x in template.read_text().splitlines()]
        # the page holds the text each answer was judged against, read back from the runs
        page = (tmp_path / "label.html").read_text()
        assert "could not be read back" not in page and "was not read back" not in page
        assert page.count("<details><summary>") >= len({x["task_id"] for x in items})
        assert {x["system"] for x in items} == {"naive", "stuffing"}
        assert {x["dimension"] for x in items} == {"geval_faithfulness", "geval_coverage"}
        labels = fill(template, tmp_path)
        asked = len(fake.requests)
        again = cli(tmp_path, fake.url, *SWEEP, f"report.human_labels={labels}")
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(fake.requests) == asked  # no model asked: the records are reported again
    text, note = parent_text(tmp_path, "after")
    # other report options: a new report of those runs, the first sweep's left as it was
    assert latest_parent(tmp_path).info.run_id != first
    kept = Path(client_for(tmp_path).download_artifacts(first, "report.md",
                                                        str(tmp_path / "first"))).read_text()
    assert "Agreement with your labels" not in kept
    section = text.split("## Agreement with your labels", 1)[1]
    for dim in ("geval_faithfulness", "geval_coverage"):
        assert f"| `{dim}` | 1-5 |" in section
    # faithfulness: ana alone, who scored as the judge did
    row = next(x for x in section.splitlines() if x.startswith("| `geval_faithfulness` |"))
    assert "quadratic-weighted kappa 1.00" in row
    assert "| ana, bo |" in section.split("### Between labellers", 1)[1]
    for where in (text, note, again.stdout):
        assert "Judge checked against your labels" in where
        assert "from file labels.jsonl" in where
        assert "Judge unvalidated" not in where
    # the report command takes the same file; the description keeps one judge paragraph
    parent = latest_parent(tmp_path)
    try:
        report_main([parent.info.run_id, "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db",
                     "--human-labels", str(labels)])
    finally:
        mlflow.set_tracking_uri(None)
    rebuilt, note = parent_text(tmp_path, "rebuilt")
    assert "## Agreement with your labels" in rebuilt
    assert note.count("Judge checked against your labels") == 1
