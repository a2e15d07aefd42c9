"""The records that flow through the harness: documents, tasks, chunks, predictions.

Field names are stable: they are the JSONL schema users join on across runs.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from arag.trace import Step, step_from_dict


def content_hash(*parts: Any, length: int = 16) -> str:
    """Stable short hash of JSON-serialisable parts (ids, cache keys, config hashes)."""
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:length]


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (``1e400`` reads as infinity) as its string
    ("inf", "nan"): strict JSON, which APIs and other tools accept."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


@dataclass(frozen=True)
class Document:
    doc_id: str
    lines: tuple[str, ...]  # one sentence per line; line numbers are 1-based
    company: str = ""
    doc_type: str = "EARNINGS_CALL"
    period: str = ""
    ticker: str = ""
    # page of each line (1-based), for paginated sources such as PDFs
    line_pages: tuple[int, ...] | None = None

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def header(self) -> str:
        return self.header_for()

    def header_for(self, page: int | None = None) -> str:
        """The metadata header; a chunk of a paginated document adds the page it is on."""
        company = self.ticker or self.company
        fields = f"COMPANY: {company} | TYPE: {self.doc_type} | PERIOD: {self.period}"
        return f"[{fields}]" if page is None else f"[{fields} | PAGE: {page}]"

    def fingerprint(self) -> str:
        return content_hash(self.doc_id, self.text, self.header)


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    doc_id: str
    line_start: int  # 1-based, inclusive
    line_end: int  # 1-based, inclusive
    header: str
    lines: tuple[str, ...]

    @property
    def body(self) -> str:
        return "\n".join(self.lines)

    @property
    def text(self) -> str:
        """What a reader of the chunk sees: metadata header, then the sentences."""
        return f"{self.header}\n{self.body}"

    def covers(self, line: int) -> bool:
        return self.line_start <= line <= self.line_end


@dataclass(frozen=True)
class Task:
    id: str
    task_type: str
    doc_ids: tuple[str, ...]
    question: str
    reference: str
    # doc_id -> 1-based line numbers of the key sentences (retrieval gold); None: no gold
    gold_lines: dict[str, tuple[int, ...]] | None = None
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    # False: the documents hold no answer (an out-of-scope or false-premise question); the
    # right answer says so, and retrieval is not scored (there is no evidence to find)
    answerable: bool = True


@dataclass
class Corpus:
    documents: dict[str, Document]

    def fingerprint(self) -> str:
        return content_hash(sorted(d.fingerprint() for d in self.documents.values()))

    def excerpt(self, lines_by_doc: dict[str, tuple[int, ...]]) -> str:
        """The given lines of each document, in document order, under its header."""
        parts = []
        for doc_id, lines in lines_by_doc.items():
            doc = self.documents[doc_id]
            body = "\n".join(doc.lines[n - 1] for n in sorted(set(lines)))
            parts.append(f'<document id="{doc_id}">\n{doc.header}\n{body}\n</document>')
        return "\n\n".join(parts)


@dataclass
class Prediction:
    id: str
    source: str
    system: str
    model: str
    task_type: str
    question: str
    doc_ids: list[str]
    ground_truth: str
    predicted: str | None = None
    # which of ``runner.repeats`` answers to the task this is, from 0
    repeat: int = 0
    # measurements (MEASURED): None when the record does not carry them (predictions made
    # elsewhere), never a made-up 0
    loops: int | None = 0
    max_loops_reached: bool = False
    # an agent that used its whole context budget (chunks read or summarized): it could
    # not have read more, so stopping then is not premature
    context_budget_reached: bool = False
    stop_reason: str | None = None
    input_tokens: int | None = 0
    output_tokens: int | None = 0
    cache_read_input_tokens: int | None = 0
    cache_creation_input_tokens: int | None = 0
    word_count: int = 0
    cost_usd: float | None = 0.0
    cost_usd_uncached: float | None = 0.0  # what cached calls would have cost
    latency_ms: float | None = 0.0
    started_at: float = 0.0  # epoch seconds of the first call
    retrieved_chunk_ids: list[str] = field(default_factory=list)
    # what the system put in front of the model: chunks read/retrieved, or the whole doc
    context_chunk_ids: list[str] = field(default_factory=list)
    trace: list[Step] = field(default_factory=list)
    skipped: bool = False
    skip_reason: str | None = None
    error: str | None = None
    error_kind: str | None = None  # rate_limit, overloaded, auth, refusal, ... (ModelError.kind)
    # context texts a pipeline outside the harness gave its model (system=external), each
    # with where it was found: {"text", "doc_id", "lines", "chunk_ids", "unmapped"}
    contexts: list[dict[str, Any]] = field(default_factory=list)
    # fields of RECORDED the source record did not carry: their scores are null with the
    # reason (a record written by this harness carries them all)
    not_recorded: list[str] = field(default_factory=list)
    # Dataset.task_digests of the task as it was answered: on resume, a task whose digest
    # differs (its question, reference or documents changed) is answered again
    task_digest: str | None = None
    # system=routed: the member system that answered, and why it was chosen
    routed_to: str | None = None
    route_reason: str | None = None
    # a trace in another project's format (system=external), each tool call's hits and reads
    # located in the dataset by their text: {"steps": [...], "max_loops": int | None}
    # (arag.systems.predictions_file.trace_path); None: the record carries none
    foreign_path: dict[str, Any] | None = None

    @property
    def answer_key(self) -> str:
        """Which answer this is: the task id for repeat 0 (as before repeats existed),
        ``<id>#<repeat>`` for the others. Resume and traces key on it."""
        return answer_key(self.id, self.repeat)

    def to_json(self) -> str:
        data = asdict(self)
        data["trace"] = json_safe(data["trace"])  # tool inputs as the model sent them
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Prediction:
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        values["trace"] = [step_from_dict(s) for s in values.get("trace") or []]
        if "not_recorded" not in data:  # a record made by hand or elsewhere: say what it lacks
            values["not_recorded"] = [k for k in RECORDED if k not in data]
            values.update({k: None for k in MEASURED if k not in data})
        return cls(**values)


def answer_key(task_id: str, repeat: int) -> str:
    """``Prediction.answer_key`` of the ``repeat``-th answer to a task."""
    return task_id if not repeat else f"{task_id}#{repeat}"


# what a prediction measured about its own run: null when a record does not carry it
MEASURED = ("loops", "input_tokens", "output_tokens", "cache_read_input_tokens",
            "cache_creation_input_tokens", "cost_usd", "cost_usd_uncached", "latency_ms")
# what the scores rest on beyond the answer: retrieval, context and the measurements
RECORDED = ("retrieved_chunk_ids", "context_chunk_ids", *MEASURED)
