"""ECTSum: earnings-call transcripts -> Reuters-style bullet summaries (EMNLP 2022).

Getting the data
----------------
ECTSum is not shipped with this project (GPL licence, ~100 MB). Clone the authors'
repository and point ``dataset.root`` at the clone::

    git clone https://github.com/rajdeep345/ECTSum /data/ECTSum
    python run.py -m system=arag,naive,stuffing dataset=ectsum dataset.root=/data/ECTSum

The loader reads the upstream layout unchanged (relative roots resolve against the project
root; the default ``../shared/datasets/ectsum`` is the development copy next to the
project)::

    data/final/{split}/ects/<TICKER>_q<N>_<YYYY>.txt        transcript, one sentence per line
    data/final/{split}/gt_summaries/<same name>.txt         reference, one bullet per line
    codes/ECT-BPS/ectbps_ext/data/{split}.json              key-sentence labels (JSON lines)
    codes/ECT-BPS/ectbps_ext/data/{split}_files.txt         file of each row of {split}.json

``dataset.split`` is ``test`` (the paper's evaluation split, 495 calls), ``val`` (249) or
``train`` (1,681). ``dataset.limit=N`` takes the first N transcripts in file-name order.

What a task is
--------------
One task per transcript, id = file stem (``AAN_q3_2021``); question "Summarize the key
highlights from AAN's Q3 2021 earnings call." (ticker, quarter and year are only in the
file name). The reference is the gold summary verbatim up to whitespace: each bullet's
whitespace is collapsed and bullets are joined with "\\n". About a third of the references
use the placeholder ``compname`` for the company; it is kept (ROUGE stays comparable with
published numbers) and ``Task.meta["uses_compname"]`` marks those tasks.

Retrieval gold
--------------
ECTSum has no human key-sentence annotation; the authors' ECT-BPS extractive labels are
the best silver gold. Each row of ``{split}.json`` holds a *filtered* transcript (``doc``:
lines with numbers or label 1) and aligned 0/1 ``labels``. Every label-1 line is mapped to
its 1-based line number in the full transcript (exact match after whitespace
normalisation; a line that occurs twice takes the first occurrence not used yet). Lines
that do not map are counted, never silently dropped: ``Dataset.reports["gold_mapping"]``
lists n_positive / n_mapped / unmapped lines per document, with totals. Upstream ships
labels for val and test only, so ``split=train`` runs with ``gold_lines=None`` (retrieval
metrics null, with a note).

Options (``dataset.options``)
-----------------------------
``style_examples: k`` (default 0): store the first k reference summaries of the *train*
split (file-name order) in every task's ``Task.meta["style_examples"]`` (a list of
strings), for few-shot style calibration by the prompt. Never taken from the evaluated
split; evaluating ``split=train`` with k > 0 is refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arag.datasets.base import (
    Dataset,
    DatasetError,
    missing_root,
    read_text_lines,
    read_utf8,
    register_adapter,
    resolve_root,
    split_lines,
    validate,
)
from arag.records import Corpus, Document, Task

UPSTREAM = "https://github.com/rajdeep345/ECTSum"
SPLITS_DIR = Path("data") / "final"
LABELS_DIR = Path("codes") / "ECT-BPS" / "ectbps_ext" / "data"
NAME = re.compile(r"^(?P<ticker>.+)_q(?P<quarter>[1-4])_(?P<year>\d{4})$")
PLACEHOLDER = "compname"


def normalise(line: str) -> str:
    return " ".join(line.split())


def parse_name(path: Path) -> tuple[str, int, int]:
    """``AAN_q3_2021.txt`` -> ("AAN", 3, 2021)."""
    m = NAME.match(path.stem)
    if not m:
        raise DatasetError("file name must be <TICKER>_q<N>_<YYYY>.txt (ticker, quarter and year "
                           "come only from the name); rename the file or remove it", path)
    return m["ticker"], int(m["quarter"]), int(m["year"])


def question_for(ticker: str, quarter: int, year: int) -> str:
    return f"Summarize the key highlights from {ticker}'s Q{quarter} {year} earnings call."


def available_splits(root: Path) -> list[str]:
    base = root / SPLITS_DIR
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / "ects").is_dir())


def split_dir(root: Path, split: str) -> Path:
    """``data/final/<split>``, or an error that lists the splits there are and the fix."""
    if not root.is_dir():
        raise missing_root(root, UPSTREAM)
    folder = root / SPLITS_DIR / split
    if not (folder / "ects").is_dir():
        found = available_splits(root)
        have = (f"splits present under {root / SPLITS_DIR}: {found}" if found
                else f"{root} has no {SPLITS_DIR}/<split>/ects folders at all")
        raise DatasetError(
            f"split {split!r} not found ({have}). Fix: set dataset.split to one of {found}, or "
            f"point dataset.root at a full clone of {UPSTREAM} (it has train, val and test)",
            folder / "ects")
    return folder


def read_reference(path: Path, transcript: Path) -> str:
    """The gold summary verbatim, up to whitespace: bullets joined with "\\n"."""
    if not path.exists():
        raise DatasetError(f"transcript {transcript.name} has no reference summary; restore "
                           f"{path.name} in gt_summaries/ or remove the transcript", path)
    text = read_utf8(path, "reference summary not found")
    bullets = [normalise(line) for line in split_lines(text)]
    reference = "\n".join(b for b in bullets if b)
    if not reference:
        raise DatasetError("reference summary is empty; restore it or remove the transcript",
                           path)
    return reference


def transcript_files(folder: Path) -> list[Path]:
    files = sorted((folder / "ects").glob("*.txt"), key=lambda p: p.name)
    if not files:
        raise DatasetError("no transcripts (*.txt) in this folder; check dataset.root and "
                           "dataset.split", folder / "ects")
    return files


def read_labels(root: Path, split: str) -> tuple[dict[str, list[str]] | None, Path]:
    """file name -> label-1 lines of the authors' filtered doc; None when the split has none."""
    labels_path = root / LABELS_DIR / f"{split}.json"
    files_path = root / LABELS_DIR / f"{split}_files.txt"
    if not labels_path.exists():
        return None, labels_path
    if not files_path.exists():
        raise DatasetError(f"{labels_path.name} needs its row order in {files_path.name} (one "
                           "file name per line); restore it from the upstream repository",
                           files_path)
    try:
        rows = split_lines(labels_path.read_text(encoding="utf-8-sig"))
        names = [n.strip() for n in split_lines(files_path.read_text(encoding="utf-8-sig"))]
    except UnicodeDecodeError as exc:
        raise DatasetError(f"not valid UTF-8 ({exc.reason} at byte {exc.start})",
                           labels_path) from None
    rows = [r for r in rows if r.strip()]
    names = [n for n in names if n]
    if len(rows) != len(names):
        raise DatasetError(f"{len(rows)} label rows but {len(names)} file names in "
                           f"{files_path.name}; the two files must be aligned row by row",
                           labels_path)
    positives: dict[str, list[str]] = {}
    for n, (raw, name) in enumerate(zip(rows, names, strict=True), start=1):
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"malformed JSON ({exc.msg} at column {exc.colno})", labels_path,
                               n) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("doc"), str) or not isinstance(
                obj.get("labels"), str):
            raise DatasetError("each row must be an object with string fields 'doc' and "
                               "'labels'", labels_path, n)
        doc, labels = obj["doc"].split("\n"), obj["labels"].split("\n")
        if len(doc) != len(labels):
            raise DatasetError(f"'doc' has {len(doc)} lines but 'labels' has {len(labels)}; "
                               f"they must be aligned (row for {name})", labels_path, n,
                               "labels")
        if name in positives:
            raise DatasetError(f"{name} is listed twice in {files_path.name}", files_path, n)
        positives[name] = [line for line, y in zip(doc, labels, strict=True)
                           if y.strip() == "1"]
    return positives, labels_path


def map_gold(lines: tuple[str, ...], positives: list[str]) -> tuple[tuple[int, ...], list[str]]:
    """Label-1 lines -> sorted 1-based line numbers in the transcript, and the unmapped lines."""
    where: dict[str, list[int]] = {}
    for number, line in enumerate(lines, start=1):
        where.setdefault(normalise(line), []).append(number)
    used: set[int] = set()
    mapped, unmapped = [], []
    for positive in positives:
        free = [n for n in where.get(normalise(positive), []) if n not in used]
        if free:
            used.add(free[0])
            mapped.append(free[0])
        else:
            unmapped.append(positive)
    return tuple(sorted(mapped)), unmapped


def style_examples(root: Path, split: str, k: Any) -> list[str]:
    """The first k train references (file-name order), for few-shot style calibration."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise DatasetError(f"dataset.options.style_examples must be a whole number >= 0 "
                           f"(got {k!r})")
    if k == 0:
        return []
    if split == "train":
        raise DatasetError("dataset.options.style_examples takes its examples from the train "
                           "split, which is the split being evaluated: that would leak "
                           "references into prompts. Evaluate val or test, or set "
                           "dataset.options.style_examples=0")
    folder = split_dir(root, "train")
    examples = []
    for transcript in transcript_files(folder)[:k]:
        examples.append(read_reference(folder / "gt_summaries" / transcript.name, transcript))
    if len(examples) < k:
        raise DatasetError(f"dataset.options.style_examples={k} but the train split has only "
                           f"{len(examples)} summaries", folder / "gt_summaries")
    return examples


@dataclass
class GoldMapping:
    """The split's key-sentence labels mapped onto transcript lines, document by document,
    with what did not map (the ``gold_mapping`` report)."""

    positives: dict[str, list[str]] | None  # file name -> label-1 lines; None: the split has none
    labels_path: Path
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)  # doc_id -> counts
    without_labels: list[str] = field(default_factory=list)  # doc_ids the labels file lacks

    def gold(self, transcript: Path, lines: tuple[str, ...]) -> dict[str, tuple[int, ...]] | None:
        """The transcript's gold lines; None when the split or the transcript has no labels."""
        if self.positives is None:
            return None
        doc_id = transcript.stem
        if transcript.name not in self.positives:
            self.without_labels.append(doc_id)
            return None
        positives = self.positives[transcript.name]
        mapped, unmapped = map_gold(lines, positives)
        self.documents[doc_id] = {"n_positive": len(positives), "n_mapped": len(mapped),
                                  "unmapped": unmapped}
        return {doc_id: mapped}

    @property
    def n_positive(self) -> int:
        return sum(d["n_positive"] for d in self.documents.values())

    @property
    def n_unmapped(self) -> int:
        return self.n_positive - sum(d["n_mapped"] for d in self.documents.values())

    def report_to(self, dataset: Dataset, split: str) -> None:
        """The ``gold_mapping`` report and its notes, or the note that there are no labels."""
        if self.positives is None:
            dataset.notes.append(
                f"split {split!r} has no key-sentence labels ({self.labels_path} is absent; "
                "upstream ships them for val and test only): gold_lines is None for every task, "
                "so retrieval metrics are null")
            return
        dataset.reports["gold_mapping"] = self.report(split)
        if self.n_unmapped:
            dataset.notes.append(f"{self.n_unmapped} of {self.n_positive} key sentences did not "
                                 "map to a transcript line (see the gold_mapping report)")
        if self.without_labels:
            dataset.notes.append(f"{len(self.without_labels)} transcripts have no row in "
                                 f"{self.labels_path.name}: their gold_lines are None")

    def report(self, split: str) -> dict[str, Any]:
        n_pos, n_unmapped = self.n_positive, self.n_unmapped
        return {
            "split": split,
            "labels_file": str(self.labels_path),
            "totals": {"n_documents": len(self.documents), "n_positive": n_pos,
                       "n_mapped": n_pos - n_unmapped, "n_unmapped": n_unmapped,
                       "n_documents_without_labels": len(self.without_labels)},
            "documents_without_labels": self.without_labels,
            "documents": self.documents,
        }


def read_options(cfg: Any) -> dict[str, Any]:
    options = dict(cfg.options or {})
    unknown = set(options) - {"style_examples"}
    if unknown:
        raise DatasetError(f"unknown dataset.options {sorted(unknown)} for ectsum; known: "
                           "['style_examples']")
    return options


def earnings_call(transcript: Path, folder: Path, split: str, source: str, gold: GoldMapping,
                  examples: list[str]) -> tuple[Document, Task]:
    """One transcript's document and its summarization task."""
    ticker, quarter, year = parse_name(transcript)
    lines = read_text_lines(transcript)  # names the file: missing, non-UTF-8, empty
    reference = read_reference(folder / "gt_summaries" / transcript.name, transcript)
    doc_id = transcript.stem
    document = Document(doc_id=doc_id, lines=lines, company=ticker, ticker=ticker,
                        doc_type="EARNINGS_CALL", period=f"Q{quarter} {year}")
    meta: dict[str, Any] = {"ticker": ticker, "quarter": quarter, "year": year, "split": split,
                            "uses_compname": PLACEHOLDER in reference}
    if examples:
        meta["style_examples"] = list(examples)
    task = Task(id=doc_id, task_type="summarization", doc_ids=(doc_id,),
                question=question_for(ticker, quarter, year), reference=reference,
                gold_lines=gold.gold(transcript, lines), source=source, meta=meta)
    return document, task


def note_placeholder(dataset: Dataset) -> None:
    n_comp = sum(t.meta["uses_compname"] for t in dataset.tasks)
    if n_comp:
        dataset.notes.append(
            f"{n_comp} of {len(dataset.tasks)} references use the placeholder '{PLACEHOLDER}' "
            "for the company name (kept verbatim for ROUGE comparability; "
            "Task.meta['uses_compname'])")


@register_adapter("ectsum")
def load_ectsum(cfg: Any, project_root: Path) -> Dataset:
    root = resolve_root(cfg.root, project_root).resolve()
    split = str(cfg.split or "test")
    options = read_options(cfg)
    folder = split_dir(root, split)
    examples = style_examples(root, split, options.get("style_examples", 0) or 0)
    files = transcript_files(folder)
    if cfg.limit is not None and cfg.limit > 0:
        files = files[: cfg.limit]
    gold = GoldMapping(*read_labels(root, split))
    calls = [earnings_call(transcript, folder, split, cfg.name, gold, examples)
             for transcript in files]
    dataset = Dataset(cfg.name, Corpus({doc.doc_id: doc for doc, _ in calls}),
                      [task for _, task in calls])
    note_placeholder(dataset)
    gold.report_to(dataset, split)
    if examples:
        dataset.notes.append(f"{len(examples)} train references stored as "
                             "Task.meta['style_examples']")
    return validate(dataset, folder / "ects")
