"""dataset=ectsum: the upstream ECTSum layout -> tasks, verbatim references, mapped gold.

Tests on the real data skip when ../shared/datasets is absent; error-path tests build a
tiny upstream-shaped tree in a temporary folder and always run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arag.citations import strip_citations
from arag.datasets import DatasetError, load_dataset
from arag.datasets.ectsum import map_gold
from tests.conftest import ROOT, SHARED

ECTSUM = SHARED / "ectsum"
needs_data = pytest.mark.skipif(
    not (ECTSUM / "data" / "final" / "val").is_dir(),
    reason=f"../shared/datasets not present: {ECTSUM} (clone github.com/rajdeep345/ECTSum)")
LABELS = Path("codes") / "ECT-BPS" / "ectbps_ext" / "data"


def load(make_cfg, *overrides: str):
    return load_dataset(make_cfg("dataset=ectsum", f"dataset.root={ECTSUM}", *overrides).dataset,
                        ROOT)


@pytest.fixture(scope="module")
def val(tmp_path_factory):
    from tests.conftest import compose_cfg
    if not (ECTSUM / "data" / "final" / "val").is_dir():
        pytest.skip(f"../shared/datasets not present: {ECTSUM}")
    return load_dataset(compose_cfg(["dataset=ectsum", f"dataset.root={ECTSUM}",
                                     "dataset.split=val"]).dataset, ROOT)


@needs_data
def test_val_loads_249_tasks_in_file_name_order(val):
    assert len(val.tasks) == 249
    ids = [t.id for t in val.tasks]
    assert ids == sorted(ids)
    assert set(val.corpus.documents) == set(ids)
    assert all(t.task_type == "summarization" and t.doc_ids == (t.id,) for t in val.tasks)


@needs_data
def test_question_and_document_come_from_the_file_name(val):
    task = next(t for t in val.tasks if t.id == "ABM_q1_2021")
    assert task.question == "Summarize the key highlights from ABM's Q1 2021 earnings call."
    doc = val.corpus.documents["ABM_q1_2021"]
    assert (doc.ticker, doc.company, doc.period, doc.doc_type) == (
        "ABM", "ABM", "Q1 2021", "EARNINGS_CALL")
    assert doc.header == "[COMPANY: ABM | TYPE: EARNINGS_CALL | PERIOD: Q1 2021]"
    raw = (ECTSUM / "data/final/val/ects/ABM_q1_2021.txt").read_text(encoding="utf-8")
    assert doc.lines == tuple(raw.splitlines())


@needs_data
def test_references_are_verbatim(val):
    folder = ECTSUM / "data" / "final" / "val" / "gt_summaries"
    for task in val.tasks:
        raw = (folder / f"{task.id}.txt").read_text(encoding="utf-8")
        assert task.reference == raw.strip(), task.id  # this data has no stray whitespace
        assert task.meta["uses_compname"] == ("compname" in raw)
    with_placeholder = [t for t in val.tasks if t.meta["uses_compname"]]
    assert len(with_placeholder) == 70  # kept, not replaced: ROUGE stays comparable
    assert any("70 of 249" in note for note in val.notes)


@needs_data
def test_all_val_key_sentences_map_to_transcript_lines(val):
    report = val.reports["gold_mapping"]
    assert report["totals"] == {"n_documents": 249, "n_positive": 1000, "n_mapped": 1000,
                                "n_unmapped": 0, "n_documents_without_labels": 0}
    # each gold line is a label-1 line of the authors' filtered transcript
    rows = (ECTSUM / LABELS / "val.json").read_text(encoding="utf-8").splitlines()
    names = (ECTSUM / LABELS / "val_files.txt").read_text(encoding="utf-8").split()
    row = json.loads(rows[names.index("ABM_q1_2021.txt")])
    positives = [line for line, y in zip(row["doc"].split("\n"), row["labels"].split("\n"),
                                         strict=True) if y == "1"]
    task = next(t for t in val.tasks if t.id == "ABM_q1_2021")
    doc = val.corpus.documents[task.id]
    gold = task.gold_lines[task.id]
    assert len(gold) == len(positives) == report["documents"][task.id]["n_mapped"]
    assert sorted(doc.lines[g - 1] for g in gold) == sorted(positives)


@needs_data
def test_limit_is_deterministic(make_cfg, val):
    a = load(make_cfg, "dataset.split=val", "dataset.limit=4")
    b = load(make_cfg, "dataset.split=val", "dataset.limit=4")
    assert [t.id for t in a.tasks] == [t.id for t in b.tasks] == [t.id for t in val.tasks[:4]]
    assert set(a.corpus.documents) == {t.id for t in a.tasks}
    assert a.reports["gold_mapping"]["totals"]["n_documents"] == 4


@needs_data
def test_missing_split_names_the_splits_there_are(make_cfg):
    with pytest.raises(DatasetError) as err:
        load(make_cfg, "dataset.split=nosuch")
    message = str(err.value)
    assert "'nosuch' not found" in message and "'train'" in message and "'val'" in message
    assert "dataset.split" in message and "github.com/rajdeep345/ECTSum" in message


@needs_data
def test_train_has_no_labels_gold_none_with_note(make_cfg):
    ds = load(make_cfg, "dataset.split=train", "dataset.limit=3")
    assert len(ds.tasks) == 3 and all(t.gold_lines is None for t in ds.tasks)
    assert "gold_mapping" not in ds.reports
    assert any("retrieval metrics are null" in note for note in ds.notes)


@needs_data
def test_style_examples_come_from_train(make_cfg):
    ds = load(make_cfg, "dataset.split=val", "dataset.limit=2", "dataset.options.style_examples=3")
    train = sorted((ECTSUM / "data/final/train/gt_summaries").glob("*.txt"))[:3]
    expected = [p.read_text(encoding="utf-8").strip() for p in train]
    val_refs = {t.reference for t in load(make_cfg, "dataset.split=val").tasks}
    for task in ds.tasks:
        assert task.meta["style_examples"] == expected
        assert not set(task.meta["style_examples"]) & val_refs
    assert "style_examples" not in load(make_cfg, "dataset.split=val",
                                        "dataset.limit=1").tasks[0].meta
    with pytest.raises(DatasetError, match="train split, which is the split being evaluated"):
        load(make_cfg, "dataset.split=train", "dataset.limit=2",
             "dataset.options.style_examples=1")


# --- error paths on a tiny upstream-shaped tree ---------------------------------------------

def write_tree(root: Path, split: str = "val", docs: dict[str, list[str]] | None = None,
               labels: bool = True) -> Path:
    docs = docs or {
        "AAN_q3_2021": ["Good morning.", "Revenue rose 5% to $452.2 million.", "Thank you.",
                        "Revenue rose 5% to $452.2 million."],
        "BRK_B_q1_2020": ["Hello.", "EPS was $1.10.", "Goodbye."],
    }
    for name, lines in docs.items():
        for sub, text in (("ects", "\n".join(lines) + "\n"),
                          ("gt_summaries", "q3 revenue rose 5 percent.\n compname  sees growth.\n")):
            path = root / "data" / "final" / split / sub / f"{name}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if labels:
        rows, names = [], []
        for name, lines in docs.items():
            doc = [line for line in lines if any(c.isdigit() for c in line)]
            rows.append(json.dumps({"doc": "\n".join(doc), "labels": "\n".join("1" for _ in doc),
                                    "summaries": ""}))
            names.append(f"{name}.txt")
        (root / LABELS).mkdir(parents=True, exist_ok=True)
        (root / LABELS / f"{split}.json").write_text("\n".join(rows) + "\n")
        (root / LABELS / f"{split}_files.txt").write_text("\n".join(names) + "\n")
    return root


def test_tiny_tree_loads_with_duplicate_lines_mapped_once_each(make_cfg, tmp_path):
    root = write_tree(tmp_path / "ect")
    ds = load(make_cfg, f"dataset.root={root}", "dataset.split=val")
    aan = next(t for t in ds.tasks if t.id == "AAN_q3_2021")
    assert aan.gold_lines == {"AAN_q3_2021": (2, 4)}  # the repeated line takes both occurrences
    assert aan.reference == "q3 revenue rose 5 percent.\ncompname sees growth."
    assert aan.meta["uses_compname"] is True
    brk = next(t for t in ds.tasks if t.id == "BRK_B_q1_2020")
    assert brk.question == "Summarize the key highlights from BRK_B's Q1 2020 earnings call."


def test_unmapped_key_sentences_are_counted_not_dropped():
    lines = ("Revenue rose 5%.", "EPS   was $1.10.", "Revenue rose 5%.")
    mapped, unmapped = map_gold(lines, ["EPS was $1.10.", "Revenue rose 5%.", "Revenue rose 5%.",
                                        "Revenue rose 5%.", "Not in the transcript 1."])
    assert mapped == (1, 2, 3)
    assert unmapped == ["Revenue rose 5%.", "Not in the transcript 1."]


def test_unmapped_lines_appear_in_the_report(make_cfg, tmp_path):
    root = write_tree(tmp_path / "ect")
    path = root / LABELS / "val.json"
    rows = path.read_text().splitlines()
    row = json.loads(rows[0])
    row["doc"] += "\nA line that is not in the transcript 42."
    row["labels"] += "\n1"
    rows[0] = json.dumps(row)
    path.write_text("\n".join(rows) + "\n")
    ds = load(make_cfg, f"dataset.root={root}", "dataset.split=val")
    report = ds.reports["gold_mapping"]
    assert report["totals"]["n_unmapped"] == 1
    assert report["documents"]["AAN_q3_2021"]["unmapped"] == [
        "A line that is not in the transcript 42."]
    assert any("did not map" in note for note in ds.notes)


@pytest.mark.parametrize("damage,expect", [
    (lambda r: (r / "data/final/val/gt_summaries/AAN_q3_2021.txt").unlink(),
     ["AAN_q3_2021.txt", "has no reference summary"]),
    (lambda r: (r / "data/final/val/ects/AAN_q3_2021.txt").write_text("\n  \n"),
     ["ects/AAN_q3_2021.txt", "empty"]),
    (lambda r: (r / "data/final/val/ects/AAN_q3_2021.txt").write_bytes(b"Revenue \xff rose.\n"),
     ["ects/AAN_q3_2021.txt", "not valid UTF-8"]),
    (lambda r: (r / "data/final/val/ects/AAN_2021.txt").write_text("Hi 1.\n"),
     ["AAN_2021.txt", "<TICKER>_q<N>_<YYYY>.txt"]),
])
def test_bad_files_are_named(make_cfg, tmp_path, damage, expect):
    root = write_tree(tmp_path / "ect")
    damage(root)
    with pytest.raises(DatasetError) as err:
        load(make_cfg, f"dataset.root={root}", "dataset.split=val")
    for part in expect:
        assert part in str(err.value)


def test_missing_root_and_split_say_how_to_fix(make_cfg, tmp_path):
    with pytest.raises(DatasetError, match="does not exist. Fix: `make data`.*clone https://github.com/rajdeep345"):
        load(make_cfg, f"dataset.root={tmp_path / 'nope'}")
    root = write_tree(tmp_path / "ect")
    with pytest.raises(DatasetError, match=r"split 'test' not found .*\['val'\]"):
        load(make_cfg, f"dataset.root={root}")  # the yaml's default split is test


def test_split_without_labels_and_train_style_examples(make_cfg, tmp_path):
    root = write_tree(tmp_path / "ect", split="train", labels=False)
    write_tree(root, split="val")
    ds = load(make_cfg, f"dataset.root={root}", "dataset.split=train")
    assert all(t.gold_lines is None for t in ds.tasks)
    assert any("retrieval metrics are null" in n for n in ds.notes)
    ds = load(make_cfg, f"dataset.root={root}", "dataset.split=val",
              "dataset.options.style_examples=1")
    assert ds.tasks[0].meta["style_examples"] == ["q3 revenue rose 5 percent.\ncompname sees growth."]
    with pytest.raises(DatasetError, match="only 2 summaries"):
        load(make_cfg, f"dataset.root={root}", "dataset.split=val",
             "dataset.options.style_examples=5")


def upstream_test_split(root: Path, n: int) -> list[str]:
    """An upstream-shaped clone whose ``test`` split holds the first n real val calls (the
    upstream test split has the same layout; it is not in ../shared)."""
    names = (ECTSUM / LABELS / "val_files.txt").read_text(encoding="utf-8").split()[:n]
    rows = (ECTSUM / LABELS / "val.json").read_text(encoding="utf-8").splitlines()[:n]
    for name in names:
        for sub in ("ects", "gt_summaries"):
            target = root / "data" / "final" / "test" / sub / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((ECTSUM / "data" / "final" / "val" / sub / name).read_bytes())
    (root / LABELS).mkdir(parents=True)
    (root / LABELS / "test.json").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (root / LABELS / "test_files.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
    return names


@pytest.mark.slow
@needs_data
def test_test_split_sweep_end_to_end(tmp_path):
    """The issue's command on an upstream-shaped clone: one prediction per document and
    system, verbatim references, ROUGE-2 that recomputes, retrieval scores for the
    retrieving systems."""
    from rouge_score import rouge_scorer

    from tests.conftest import all_runs, client_for, run_cli

    clone = tmp_path / "ECTSum"
    names = upstream_test_split(clone, 4)
    done = run_cli(tmp_path, "system=arag,naive,stuffing", "dataset=ectsum",
                   f"dataset.root={clone}", "dataset.split=test")
    assert done.returncode == 0, done.stderr[-3000:]
    client = client_for(tmp_path)
    children = [r for r in all_runs(tmp_path) if r.data.tags.get("system")]
    assert sorted(r.data.tags["system"] for r in children) == ["arag", "naive", "stuffing"]
    scorer = rouge_scorer.RougeScorer(["rouge2"], use_stemmer=True)
    for run in children:
        assert run.info.status == "FINISHED" and run.data.metrics["n_errors"] == 0
        path = client.download_artifacts(run.info.run_id, "predictions.jsonl",
                                         str(tmp_path / run.info.run_id))
        preds = [json.loads(line) for line in Path(path).read_text().splitlines()]
        assert sorted(p["id"] for p in preds) == sorted(n.removesuffix(".txt") for n in names)
        for p in preds:
            raw = (clone / "data" / "final" / "test" / "gt_summaries" / f"{p['id']}.txt")
            assert p["ground_truth"] == "\n".join(
                " ".join(line.split()) for line in raw.read_text().splitlines() if line.strip())
        rouge2 = [scorer.score(p["ground_truth"], strip_citations(p["predicted"]))["rouge2"].fmeasure
                  for p in preds]
        assert run.data.metrics["rouge2_f1_mean"] == pytest.approx(sum(rouge2) / len(rouge2),
                                                                 rel=1e-3)
        retrieves = run.data.tags["system"] in ("arag", "naive")
        for key in ("retrieval_recall_mean", "retrieval_precision_mean"):
            assert (key in run.data.metrics) == retrieves
        if retrieves:
            assert 0 < run.data.metrics["retrieval_recall_mean"] <= 1
