"""The agent's path, step by step, against the task's gold evidence: how many tool calls and
reads it took, how many were wasted (re-reads, other documents' text), when it first read
gold, how much gold it had read when it stopped, and which gold it saw in a search hit and
never read.

A path is the ordered tool log of one task: the built-in agent's tool calls
(``arag.trace.ToolCall``, top level), or a foreign trace an outside pipeline kept
(``Prediction.foreign_path``: its hits and reads located in the dataset by their text,
``arag.systems.predictions_file.trace_path``). A step is one tool call, counted from 1; the
final answer is not a step. A read of k chunks counts k reads; a search's chunks are its
hits (results). A built-in ``chunk_read`` of a chunk already read (the tool returns a
marker, not the text) is a redundant read; ``chunk_summarize`` reads the chunks it condenses.

Gold evidence units: each gold line (an ECTSum key sentence), or on a paginated document
(a FinanceBench filing) each evidence page (its gold lines together). A read holds a unit
when it covers one of the unit's gold lines. ``trajectory_gold_recall_at_stop`` is the
share of units read by the end; ``retrieval_recall`` counts gold *chunks* read instead
(docs/judging.md says how the two relate).

Two codes, deterministic (``trajectory_codes``, apart from the judge's ``error_codes``):

* **P**: the agent stopped with budget left (``max_loops_reached`` false and the context
  budget not spent; a foreign record: ``max_loops_reached`` false, or its ``max_loops`` above
  its steps) while gold it had seen in a hit went unread;
* **IR**: at least one read was of another document than the task's.

A foreign hit or read that could not be located is counted (``trajectory_unlocated_*``),
never as on- or off-document; a share over located items only. Unknown is null with its
reason: a system with no path (naive, stuffing), a task without gold evidence (sample,
folder datasets), a P whose budget the record does not state.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from arag.records import Task
from arag.trace import ToolCall
from metrics.agreement import kappa
from metrics.base import Metric, Scorer, Scores, ScoringItem, answered, register_scorer

READ, SEARCH, OTHER = "read", "search", "other"
READ_TOOLS = ("chunk_read", "chunk_summarize")
CODES = ("P", "IR")
CODE_FIELDS = {"P": "trajectory_p", "IR": "trajectory_ir"}
NO_PATH = ("the system has no agent path: it is not agentic and its record has no tool calls "
           "(naive retrieves once, stuffing reads whole documents)")
NO_GOLD = ("the dataset has no gold evidence for this task (no gold lines: a sample or folder "
           "dataset, or ECTSum's train split)")
UNANSWERABLE = "the task is unanswerable from its documents: there is no gold evidence"
EMPTY_GOLD = "no gold line of this task lies in its documents"
NEVER_READ_GOLD = "the path never read gold evidence"
NO_READS = "the path read no chunk"
NO_HITS = "the path's searches returned no hit"
BUDGET_UNKNOWN = ("the record says neither max_loops_reached nor max_loops: whether budget "
                  "was left is unknown")


@dataclass(frozen=True)
class Item:
    """One hit or read: where its text lies (``doc_id`` None: not located) and its identity."""

    doc_id: str | None
    lines: frozenset[int]
    key: str  # a chunk id (built-in) or the hash of its text (foreign)


@dataclass
class Step:
    tool: str
    kind: str  # read | search | other
    items: list[Item] = field(default_factory=list)
    unlocated: bool = False  # nothing of its output could be placed in the dataset


def path_of(item: ScoringItem) -> list[Step] | None:
    """The task's path, or None when its record has none (a system with no tool calls)."""
    foreign = item.prediction.foreign_path
    if foreign is not None:
        return [Step(s["tool"], s["kind"], [Item(i["doc_id"], frozenset(i["lines"]),
                                                 i["text_hash"]) for i in s["items"]],
                     bool(s["unlocated"])) for s in foreign["steps"]]
    calls = [s for s in item.prediction.trace if isinstance(s, ToolCall)]
    if not calls and not item.agentic:
        return None
    return _built_in(calls, item)


def _built_in(calls: list[ToolCall], item: ScoringItem) -> list[Step]:
    out, read = [], set()
    for call in calls:
        kind = READ if call.name in READ_TOOLS else SEARCH if "search" in call.name else OTHER
        ids = list(call.result_chunk_ids)
        if kind == READ and call.name == "chunk_read" and isinstance(call.arguments, dict):
            asked = call.arguments.get("chunk_ids") or []
            # a chunk asked for again: the tool marks the re-read and does not return it
            ids += [c for c in dict.fromkeys(asked) if c in read and c not in ids]
        if kind == READ:
            read.update(ids)
        out.append(Step(call.name, kind, [_chunk_item(c, item) for c in ids]))
    return out


def _chunk_item(chunk_id: str, item: ScoringItem) -> Item:
    chunk = item.chunks.get(chunk_id)
    if chunk is None:
        return Item(None, frozenset(), chunk_id)
    return Item(chunk.doc_id, frozenset(range(chunk.line_start, chunk.line_end + 1)), chunk_id)


def gold_units(task: Task, line_pages: dict[str, tuple[int, ...]]) -> list[tuple[str, frozenset[int]]]:
    """(doc id, gold lines) of each gold evidence unit: a gold line, or the gold lines of one
    page of a paginated document."""
    out = []
    for doc_id, lines in (task.gold_lines or {}).items():
        pages = line_pages.get(doc_id)
        groups: dict[int, set[int]] = {}
        for n in sorted(set(lines)):
            groups.setdefault(pages[n - 1] if pages else n, set()).add(n)
        out += [(doc_id, frozenset(g)) for g in groups.values()]
    return out


def _holds(it: Item, unit: tuple[str, frozenset[int]]) -> bool:
    return it.doc_id == unit[0] and bool(it.lines & unit[1])


@dataclass
class Walk:
    """What walking a path step by step found (the per-step flags of trajectory.jsonl)."""

    rows: list[dict[str, Any]]
    reads: int
    redundant: int
    located_reads: int
    off_reads: int
    located_hits: int
    off_hits: int
    unlocated_reads: int
    unlocated_hits: int
    gold_read: set[int]  # indices of the units read
    gold_seen: set[int]  # indices of the units in a hit
    first_gold_step: int | None
    reads_after_last_gold: int | None
    recall_by_step: list[float] | None


def walk(path: list[Step], doc_ids: Iterable[str], units: list[tuple[str, frozenset[int]]] | None
         ) -> Walk:
    own = set(doc_ids)
    w = Walk([], 0, 0, 0, 0, 0, 0, 0, 0, set(), set(), None, None, [] if units else None)
    seen_keys: set[str] = set()
    seen_lines: dict[str, set[int]] = {}
    since_gold: int | None = None
    for n, step in enumerate(path, start=1):
        flags: dict[str, Any] = {"step": n, "tool": step.tool, "kind": step.kind,
                                 "unlocated": step.unlocated, "items": []}
        for it in step.items:
            off = None if it.doc_id is None else it.doc_id not in own
            held = [k for k, u in enumerate(units or []) if _holds(it, u)]
            entry: dict[str, Any] = {"doc_id": it.doc_id, "off_document": off, "gold": bool(held)}
            if step.kind == SEARCH:
                w.located_hits += off is not None
                w.off_hits += bool(off)
                w.unlocated_hits += off is None
                w.gold_seen.update(held)
            elif step.kind == READ:
                again = it.key in seen_keys or (it.doc_id is not None and bool(it.lines)
                                                and it.lines <= seen_lines.get(it.doc_id, set()))
                entry["redundant"] = again
                new = [k for k in held if k not in w.gold_read]
                entry["new_gold"] = len(new)
                w.reads += 1
                w.redundant += again
                w.located_reads += off is not None
                w.off_reads += bool(off)
                w.unlocated_reads += off is None
                if held and w.first_gold_step is None:
                    w.first_gold_step = n
                if new:
                    w.gold_read.update(new)
                    since_gold = 0
                elif since_gold is not None:
                    since_gold += 1
                seen_keys.add(it.key)
                if it.doc_id is not None:
                    seen_lines.setdefault(it.doc_id, set()).update(it.lines)
            flags["items"].append(entry)
        if units:
            flags["gold_recall"] = len(w.gold_read) / len(units)
            assert w.recall_by_step is not None
            w.recall_by_step.append(flags["gold_recall"])
        w.rows.append(flags)
    w.reads_after_last_gold = since_gold
    return w


FIELDS = ("trajectory_steps", "trajectory_reads", "trajectory_redundant_read_rate",
          "trajectory_off_document_read_rate", "trajectory_off_document_result_rate",
          "trajectory_steps_to_first_gold", "trajectory_gold_recall_at_stop",
          "trajectory_seen_unread_gold", "trajectory_reads_after_last_new_gold",
          "trajectory_p", "trajectory_ir", "trajectory_unlocated_steps",
          "trajectory_unlocated_reads", "trajectory_unlocated_results")
GOLD_FIELDS = ("trajectory_steps_to_first_gold", "trajectory_gold_recall_at_stop",
               "trajectory_seen_unread_gold", "trajectory_reads_after_last_new_gold",
               "trajectory_p")
LISTS = ("trajectory_codes", "trajectory_gold_recall_by_step")


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@register_scorer("trajectory")
class TrajectoryScorer(Scorer):
    """Per task: its path's measures against gold evidence and the P and IR codes."""

    metrics = [
        Metric("trajectory_steps", "path steps", higher_is_better=False),
        Metric("trajectory_reads", "chunks read", higher_is_better=False),
        Metric("trajectory_redundant_read_rate", "redundant reads", higher_is_better=False,
               bounds=(0.0, 1.0)),
        Metric("trajectory_off_document_read_rate", "reads from other documents",
               higher_is_better=False, bounds=(0.0, 1.0)),
        Metric("trajectory_off_document_result_rate", "search hits from other documents",
               higher_is_better=False, bounds=(0.0, 1.0)),
        Metric("trajectory_steps_to_first_gold", "step of the first gold read",
               higher_is_better=False),
        Metric("trajectory_gold_recall_at_stop", "gold evidence read by the stop",
               bounds=(0.0, 1.0)),
        Metric("trajectory_seen_unread_gold", "gold seen in hits, never read",
               higher_is_better=False),
        Metric("trajectory_reads_after_last_new_gold", "reads after the last new gold",
               higher_is_better=False),
        Metric("trajectory_p", "P: stopped with gold seen, unread (mechanical)", ci=False,
               histogram=False, higher_is_better=False, bounds=(0.0, 1.0)),
        Metric("trajectory_ir", "IR: read another document (mechanical)", ci=False,
               histogram=False, higher_is_better=False, bounds=(0.0, 1.0)),
        Metric("trajectory_unlocated_steps", "steps not located", ci=False, histogram=False),
        Metric("trajectory_unlocated_reads", "reads not located", ci=False, histogram=False),
        Metric("trajectory_unlocated_results", "hits not located", ci=False, histogram=False),
    ]

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        self.rows = []
        out = []
        for item in items:
            s, steps = self._score_one(item)
            out.append(s)
            self.rows.append(self._row(item, s, steps))
        return out

    def _score_one(self, item: ScoringItem) -> tuple[Scores, list[dict[str, Any]] | None]:
        """A task's scores, and its steps' flags (None: it has no path)."""
        s = Scores()
        why = answered(item)
        path = None if why else path_of(item)
        if why or path is None:
            s.null([*FIELDS, *LISTS], why or NO_PATH)
            return s, None
        units, no_gold = self._units(item)
        w = walk(path, item.task.doc_ids, units)
        s.values = {
            "trajectory_steps": float(len(path)), "trajectory_reads": float(w.reads),
            "trajectory_redundant_read_rate": _rate(w.redundant, w.reads),
            "trajectory_off_document_read_rate": _rate(w.off_reads, w.located_reads),
            "trajectory_off_document_result_rate": _rate(w.off_hits, w.located_hits),
            "trajectory_unlocated_steps": float(sum(st.unlocated for st in path)),
            "trajectory_unlocated_reads": float(w.unlocated_reads),
            "trajectory_unlocated_results": float(w.unlocated_hits),
            "trajectory_gold_recall_by_step": w.recall_by_step}
        for f, whole, none in (("trajectory_redundant_read_rate", w.reads, NO_READS),
                               ("trajectory_off_document_read_rate", w.located_reads,
                                NO_READS if not w.reads else "none of its reads was located"),
                               ("trajectory_off_document_result_rate", w.located_hits,
                                NO_HITS if not w.unlocated_hits and not any(
                                    st.unlocated for st in path if st.kind == SEARCH)
                                else "none of its search hits was located")):
            if not whole:
                s.null_reasons[f] = none
        if units is None:
            s.null([*GOLD_FIELDS, "trajectory_gold_recall_by_step"], no_gold or "")
        else:
            self._gold(s, item, path, w, units)
        self._codes(s, w)
        return s, w.rows

    @staticmethod
    def _units(item: ScoringItem) -> tuple[list[tuple[str, frozenset[int]]] | None, str | None]:
        if not item.task.answerable:
            return None, UNANSWERABLE
        if item.task.gold_lines is None:
            return None, NO_GOLD
        units = gold_units(item.task, item.line_pages)
        return (units, None) if units else (None, EMPTY_GOLD)

    @staticmethod
    def _gold(s: Scores, item: ScoringItem, path: list[Step], w: Walk,
              units: list[tuple[str, frozenset[int]]]) -> None:
        unread = len(w.gold_seen - w.gold_read)
        s.values.update({
            "trajectory_steps_to_first_gold": (None if w.first_gold_step is None
                                               else float(w.first_gold_step)),
            "trajectory_gold_recall_at_stop": len(w.gold_read) / len(units),
            "trajectory_seen_unread_gold": float(unread),
            "trajectory_reads_after_last_new_gold": (None if w.reads_after_last_gold is None
                                                     else float(w.reads_after_last_gold))})
        for f in ("trajectory_steps_to_first_gold", "trajectory_reads_after_last_new_gold"):
            if s.values[f] is None:
                s.null_reasons[f] = NEVER_READ_GOLD
        left = budget_left(item, len(path))
        if not unread:
            s.values["trajectory_p"] = 0.0
        elif left is None:
            s.null(["trajectory_p"], BUDGET_UNKNOWN)
        else:
            s.values["trajectory_p"] = float(left)

    @staticmethod
    def _codes(s: Scores, w: Walk) -> None:
        if w.off_reads:
            s.values["trajectory_ir"] = 1.0
        elif w.unlocated_reads:
            s.null(["trajectory_ir"], f"{w.unlocated_reads} read(s) could not be located and "
                   "none of the others is off the task's documents")
        else:
            s.values["trajectory_ir"] = 0.0
        unknown = [c for c in CODES if s.values.get(CODE_FIELDS[c]) is None]
        if unknown:
            s.null(["trajectory_codes"], f"{' and '.join(unknown)} unknown: "
                   + "; ".join(s.null_reasons[CODE_FIELDS[c]] for c in unknown))
        else:
            s.values["trajectory_codes"] = [c for c in CODES if s.values[CODE_FIELDS[c]]]

    @staticmethod
    def _row(item: ScoringItem, s: Scores, steps: list[dict[str, Any]] | None
             ) -> dict[str, Any]:
        return {"id": item.task.id, "repeat": item.prediction.repeat,
                "system": item.prediction.system,
                **{f: s.values.get(f) for f in (*FIELDS, "trajectory_codes")},
                "null_reasons": {f: r for f, r in s.null_reasons.items()
                                 if f.startswith("trajectory_")},
                "steps": steps}

    def aggregate(self, answered: list[dict[str, Any]], records: list[dict[str, Any]]
                  ) -> dict[str, float]:
        """Where a judge assigned codes (``error_codes``): per code, how often the mechanical
        code agrees with it, over the tasks where both are known, and Cohen's kappa."""
        return judge_agreement(answered)

    def artifacts(self) -> dict[str, Any]:
        """``trajectory.jsonl``: one row per task, its measures and each step's gold flags
        (``steps`` null, with the measures' reasons, where the task has no path)."""
        if not self.rows:
            return {}
        return {"trajectory.jsonl": "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                            for r in self.rows)}


def budget_left(item: ScoringItem, steps: int) -> bool | None:
    """Whether the agent could have gone on when it stopped (None: the record does not say).
    The built-in agent: loops left and its context budget not spent; a foreign record:
    ``max_loops_reached`` false, or its ``max_loops`` above its steps."""
    pred = item.prediction
    if "max_loops_reached" not in pred.not_recorded:
        return not pred.max_loops_reached and not pred.context_budget_reached
    cap = (pred.foreign_path or {}).get("max_loops")
    return None if cap is None else cap > steps


def judge_agreement(records: list[dict[str, Any]]) -> dict[str, float]:
    """``trajectory_judge_agreement_<code>`` (share of tasks where the judge's taxonomy and
    the mechanical code agree), ``_n`` and ``trajectory_judge_kappa_<code>``, over tasks
    with both known; nothing where no judge assigned codes."""
    out: dict[str, float] = {}
    for code in CODES:
        pairs = [(int(code in r["error_codes"]), int(r[CODE_FIELDS[code]]))
                 for r in records if isinstance(r.get("error_codes"), list)
                 and r.get(CODE_FIELDS[code]) is not None]
        if not pairs:
            continue
        out[f"trajectory_judge_agreement_{code}"] = sum(a == b for a, b in pairs) / len(pairs)
        out[f"trajectory_judge_agreement_{code}_n"] = float(len(pairs))
        found = kappa([a for a, _ in pairs], [b for _, b in pairs])
        if found is not None:
            out[f"trajectory_judge_kappa_{code}"] = found.value
    return out


# a loop budget's mean gold recall at stop within this of the largest budget's: recall has
# stopped rising there
PLATEAU = 0.01


def recall_curve(records: list[dict[str, Any]]) -> list[float]:
    """Mean gold recall after each step over the tasks with gold (a task that stopped keeps
    the recall it stopped at); [] when none has a curve."""
    curves = [r["trajectory_gold_recall_by_step"] for r in records
              if isinstance(r.get("trajectory_gold_recall_by_step"), list)]
    longest = max((len(c) for c in curves), default=0)
    if not curves or not longest:
        return []
    held = [[(c[min(k, len(c) - 1)] if c else 0.0) for k in range(longest)] for c in curves]
    return [sum(col) / len(col) for col in zip(*held, strict=True)]


def recall_plateau(budgets: list[int], recall: list[float]) -> int | None:
    """The smallest budget whose mean gold recall at stop is within ``PLATEAU`` of every
    larger budget's (recall stops rising there); None when it still rises at the largest
    but one, or with fewer than two budgets."""
    if len(budgets) < 2:
        return None
    for k, b in enumerate(budgets[:-1]):
        if all(later - recall[k] < PLATEAU for later in recall[k + 1:]):
            return b
    return None


def mean_of(records: list[dict[str, Any]], name: str) -> float | None:
    values = [r[name] for r in records if isinstance(r.get(name), int | float)]
    return sum(values) / len(values) if values else None
