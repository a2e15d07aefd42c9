"""report.md's parts rendered from the model: the key finding from the family's claims, the
analyses' sections from their claims and notes, the caveats banner from the notes, and the
headline table every writer shares. No figure is computed here."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from report import policy
from report.answer import Answer
from report.meta_eval import is_meta_evaluation
from report.model import Claim, Note
from report.verdict import TaskSets, by_dataset, tasks_asked
from report.writers import corrected_words, judge_words
from report.writers.cells import MARKDOWN, Style, count, lacking, markdown_table, money, number
from report.writers.verdict_words import stopped_words
from report.writers.words import answer, grouped, say

Row = dict[str, Any]

LOOPS_NOTE = ("`max_loops` is the budget of model calls that may use tools; an agent that "
              "spends it makes one more call, without tools, to answer, so its `loops` is then "
              "max_loops + 1.")
BUDGET_NOTE = ("Every budget is compared with the largest above; the loop-budget curve "
               "(`plots/loop_budget_curve.png`, section \"Retrieval and the loop budget\") "
               f"draws them all. {LOOPS_NOTE}")


NOTHING_TO_RANK = (
    " No run has any quality score to rank on, so no system is ranked: a judge "
    "(`judge=claude-haiku-4-5`, or an OpenAI-compatible judge) scores faithfulness without "
    "references; reference summaries give ROUGE, BERTScore and G-Eval coverage; gold passages "
    "give retrieval precision and recall (`tasks.jsonl`, docs/your-documents.md). What needs "
    "none of them (citations, numeric precision, context, cost, latency) is compared in the "
    "report.")
# the verdict family's kinds: said in the key finding (``key_finding``), not as a section
FAMILY_KINDS = frozenset({"difference", "no_difference", "untestable", "best", "scope",
                          "no_test"})


def key_finding(claims: Sequence[Claim], keys: Sequence[str], headline: Sequence[Row],
                style: Style = MARKDOWN) -> str:
    """Each decision metric's comparisons, best contender and bounds, then what a task
    costs; each dataset in turn where the sweep has several."""
    family = [c for c in claims if c.kind in FAMILY_KINDS]
    datasets = list(dict.fromkeys(str(c.figures.get("dataset") or "") for c in family))
    blocks = []
    for name in datasets:
        mine = [c for c in family if str(c.figures.get("dataset") or "") == name]
        text = "\n".join(_metric_block(mine, k, style) for k in keys)
        if len(datasets) > 1:
            runs = ", ".join(dict.fromkeys(r for c in mine if c.kind == "scope" for r in c.runs))
            text = f"{style.strong('Dataset ' + style.code(name))} ({runs}):\n{text}"
        blocks.append(text)
    if not blocks:
        return ""
    return "\n\n".join(blocks) + "\n- " + cost_sentence(headline) + "\n"


def _metric_block(claims: Sequence[Claim], key: str, style: Style) -> str:
    scope = next((c for c in claims if c.kind == "scope" and c.metric == key), None)
    untested = next((c for c in claims if c.kind == "no_test"), None)
    if scope is None:
        return f"On {style.code(key)}: " + (say(untested, style) if untested else "no run answered.")
    if not scope.runs:
        reason = scope.figures.get("reason")
        return (f"No run has {style.code(key)} scores" + (f": {reason}" if reason else "") + "."
                + (NOTHING_TO_RANK if scope.figures.get("nothing_to_rank") else ""))
    if not scope.n_tasks:
        return (f"On {style.code(key)}: no task was answered by every compared run, so no run "
                "is ranked; each run's own means are in the Quality section.")
    direction = "higher is better" if scope.figures.get("higher_is_better") else "lower is better"
    who = ("every compared run answered and has " + style.code(key) + " for"
           if scope.figures.get("every_run") else
           f"every run with {style.code(key)} ({', '.join(scope.runs)}) answered")
    lines = [f"On the {style.strong(f'{scope.n_tasks} tasks')} {who} ({direction}):"]
    lines += [f"- {say(c, style)}" for c in claims if c.metric == key and c.key
              and c.kind in ("difference", "no_difference", "untestable")]
    if scope.figures.get("budgets"):
        lines.append(f"- {BUDGET_NOTE}")
    lines += [f"- {say(c, style)}" for c in claims if c.kind == "best" and c.metric == key]
    bounds = scope.figures.get("bounds") or []
    if bounds:
        lines.append("- Bounds (reference points, never ranked): " + "; ".join(
            f"{run} {mean:.3f}" for run, mean in bounds) + ".")
    return "\n".join(lines)


def cost_sentence(headline: Sequence[Row]) -> str:
    """What a task costs each run (the headline rows' figures), unknown where unknown."""
    parts = [f"{r['run']} {_cost_words(r)}" for r in headline if r.get("answered_any", True)]
    judge = sum(r.get("judge_cost") or 0.0 for r in headline)
    idle = "".join(f" {r['run']} answered no task but spent {money(r['spent'])}."
                   for r in headline if not r.get("answered_any", True) and (r.get("spent") or 0) > 0)
    return ("Cost per task (every task run, errored included; without the response cache, "
            "actual spend in brackets): " + "; ".join(parts) + "."
            + (f" The judge cost {money(judge, 4)} in all." if judge else "") + idle)


def _unknown(row: Row, field: str, what: str) -> str:
    missing = (row.get("lacking") or {}).get(field)
    return f"{what} unknown ({lacking(missing, row.get('n_records', 0))})" if missing else \
        f"{what} unknown"


def _cost_words(row: Row) -> str:
    """A run's cost per task, what it spent and its P50 latency; each unknown where the
    records cannot support it (never $0)."""
    p50 = row.get("latency_ms_p50")
    latency = f"P50 {p50:.0f} ms" if p50 is not None else _unknown(row, "latency_ms",
                                                                  "P50 latency")
    if row.get("cost_per_task") is None:
        return f"({_unknown(row, 'cost_usd', 'cost')}; {latency})"
    return f"{money(row['cost_per_task'])} (spent {money(row.get('cost_usd_per_task'))}; {latency})"


def headline_table(headline: Sequence[Row], key: str) -> str:
    """The one headline table (``report.verdict.headline_rows``): the same columns, from
    the same rows, as the console's, the MLflow description's and compare.html's."""
    return markdown_table(HEADLINE_COLUMNS(key), [headline_cells(r, key) for r in headline])


def HEADLINE_COLUMNS(key: str) -> list[str]:  # noqa: N802 - a table's fixed header
    return ["run", key, "n", "recall", "cost/task $", "spent/task $", "P50 ms", "answered"]


def headline_cells(row: Row, key: str) -> list[str]:
    """One run's headline cells: the decision metric's mean and n on its common task set,
    retrieval recall, cost per task (uncached), spend per task, P50 latency, answered."""
    return [row["run"] + (" (bound)" if row.get("bound") else ""),
            number(row.get(f"{key}_mean"), 3, "n/a"), number(row.get(f"{key}_n"), 0, "n/a"),
            number(row.get("retrieval_recall_mean"), 3, "n/a"),
            number(row.get("cost_per_task"), 5), number(row.get("cost_usd_per_task"), 5),
            number(row.get("latency_ms_p50"), 0),
            f"{count(row.get('n_answered', 0))}/{count(row.get('n_asked', 0))}"]


def banner(notes: Sequence[Note], style: Style = MARKDOWN) -> str:
    """The caveats, before any figure: every note in full, one kind said once across runs."""
    if not notes:
        return ""
    return ("> " + style.strong("Caveats: read before trusting any number below.") + "\n>\n"
            + "".join(f"> - {say(n, style)}\n" for n in grouped(notes)))


def sweep_answer(claims: Sequence[Claim], keys: Sequence[str], answers: Sequence[Answer],
                 finished: Sequence[Row], style: Style = MARKDOWN) -> str:
    """The sweep's one-sentence answer as every writer states it: a meta-evaluation's best
    signal; else the claims' answer, with the judge's raw answer beside a corrected one."""
    
    if is_meta_evaluation(list(finished)):
        return judge_words.meta_answer(finished, style)
    return corrected_words.answer(claims, keys, answer(answers, style), style)


def summary(answer: str, headline: Sequence[Row], key: str, claims: Sequence[Claim]) -> str:
    """What compare.html opens with: the answer, the headline table and the key claims."""
    found = [f"- {say(c)}" for c in claims if c.key and c.kind not in FAMILY_KINDS | {"plot"}]
    return (f"**Answer:** {answer}\n\n" + headline_table(headline, key)
            + ("\n" + "\n".join(found) + "\n" if found else ""))


def trust_paragraphs(trust: Sequence[Claim]) -> str:
    """How far the judge can be trusted (``meta_eval.trust``), a paragraph a claim."""
    return "\n".join(say(c) + "\n" for c in trust)


def trust_section(trust: Sequence[Claim]) -> str:
    """report.md's last section: how far the judge can be trusted."""
    return "\n## How far the judge can be trusted\n\n" + trust_paragraphs(trust) if trust else ""


def section_of(items: Sequence[Claim | Note], style: Style = MARKDOWN) -> str:
    """The analyses' sections: one heading each, in the order they came, every claim and
    note in full with its table."""
    sections: dict[str, list[Claim | Note]] = {}
    for item in items:
        sections.setdefault(item.section, []).append(item)
    out = []
    for title, group in sections.items():
        out.append(f"\n## {title}\n")
        for item in group:
            out.append(say(item, style) + "\n")
            table = getattr(item, "table", None)
            if table is not None and table.rows:
                out.append(markdown_table(table.header, table.rows))
    return "\n".join(out)


def question_title(rows: Sequence[Row], sweep: str, decide_on: Sequence[str] | None) -> str:
    """The report's title states its question: the systems, the data and what decides."""
    systems = " vs ".join(dict.fromkeys(r["run"] for r in rows)) or "no run"
    data = " + ".join(dict.fromkeys(str(r.get("dataset") or "?") for r in rows))
    keys = decide_on or next((r["decide_on"] for r in rows if r.get("decide_on")), [])
    return f"Which is better{' on ' + ', '.join(keys) if keys else ''}: {systems}, {data} (sweep {sweep})"


def runs_line(rows: Sequence[Row], keys: Sequence[str]) -> str:
    """How many runs finished, which did not and why, and what the verdict decides on."""
    unfinished = [f"{r['run']}: {'; '.join(filter(None, [r['status'], stopped_words(r)]))}"
                  for r in rows if r["status"] != "FINISHED"]
    return (f"Runs: {len(rows) - len(unfinished)} finished"
            + (f", {len(unfinished)} not finished ({', '.join(unfinished)}; a run stopped by the "
               "cost cap, KILLED, is compared on what it answered)" if unfinished else "")
            + f". {decided_on(keys)}\n")


def decided_on(keys: Sequence[str]) -> str:
    """What the report decides on, each metric's direction, and why those metrics."""
    named = ", ".join(f"`{k}` ({'higher' if policy.higher_is_better(k) else 'lower'} is better)"
                      for k in keys)
    if len(keys) > 1:
        return f"The verdict decides on {named} (`report.decide_on`)."
    return (f"Comparison metric: {named}; set by `report.decide_on`, or by default the first "
            f"of {', '.join(f'`{m}`' for m in policy.comparison_order())} any run has.")


def data_line(rows: Sequence[Row]) -> str:
    """What the runs read: the dataset's digest and its size, one clause per distinct digest
    (runs on different data say so, by name)."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.get("dataset_digest") or "", []).append(row)
    clauses = [_data_clause(digest, group, named=len(groups) > 1)
               for digest, group in groups.items()]
    if len(clauses) == 1:
        return f"Data: {clauses[0]}.\n"
    return ("Data: the runs read different data, so their figures are not of the same "
            "tasks: " + "; ".join(clauses) + ".\n")


def _data_clause(digest: str, rows: Sequence[Row], named: bool) -> str:
    first = rows[0]
    asked = tasks_asked(first) if first.get("n_tasks") is not None else None
    docs, repeats = count(first.get("n_documents")), int(first.get("repeats") or 1)
    size = f"{docs} documents, {count(asked)} tasks"
    if repeats > 1 and asked is not None:  # n_tasks counts answers: K per task
        size = (f"{docs} documents, {count(asked / repeats)} tasks, {count(asked)} answers "
                f"({repeats} per task)")
    which = f"{', '.join(r['run'] for r in rows)}: " if named else ""
    held = f"dataset digest `{digest}`" if digest else \
        "dataset digest unknown (logged before runs recorded one)"
    return f"{which}`{first.get('dataset')}`, {held} ({size})"


def latency_cache_note(finished: Sequence[Row]) -> str:
    """Which runs' latencies come (partly) from the response cache: a cached call takes
    about a millisecond, so those figures say nothing about the model's speed."""
    parts = [f"{r['run']} ({count(r['model_calls_cached'])} of {count(r.get('model_calls') or 0)} "
             "model calls)" for r in finished if (r.get("model_calls_cached") or 0) > 0]
    return ("\nLatency from the response cache: " + "; ".join(parts) + " were answered from "
            "the cache, so their latency is not the model's.\n") if parts else ""


def each_dataset(sets: TaskSets, render: Callable[[TaskSets], str]) -> str:
    """``render`` of the sweep's tasks, or, over several datasets, of each dataset's in turn
    under its name."""
    parts = by_dataset(sets)
    if len(parts) == 1:
        return render(sets)
    shown = {name: text for name, part in parts.items() if (text := render(part).strip())}
    return "\n\n".join(f"**Dataset `{name}`** ({', '.join(r['run'] for r in parts[name].runs)}):"
                         f"\n{text}" for name, text in shown.items()) + ("\n" if shown else "")


_CODE_SPAN = re.compile(r"(`+[^`]*`+)")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def inert(markdown_text: str) -> str:
    """Markdown in which no text from the data (a run label, a labeller's name, an answer)
    can become HTML: outside code spans (which show ``<`` as it is) every ``<`` that could
    open a tag or comment is written ``&lt;``; a ``<`` before a space or a digit (p < 0.05)
    is left as it reads."""
    parts = _CODE_SPAN.split(markdown_text)
    return "".join(part if k % 2 else _TAG_START.sub("&lt;", part)
                   for k, part in enumerate(parts))
