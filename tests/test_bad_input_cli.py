"""Bad input through the real command: each kind stops with a message that names the file,
line, field or key and says how to fix it; the command exits non-zero; the sweep is
checked before its parent run opens, so no run is left at all.

The loader-level details of each kind are tested in test_dataset, test_ectsum,
test_financebench and test_config; this suite shows the same errors reach the user of
`run.py -m`. Kinds whose input the run can survive (a truncated index cache, a corrupt
response-cache entry, a missing FinanceBench PDF) are tested where they are handled.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import all_runs, run_cli, write_mini_dataset
from tests.test_ectsum import write_tree as write_ectsum_tree

pytestmark = pytest.mark.slow


def _tasks(root: Path, mutate: Callable[[list[dict]], list[dict]]) -> None:
    path = root / "tasks.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(r) + "\n" for r in mutate(rows)))


def _document_path(root: Path, path: str) -> None:
    docs = root / "documents.jsonl"
    rows = [json.loads(line) for line in docs.read_text().splitlines()]
    docs.write_text("".join(json.dumps({**r, "path": path}) + "\n" for r in rows[:1]) +
                    "".join(json.dumps(r) + "\n" for r in rows[1:]))


def _document(root: Path, content: bytes) -> None:
    next((root / "documents").glob("*.txt")).write_bytes(content)


def mini(mutate: Callable[[Path], None]) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        root = write_mini_dataset(tmp / "data")
        mutate(root)
        return [f"dataset.root={root}"]

    return setup


def ectsum(*extra: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        root = write_ectsum_tree(tmp / "ECTSum", split="val")
        return ["dataset=ectsum", f"dataset.root={root}", *extra]

    return setup


CASES = {
    "missing field": (
        mini(lambda r: _tasks(r, lambda rows: [{k: v for k, v in rows[0].items()
                                                if k != "reference"}])),
        ["tasks.jsonl:1", "'reference'", "add it to this record"]),
    "duplicate task id": (
        mini(lambda r: _tasks(r, lambda rows: [rows[0], rows[0]])),
        ["tasks.jsonl:2", "duplicate task id", "must be unique"]),
    "empty transcript": (
        mini(lambda r: _document(r, b"\n\n")),
        ["T0X_q3_2024.txt", "document is empty", "restore its text"]),
    "non-UTF-8 file": (
        mini(lambda r: _document(r, "Umsatz stieg um 5 %.\n".encode("utf-16"))),
        ["T0X_q3_2024.txt", "not valid UTF-8", "re-save the file as UTF-8"]),
    "gold line out of range": (
        mini(lambda r: _tasks(r, lambda rows: [{**rows[0], "gold_lines": {
            rows[0]["doc_ids"][0]: [9999]}}])),
        ["tasks.jsonl:1", "gold_lines", "9999", "out of range", "fix gold_lines"]),
    "document path outside dataset.root": (
        mini(lambda r: _document_path(r, "/etc/passwd")),
        ["documents.jsonl:1 (field 'path')", "leads outside dataset.root", "Fix: move the file"]),
    "misspelt task field": (
        mini(lambda r: _tasks(r, lambda rows: [{**rows[0], "gold_line": {}}])),
        ["tasks.jsonl:1 (field 'gold_line')", "did you mean 'gold_lines'"]),
    "zero target_length": (
        lambda tmp: ["target_length=0"],
        ["target_length=0", "Fix: target_length="]),
    "split not in the dataset root": (
        ectsum("dataset.split=test"),
        ["split 'test' not found", "['val']", "dataset.split"]),
    "unknown dataset option": (
        ectsum("dataset.split=val", "+dataset.options.few_shot=2"),
        ["unknown dataset.options", "few_shot", "style_examples"]),
    "dataset root that does not exist": (
        lambda tmp: ["dataset=ectsum", f"dataset.root={tmp}/nowhere"],
        ["nowhere", "does not exist", "make data", "dataset.root="]),
    "misspelt system": (
        lambda tmp: ["system=naiv"],
        ["system=naiv is not a system option. Did you mean naive? Fix: system=naive"]),
    "misspelt dataset": (
        lambda tmp: ["dataset=ectsun"],
        ["Did you mean ectsum? Fix: dataset=ectsum", "make data"]),
    "misspelt value of a typed key": (
        lambda tmp: ["retrieval.scope=documnt"],
        ["retrieval.scope takes one of document, corpus. Did you mean document? "
         "Fix: retrieval.scope=document"]),
    "Claude model without a key": (
        lambda tmp: ["model=claude-haiku-4-5"],
        ["ANTHROPIC_API_KEY", "export ANTHROPIC_API_KEY=", "model=offline"]),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_bad_input_stops_the_command_with_where_and_how_to_fix(kind, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    setup, expected = CASES[kind]
    done = run_cli(tmp_path, "system=naive", *setup(tmp_path))
    assert done.returncode != 0, done.stderr[-2000:]
    for part in expected:
        assert part in done.stderr, (part, done.stderr[-2000:])
    runs = all_runs(tmp_path) if (tmp_path / "mlflow.db").exists() else []
    assert runs == [], kind
