"""The dataset digest: what a dataset holds, in the identity of every run that reads it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from omegaconf import OmegaConf

from arag.config import DatasetConfig
from arag.datasets import load_dataset
from runners.settings import read
from tests.conftest import ROOT, write_mini_dataset


def _load(root: Path, **options):
    cfg = OmegaConf.structured(DatasetConfig(name="mini", adapter="jsonl", root=str(root),
                                             **options))
    return load_dataset(cfg, ROOT)


def test_digest_follows_content_not_place(tmp_path):
    root = write_mini_dataset(tmp_path / "a")
    first = _load(root)
    assert len(first.digest) == 16 and set(first.task_digests) == {t.id for t in first.tasks}
    assert _load(root).digest == first.digest  # loading again changes nothing
    moved = shutil.copytree(root, tmp_path / "elsewhere")
    assert _load(moved).digest == first.digest  # the same files at another root


def test_an_edited_document_changes_the_digest_of_the_tasks_that_read_it_only(tmp_path):
    root = write_mini_dataset(tmp_path / "a")
    before = _load(root)
    doc = root / "documents" / "T0X_q3_2024.txt"
    doc.write_text(doc.read_text().replace("8.0 percent", "9.0 percent"))
    after = _load(root)
    assert after.digest != before.digest
    assert after.task_digests["T0X_q3_2024"] != before.task_digests["T0X_q3_2024"]
    assert after.task_digests["T1X_q3_2024"] == before.task_digests["T1X_q3_2024"]


def test_an_edited_reference_or_question_changes_its_task_digest(tmp_path):
    root = write_mini_dataset(tmp_path / "a")
    before = _load(root)
    rows = [json.loads(line) for line in (root / "tasks.jsonl").read_text().splitlines()]
    rows[1]["reference"] = "q3 revenue fell."
    (root / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    after = _load(root)
    assert after.task_digests["T1X_q3_2024"] != before.task_digests["T1X_q3_2024"]
    assert after.task_digests["T0X_q3_2024"] == before.task_digests["T0X_q3_2024"]
    assert after.digest != before.digest


def test_limit_digests_what_the_run_reads(tmp_path):
    root = write_mini_dataset(tmp_path / "a", n_docs=3)
    assert _load(root, limit=2).digest != _load(root).digest
    assert _load(root, limit=2).task_digests == {
        k: v for k, v in _load(root).task_digests.items() if k != "T2X_q3_2024"}


def test_the_digest_joins_run_and_predictions_identity(make_cfg, tmp_path):
    settings = read(make_cfg("dataset=sample"))
    a, b = settings.with_dataset("aaaa"), settings.with_dataset("bbbb")
    assert a.config_hash != b.config_hash and a.predictions_hash != b.predictions_hash
    assert a.config_hash != settings.config_hash
    assert settings.with_dataset("aaaa").config_hash == a.config_hash
    assert a.dataset_digest == "aaaa"


def test_the_dataset_is_the_runs_mlflow_dataset_input_with_the_same_digest(tmp_path):
    from mlflow import MlflowClient

    from tracking.runs import RunTracker

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.create_experiment("mini", artifact_location=(tmp_path / "a").as_uri())
    run = client.create_run(exp)
    tracker = RunTracker(client, run.info.run_id, exp)
    tracker.log_dataset("mini", "0123456789abcdef", tmp_path, {"n_documents": 2, "n_tasks": 3})
    (logged,) = client.get_run(run.info.run_id).inputs.dataset_inputs
    assert (logged.dataset.name, logged.dataset.digest) == ("mini", "0123456789abcdef")
    assert json.loads(logged.dataset.profile) == {"n_documents": 2, "n_tasks": 3}
    assert {t.key: t.value for t in logged.tags}["n_tasks"] == "3"


def test_resume_answers_again_only_the_tasks_whose_content_changed(tmp_path, caplog):
    from runners.predict import predict
    from tests.test_predict import CountingSystem, _tasks

    log, tasks = tmp_path / "predictions.jsonl", _tasks(3)
    first = predict(CountingSystem(), tasks, log, source="s", progress=False,
                    task_digests={"t0": "a", "t1": "b", "t2": "c"})
    assert [p.task_digest for p in first.predictions] == ["a", "b", "c"]
    system = CountingSystem()
    with caplog.at_level("INFO"):
        again = predict(system, tasks, log, source="s", progress=False,
                        task_digests={"t0": "a", "t1": "B", "t2": "c"})
    assert system.calls == ["t1"]
    assert (again.n_resumed, again.n_changed, again.n_new) == (2, 1, 1)
    assert "2 of 3 answers kept, 1 answered again" in caplog.text
    assert again.predictions[1].task_digest == "B"


def test_the_report_states_the_data_and_when_runs_read_different_data():
    from report.writers.markdown import data_line

    row = {"dataset": "my_calls", "dataset_digest": "d1", "n_documents": 2.0, "n_tasks": 3.0}
    same = data_line([{**row, "run": "arag"}, {**row, "run": "naive"}])
    assert same == "Data: `my_calls`, dataset digest `d1` (2 documents, 3 tasks).\n"
    mixed = data_line([{**row, "run": "arag"}, {**row, "run": "naive", "dataset_digest": "d2"}])
    assert "read different data" in mixed and "arag: `my_calls`, dataset digest `d1`" in mixed
    assert "naive: `my_calls`, dataset digest `d2`" in mixed
    repeated = data_line([{**row, "run": "arag", "n_tasks": 18.0, "repeats": 3}])
    assert "(2 documents, 6 tasks, 18 answers (3 per task))" in repeated  # never "18 tasks"
    old = data_line([{"run": "arag", "dataset": "x", "n_tasks": 3.0}])
    assert "digest unknown" in old and "unknown documents" in old


def test_a_process_reads_a_dataset_once_until_one_of_its_files_changes(tmp_path, monkeypatch):
    import arag.datasets.base as base

    root = write_mini_dataset(tmp_path / "a")
    reads: list[Path] = []
    real = base._read
    monkeypatch.setattr(base, "_read", lambda adapter, cfg, project: (
        reads.append(cfg.root), real(adapter, cfg, project))[1])
    first, second = _load(root), _load(root)
    assert len(reads) == 1  # a sweep's pre-flight and its jobs share one read
    assert second.tasks == first.tasks and second.tasks is not first.tasks
    second.tasks.pop()
    second.notes.append("a job's own note")
    third = _load(root)
    assert third.tasks == first.tasks and third.notes == first.notes  # each caller's own
    doc = root / "documents" / "T0X_q3_2024.txt"
    doc.write_text(doc.read_text().replace("8.0 percent", "9.0 percent"))  # the same size
    assert _load(root).digest != first.digest and len(reads) == 2
    assert _load(root, limit=1).tasks == first.tasks[:1] and len(reads) == 3  # another config
