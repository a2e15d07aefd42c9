"""Words for the caveats (``report/analyses/caveats.py``): in full for report.md and the
MLflow description, and short for the console, where one line says a kind across runs."""

from __future__ import annotations

from report import policy
from report.model import Claim, Note
from report.writers.cells import MARKDOWN, Style
from report.writers.words import words

# what makes a model call tools, for an agentic run whose model answered without them
TOOL_CALLING_FIX = ("a model and chat template with tool calling (Ollama: a model tagged \"tools\"; "
                    "llama.cpp: llama-server --jinja; vLLM: --enable-auto-tool-choice), or run "
                    "system=naive,stuffing only")


def _runs(n: Note, short: bool = False) -> str:
    """The runs a note concerns; in a short line, counted when more than two."""
    return f"{len(n.runs)} runs" if short and len(n.runs) > 2 else ", ".join(n.runs)


# the simple kinds' words, (short, full), written in Markdown: {runs} the runs a note
# concerns ({some}: counted when more than two), every other field from its counts
TEXTS = {
    "offline_model": (
        "offline model ({some}): a plumbing check of retrieval, not evidence about LLMs",
        "The model is `offline` ({runs}): a deterministic extractive stand-in that measures the "
        "retrieval plumbing, not LLMs (docs/verdict.md#what-the-offline-model-can-and-cannot-show)."),
    "no_judge": (
        "no judge ({some}): G-Eval and the taxonomy are null; judge=claude-haiku-4-5",
        "No judge ({runs}): G-Eval faithfulness and coverage, the error taxonomy and factual consistency are "
        "missing; the comparison falls back to reference overlap. Run with `judge=claude-haiku-4-5`."),
    "synthetic": (
        "synthetic dataset: it shows the harness works, not which system is better",
        "The dataset is synthetic (invented companies and figures, a handful of tasks): it "
        "shows the harness works, not which system is better."),
    "fits_budget": (
        "{share:.0%} of the documents fit inside the retrieval context budget: retrieval cannot "
        "make a difference here",
        "{share:.0%} of the documents fit inside the retrieval context budget ({chunks:.0f} chunks): every "
        "system sees nearly all of each, so retrieval cannot make a difference here."),
    "repeats_fixed": (
        "repeats of {some} cannot vary (a deterministic model)",
        "Repeats of {runs} cannot vary (the offline model, or requests at temperature 0): their "
        "spread in the Repeats section says nothing about a sampled model's generation noise."),
    "references": ("`{runs}`: references from `{from}` (dataset.references), not the dataset's own",) * 2,
    "system_note": ("`{runs}`: {text}",) * 2,
    "stated": ("{text}",) * 2,
}


def _templated(n: Note, style: Style, short: bool) -> str:
    text = TEXTS[n.kind][0 if short else 1].format(runs=_runs(n), some=_runs(n, True), **n.counts)
    return text if style.markdown else text.replace("`", "")


def fixed(**texts: tuple[str, str]) -> None:
    """Register notes of one fixed wording each, (short, full), formatted from their counts."""
    TEXTS.update(texts)
    words(*texts)(_templated)


words(*TEXTS)(_templated)


@words("no_reference")
def no_reference(n: Note, style: Style, short: bool) -> str:
    c = n.counts
    if short:
        return f"{c['tasks']:.0f} task(s) have no reference: reference metrics null for them"
    return (f"{c['tasks']:.0f} task(s) have no reference summary, so reference-based metrics are null for "
            f"them. Comparisons possible here: {', '.join([*c['can'], 'cost', 'latency'])}; not possible "
            f"(null, with the reason in each record): {', '.join(c['cannot']) or 'none'}.")


@words("judge_agreement")
def judge_agreement(n: Note, style: Style, short: bool) -> str:
    c = n.counts
    alphas = ", ".join(f"{run} {a:.2f}" for run, a in zip(n.runs, c["alphas"], strict=True))
    if short:
        return f"judges agree poorly on {c['dimension']} (alpha {alphas})"
    return (f"The judges agree poorly on {c['dimension']} (Krippendorff's alpha {alphas}; below "
            f"{c['floor']} a verdict resting on one judge is fragile): a difference in G-Eval "
            f"{c['dimension']} may be one judge's taste; see the judge agreement table.")


def tool_call_words(without: int, answered: int, void: bool, style: Style) -> str:
    """What answered tasks without a tool call mean for an agentic run, and the fix."""
    if void:
        return (f"the model called no tool on any of its {answered} answered tasks: it answered "
                "closed-book, with no retrieval, so "
                f"{style.strong('the agentic comparison is void for this run')} (against naive "
                f"RAG and stuffing it compares closed-book answering). Fix: {TOOL_CALLING_FIX}.")
    return (f"{without} of {answered} answered tasks had no tool call (answered without "
            "retrieval). Some tasks need none; on these the agent's scores are closed-book "
            f"answers. If the model rarely calls tools, use {TOOL_CALLING_FIX}.")


def tool_call_caveat(without: int, answered: int, style: Style = MARKDOWN) -> str:
    """The runner's warning for an agentic run with answered tasks without a tool call."""
    return tool_call_words(without, answered, policy.agentic_void(without, answered), style)


@words("tool_calls")
def tool_calls(n: Note, style: Style, short: bool) -> str:
    c = n.counts
    if short and c["void"]:
        return f"{_runs(n)} called no tool: closed-book, its agentic comparison is void"
    if short:
        return f"{_runs(n)}: {c['without']} of {c['answered']} answered tasks had no tool call"
    return (f"{style.code(_runs(n))}: "
            + tool_call_words(c["without"], c["answered"], c["void"], style))


@words("not_recorded")
def not_recorded(n: Note, style: Style, short: bool) -> str:
    lacking = n.counts.get("lacking") or {n.runs[0] if n.runs else "": {
        n.counts["field"]: (n.counts["count"], n.counts["of"])}}
    fields = list(dict.fromkeys(f for per_run in lacking.values() for f in per_run))
    named = ", ".join(fields[:-1]) + f" or {fields[-1]}" if len(fields) > 1 else fields[0]
    if short and len(n.runs) > 1:
        return f"{len(n.runs)} runs give no {named}: null, not 0"
    return "; ".join(f"{style.code(run)}: " + "; ".join(
        f"{count} of {of} record(s) give no {field}: null, not 0"
        for field, (count, of) in per_run.items()) for run, per_run in lacking.items())


@words("unreadable")
def unreadable(n: Note, style: Style, short: bool) -> str:
    parts = "; ".join(f"{run}: " + ", ".join(f"{field} on {k} of {f['answered']}" for field, k
                                               in f["fields"].items())
                      for run, f in n.counts["runs"].items())
    if short:
        return f"unreadable judge replies (no score there): {parts}"
    return ("Unreadable judge replies (no score for those tasks; above "
            f"{style.code('runner.max_parse_failure_rate')} the run fails): {parts} answered tasks.")


@words("resumed_latency")
def resumed_latency(n: Note, style: Style, short: bool) -> str:
    parts = "; ".join(f"{run} ({k} of {of} answers)" for run, (k, of)
                      in zip(n.runs, n.counts["answers"], strict=True))
    if n.counts["sequential"]:  # each round carries the earlier ones on
        return (f"Latency over rounds: {parts} were answered in earlier rounds of this "
                "sequential sweep (or an earlier run of it), so their latencies were measured "
                "round by round, under each round's load.")
    return (f"Latency from an earlier run: {parts} were resumed from an earlier run of the same "
            "configuration, so their latencies were measured then, under that run's load.")


QUERIES = {"offline_agent": "the question, then terms of the chunks it read (no vocabulary of its own)",
           "agent": "queries the model writes (its own knowledge of the domain)",
           "hyde": "the question plus the model's hypothetical answer (retrieval.hyde=true)",
           "question": "the question only (retrieval.hyde=true adds the model's hypothetical answer)"}


@words("query_priors")
def query_priors(c: Claim, style: Style, short: bool) -> str:
    how, tools = c.figures["how"], c.figures["tools"]
    parts = "; ".join(f"{run}: {QUERIES[h]}" + (f"; tools {', '.join(tools[run]) or 'as configured'}"
                                                if h in ("agent", "offline_agent") else "")
                      for run, h in how.items())
    offline = (f" With {style.code('system.tools=[semantic_search,chunk_read]')} the offline agent "
               "reads naive's top-k." if "offline_agent" in how.values() else "")
    return f"What each system searches with (its prior knowledge): {parts}.{offline}"
