"""The words for each kind of claim and note, and for the answer: the only place the report
makes sentences from figures. Every writer asks ``say`` (a claim or a note, in a style,
short or in full) and ``answer``; a kind with no words of its own (a plugin's analysis) is
said from its fields, so it still reads in every writer."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from report.answer import Answer
from report.model import Authority, Claim, Note
from report.writers.cells import MARKDOWN, UNKNOWN, Style, interval, number, p_value, signed

Item = Claim | Note
Words = Callable[[Any, Style, bool], str]
WORDS: dict[str, Words] = {}


def words(*kinds: str) -> Callable[[Words], Words]:
    """Register the words of claim or note ``kinds``: ``(item, style, short) -> str``."""

    def decorate(fn: Words) -> Words:
        for kind in kinds:
            WORDS[kind] = fn
        return fn

    return decorate


def say(item: Item, style: Style = MARKDOWN, short: bool = False) -> str:
    """The item in words (``short``: the console's one line)."""
    _load()
    return WORDS.get(item.kind, _generic)(item, style, short)


_loaded: list[bool] = []


def _load() -> None:
    """The word modules of the writers package (``*_words``) register on import."""
    if not _loaded:
        import importlib
        import pkgutil

        import report.writers as package

        for module in pkgutil.iter_modules(package.__path__):
            if module.name.endswith("_words"):
                importlib.import_module(f"report.writers.{module.name}")
        _loaded.append(True)


@dataclass(frozen=True)
class Sentences:
    """A kind's words as ``str.format`` templates: ``said`` then ``short`` (the console's
    line) or ``full``. Fields: a claim's fields and figures (a note's counts), ``{runs}``
    joined, ``{a}``/``{b}`` the first two, ``{code[x]}``/``{strong[x]}`` field (or text) ``x``
    emphasised, and ``parts(item, style)``'s pieces; None reads unknown."""

    said: str
    short: str = ""
    full: str = ""
    parts: Callable[[Any, Style], Mapping[str, Any]] | None = None


def sentences(**kinds: Sentences) -> None:
    for kind, s in kinds.items():
        WORDS[kind] = partial(_fill, s)


def _fill(s: Sentences, item: Item, style: Style, short: bool) -> str:
    fields = {**(item.counts if isinstance(item, Note) else dict(
        item.figures, metric=item.metric, difference=item.difference, n_tasks=item.n_tasks,
        n_documents=item.n_documents)), "runs": ", ".join(item.runs),
        **dict(zip("ab", item.runs, strict=False)), **(s.parts(item, style) if s.parts else {})}
    return (s.said + (s.short if short else s.full)).format_map(
        {**{k: _Figure(v) for k, v in fields.items()},
         "code": _Styled(fields, style.code), "strong": _Styled(fields, style.strong)})


class _Figure:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __format__(self, spec: str) -> str:  # None: unknown, never 0
        return UNKNOWN if self.value is None else format(self.value, spec)


class _Styled(dict[str, str]):
    def __init__(self, fields: Mapping[str, Any], emphasis: Callable[[str], str]) -> None:
        super().__init__()
        self.fields, self.emphasis = fields, emphasis

    def __missing__(self, key: str) -> str:
        return self.emphasis(str(self.fields.get(key, key)))


def _generic(item: Item, style: Style, short: bool) -> str:
    """A claim or note of a kind without words of its own, from its fields."""
    if isinstance(item, Note):
        counts = ", ".join(f"{k} {v}" for k, v in item.counts.items() if not isinstance(v, dict | list))
        return f"{item.kind.replace('_', ' ')}" + (f" ({', '.join(item.runs)})" if item.runs else "") \
            + (f": {counts}" if counts else "") + "."
    c = item
    parts = [c.kind.replace("_", " ")]
    if c.runs:
        parts.append(" vs ".join(c.runs))
    if c.metric:
        parts.append(f"on {style.code(c.metric)}")
    text = " ".join(parts)
    if c.difference is not None:
        text += f": difference {signed(c.difference)}"
        if c.ci:
            text += f" {interval(c.ci)}"
    if c.p is not None:
        text += f", p={p_value(c.p)}"
    if c.p_adjusted is not None:
        text += f", adjusted p={p_value(c.p_adjusted)}"
    if c.n_tasks is not None:
        text += f" (n={c.n_tasks}" + (f" tasks on {c.n_documents} documents" if c.n_documents else "") + ")"
    if not short:
        shown = {k: v for k, v in c.figures.items() if isinstance(v, int | float | str)}
        if shown:
            text += "; " + ", ".join(f"{k} {number(v) if not isinstance(v, str) else v}"
                                     for k, v in shown.items())
        if c.rule:
            text += f" [{c.rule}]"
    return text[0].upper() + text[1:] + "."


def grouped(notes: Sequence[Note]) -> list[Note]:
    """Notes of one kind said once across runs: the same words for several runs become one
    note naming them; fields the records lack are gathered into one note (each field with
    the count of records lacking it, per run)."""
    out: dict[str, Note] = {}
    for n in notes:
        if n.kind == "not_recorded":
            known = out.get(n.kind)
            lacking = {**(known.counts["lacking"] if known else {})}
            lacking.setdefault(n.runs[0] if n.runs else "", {})[n.counts["field"]] = (
                n.counts["count"], n.counts["of"])
            runs = tuple(dict.fromkeys([*(known.runs if known else ()), *n.runs]))
            out[n.kind] = replace(n, runs=runs, counts={"lacking": lacking})
            continue
        key = n.kind + json.dumps(dict(n.counts), sort_keys=True, default=str)
        known = out.get(key)
        out[key] = replace(n, runs=tuple(dict.fromkeys([*known.runs, *n.runs]))) if known else n
    return list(out.values())


def answer(answers: Sequence[Answer], style: Style = MARKDOWN) -> str:
    """The one-line answer: each dataset's, in turn, where the sweep has several."""
    if len(answers) == 1:
        return _answer(answers[0], style)
    return " ".join(f"On {style.code(a.dataset)}: {_answer(a, style)}" for a in answers)


def _answer(a: Answer, style: Style) -> str:
    _load()
    if a.mode == "undecided":
        return _undecided(a, style) + "".join(
            f" {say(c, style, short=True).rstrip('.')}." for c in a.claims)
    shipping = [say(c, style, short=True).rstrip(".") for c in a.claims
                if c.authority == Authority.recommendation]
    stated = [c for c in a.claims if c.authority != Authority.recommendation]
    named = [say(c, style, short=True).rstrip(".") for c in stated[:MOST_NAMED]]
    more = len(stated) - MOST_NAMED
    head = {"sequential": "Decided by anytime-valid intervals: ",
            "corrected": "Corrected by your labels (PPI++): ",
            "crossover": "No average winner: "}.get(a.mode, "Decided: ")
    family = ""
    if a.mode == "decided" and a.family:
        rest = f"; the other {a.undecided} comparison(s) decide nothing" if a.undecided else ""
        family = rest + (f" (Holm-adjusted over {a.family} tests)" if a.family > 1
                         else " (one test)")
    if not named:  # only a recommendation: it is the answer
        return "; ".join(shipping) + "."
    return (head + "; ".join(named) + (f" and {more} more" if more > 0 else "") + family + "."
            + "".join(f" {text}." for text in shipping))


MOST_NAMED = 3  # decisive claims named in the answer; the rest are counted


def _undecided(a: Answer, style: Style) -> str:
    """Nothing decided: why (nothing testable, or no difference significant), and what
    would decide: the comparison closest to a decision with the rule's detectable
    difference and the tasks it would need."""
    if not a.pending:
        return "Nothing decided: no comparison was made."
    lead = a.pending[0]
    if lead.kind == "no_test":
        return "Nothing decided" + say(lead, style, short=True) + "."
    if lead.authority >= 5:  # a sequential sweep's open intervals
        return "Undecided by the anytime-valid intervals: " + "; ".join(
            say(c, style, short=True) for c in a.pending if c.kind == "sequential") + "."
    metrics = ", ".join(dict.fromkeys(c.metric or "" for c in a.pending))
    runs = ", ".join(dict.fromkeys(r for c in a.pending for r in c.runs))
    shared = [c.n_tasks for c in a.pending if c.n_tasks]
    span = (f", {min(shared)}-{max(shared)} shared tasks" if shared and min(shared) != max(shared)
            else f", {shared[0]} shared tasks" if shared else "")
    family = f"Holm-adjusted over {a.family} tests" if a.family > 1 else "one test"
    small = ", small n" if shared and min(shared) < 10 else ""
    return (f"Nothing decided on {metrics}: no difference between {runs} is significant "
            f"({family}{span}{small}). Closest: {say(lead, style, short=True)}.")
