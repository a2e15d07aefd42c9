"""The dataset contract: one validating loader, errors that name file, line and field."""

from __future__ import annotations

import json

import pytest

from arag.datasets import DatasetError, load_dataset
from tests.conftest import ROOT, write_mini_dataset


def load(make_cfg, root):
    return load_dataset(make_cfg(f"dataset.root={root}").dataset, ROOT)


def test_sample_dataset_meets_its_contract(make_cfg):
    ds = load_dataset(make_cfg().dataset, ROOT)
    assert len(ds.tasks) >= 5
    for task in ds.tasks:
        doc = ds.corpus.documents[task.doc_ids[0]]
        assert len(doc.text.split()) >= 1500, doc.doc_id
        assert task.reference == task.reference.lower(), "ECTSum style: lower-case bullets"
        assert task.gold_lines and all(1 <= g <= len(doc.lines) for g in task.gold_lines[doc.doc_id])
        assert doc.company and doc.period


def test_mini_dataset_loads(make_cfg, mini_dataset):
    ds = load(make_cfg, mini_dataset)
    assert [t.id for t in ds.tasks] == ["T0X_q3_2024", "T1X_q3_2024"]
    assert ds.corpus.documents["T0X_q3_2024"].header == (
        "[COMPANY: T0X | TYPE: EARNINGS_CALL | PERIOD: Q3 2024]")


def _rewrite_tasks(root, mutate):
    path = root / "tasks.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text(mutate(rows))
    return path


def test_a_task_can_say_its_documents_hold_no_answer(make_cfg, tmp_path):
    root = write_mini_dataset(tmp_path / "unanswerable")
    _rewrite_tasks(root, lambda rows: "".join(json.dumps({**r, "answerable": i == 0}) + "\n"
                                              for i, r in enumerate(rows)))
    assert [t.answerable for t in load(make_cfg, root).tasks] == [True, False]


@pytest.mark.parametrize("mutate,expect", [
    (lambda rows: json.dumps(rows[0]) + "\n{not json\n", ["tasks.jsonl:2", "malformed JSON"]),
    (lambda rows: json.dumps({k: v for k, v in rows[0].items() if k != "reference"}) + "\n",
     ["tasks.jsonl:1", "'reference'", "missing required field"]),
    (lambda rows: json.dumps(rows[0]) + "\n" + json.dumps(rows[0]) + "\n",
     ["tasks.jsonl:2", "duplicate task id", "first at line 1"]),
    (lambda rows: json.dumps({**rows[0], "doc_ids": ["NOPE"]}) + "\n",
     ["tasks.jsonl:1", "'NOPE'", "doc_ids"]),
    (lambda rows: json.dumps({**rows[0], "gold_lines": {rows[0]["doc_ids"][0]: [9999]}}) + "\n",
     ["tasks.jsonl:1", "gold_lines", "9999", "out of range"]),
    (lambda rows: json.dumps({**rows[0], "answerable": "no"}) + "\n",
     ["tasks.jsonl:1", "answerable", "true or false"]),
    (lambda rows: json.dumps({**rows[0], "gold_line": {}}) + "\n",
     ["tasks.jsonl:1", "unknown field 'gold_line'", "did you mean 'gold_lines'", "'reference'"]),
    (lambda rows: json.dumps({**rows[0], "gold_lines": {rows[0]["doc_ids"][0]: [20, True]}})
     + "\n", ["tasks.jsonl:1", "'gold_lines'", "whole numbers", "True"]),
    (lambda rows: json.dumps({**rows[0], "gold_lines": {rows[0]["doc_ids"][0]: [1.5]}}) + "\n",
     ["tasks.jsonl:1", "'gold_lines'", "1.5"]),
    (lambda rows: json.dumps(rows[0])[:-1] + ', "question": "Another question?"}\n',
     ["tasks.jsonl:1", "'question'", "appears twice"]),
    (lambda rows: json.dumps({**rows[0], "question": " \t "}) + "\n",
     ["tasks.jsonl:1", "'question'", "non-empty str"]),
    (lambda rows: json.dumps({**rows[0], "doc_ids": [rows[0]["doc_ids"]]}) + "\n",
     ["tasks.jsonl:1", "'doc_ids'", "list of non-empty strings"]),
])
def test_bad_task_files_name_file_line_and_field(make_cfg, tmp_path, mutate, expect):
    root = write_mini_dataset(tmp_path / "bad")
    _rewrite_tasks(root, mutate)
    with pytest.raises(DatasetError) as err:
        load(make_cfg, root)
    for part in expect:
        assert part in str(err.value)


def test_empty_and_non_utf8_documents_are_rejected(make_cfg, tmp_path):
    root = write_mini_dataset(tmp_path / "empty")
    (root / "documents" / "T0X_q3_2024.txt").write_text("\n\n")
    with pytest.raises(DatasetError, match="T0X_q3_2024.txt: document is empty"):
        load(make_cfg, root)
    root = write_mini_dataset(tmp_path / "latin1")
    (root / "documents" / "T1X_q3_2024.txt").write_bytes("Umsatz stieg um 5 \xe9".encode("latin-1"))
    with pytest.raises(DatasetError, match="T1X_q3_2024.txt: not valid UTF-8"):
        load(make_cfg, root)


def test_missing_document_file_names_the_record(make_cfg, tmp_path):
    root = write_mini_dataset(tmp_path / "missing")
    (root / "documents" / "T1X_q3_2024.txt").unlink()
    with pytest.raises(DatasetError) as err:
        load(make_cfg, root)
    assert "documents.jsonl:2" in str(err.value) and "'path'" in str(err.value)


def test_limit_takes_first_tasks_and_their_documents(make_cfg, tmp_path):
    root = write_mini_dataset(tmp_path / "lim", n_docs=3)
    ds = load_dataset(make_cfg(f"dataset.root={root}", "dataset.limit=2").dataset, ROOT)
    assert [t.id for t in ds.tasks] == ["T0X_q3_2024", "T1X_q3_2024"]
    assert sorted(ds.corpus.documents) == ["T0X_q3_2024", "T1X_q3_2024"]


@pytest.mark.parametrize("path,expect", [
    ("/etc/passwd", "leads outside dataset.root"),
    ("../outside.txt", "leads outside dataset.root"),
    ("documents", "is a directory, not a document file"),
])
def test_document_paths_stay_inside_the_root_and_name_files(make_cfg, tmp_path, path, expect):
    root = write_mini_dataset(tmp_path / "escape")
    (tmp_path / "outside.txt").write_text("A secret line.\n")
    docs = root / "documents.jsonl"
    rows = [json.loads(line) for line in docs.read_text().splitlines()]
    rows[1]["path"] = path
    docs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DatasetError) as err:
        load(make_cfg, root)
    assert "documents.jsonl:2 (field 'path')" in str(err.value) and expect in str(err.value)
    assert "Fix" in str(err.value) or "names one text file" in str(err.value)


def test_separators_inside_a_line_keep_gold_on_its_line(make_cfg, tmp_path):
    """Form feed, U+2028, U+0085 and friends are not line breaks in the datasets' numbering."""
    root = write_mini_dataset(tmp_path / "ff")
    doc = root / "documents" / "T0X_q3_2024.txt"
    lines = doc.read_text().split("\n")
    lines[4] = "Page two\x0cof the call\u2028continues\x85here\x1cand\u2029on."
    doc.write_text("\n".join(lines))
    ds = load(make_cfg, root)
    task = ds.tasks[0]
    document = ds.corpus.documents["T0X_q3_2024"]
    gold = [document.lines[n - 1] for n in task.gold_lines["T0X_q3_2024"]]
    assert gold[0].startswith("Third quarter revenue rose") and "per share" in gold[1]
    assert document.lines[4] == "Page two of the call continues here and on."
