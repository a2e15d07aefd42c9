"""Report sections beyond the verdict: caveats, results by document length, how far the
judge can be trusted, and examples chosen from the numbers (all on the common tasks)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from metrics.geval import DIMENSIONS
from metrics.stats import correlation
from report import policy
from report.verdict import SMALL_N, Row, TaskSets, fmt, is_answered, table

_FLAG_SUFFIX = "_parse_failures"

REASONING_CHARS = 1500
def tool_call_caveat(without_tool_call: int, answered: int) -> str:
    """What answered tasks without any tool call mean for an agentic run, and the fix (the
    caveat's own words, ``report.writers.caveat_words``)."""
    from report.writers.caveat_words import tool_call_words
    from report.writers.cells import MARKDOWN

    return tool_call_words(without_tool_call, answered,
                           policy.agentic_void(without_tool_call, answered), MARKDOWN)


def query_priors(rows: list[Row]) -> str:
    """What each retrieving run searches with, beyond the question: the prior knowledge a
    system brings (a HyDE passage; an agent's own queries), and the option that gives the
    other side the same."""
    parts = []
    for r in rows:
        if not r.get("retrieves") or r.get("searches") is False:  # its queries are not known
            continue
        if r.get("agentic"):
            how = ("the offline agent's queries: the question, its content words, then terms "
                   "of the chunks it read (no vocabulary of its own)"
                   if r.get("model_provider") == "offline" else
                   "queries the model writes (its own knowledge of the domain)")
            tools = ", ".join(r.get("tools") or [])
            parts.append(f"{r['run']}: {how}; tools {tools or 'as configured'}")
        else:
            parts.append(f"{r['run']}: " + (
                "the question plus a hypothetical answer the model writes "
                "(`retrieval.hyde=true`)" if r.get("hyde") else
                "the question only (`retrieval.hyde=true` adds the model's hypothetical "
                "answer)"))
    if not parts:
        return ""
    offline_agent = any(r.get("agentic") and r.get("model_provider") == "offline"
                        and r.get("searches") is not False for r in rows)
    return ("What each system searches with (its prior knowledge): " + "; ".join(parts) + "."
            + (" With `system.tools=[semantic_search,chunk_read]` the offline agent reads "
               "naive's top-k." if offline_agent else "") + "\n")


def _terciles(sets: TaskSets) -> tuple[dict[str, float], list[tuple[str, Any]]] | None:
    """Each task's document length (tokens) and the three length bins (label, test); None
    with fewer than three tasks of known length."""
    lengths: dict[str, float] = {}
    for recs in sets.tables.values():
        for tid, rec in recs.items():
            if rec.get("document_tokens") is not None:
                lengths.setdefault(tid, float(rec["document_tokens"]))
    if len(lengths) < 3:
        return None
    low, high = np.quantile(list(lengths.values()), [1 / 3, 2 / 3])
    return lengths, [(f"short (≤ {low:,.0f} tokens)", lambda n: n <= low),
                     (f"medium ({low:,.0f}–{high:,.0f})", lambda n: low < n <= high),
                     (f"long (> {high:,.0f})", lambda n: n > high)]


def length_breakdown(sets: TaskSets, metrics: list[str]) -> str:
    """Main metrics per run by document-length tercile (tokens), with n per cell, over each
    run's answered tasks (a run that skips long documents shows n = 0 there)."""
    split = _terciles(sets)
    if split is None or not metrics:
        return "Too few tasks with a known document length to split into terciles.\n"
    lengths, bins = split
    sizes = [sum(1 for n in lengths.values() if test(n)) for _, test in bins]
    out = ["Tasks split into terciles of their documents' length in tokens (≈4 characters a "
           f"token): {sizes[0]} / {sizes[1]} / {sizes[2]} tasks. Each cell: mean over the run's "
           "answered tasks in that tercile (n).\n"]
    for metric in metrics:
        rows = []
        for run in sets.runs:
            cells = []
            for _, test in bins:
                values = [rec[metric] for tid, rec in sets.tables[run["run_id"]].items()
                          if is_answered(rec) and rec.get(metric) is not None
                          and tid in lengths and test(lengths[tid])]
                cells.append(f"{np.mean(values):.3f} (n={len(values)})" if values else "– (n=0)")
            rows.append([run["run"], *cells])
        out.append(f"**`{metric}`**\n\n" + table(["run", *(b[0] for b in bins)], rows))
    return "\n".join(out)


def length_finding(sets: TaskSets, key: str) -> str:
    """One sentence per end of the length range: whether retrieval adds value for short and
    for long documents on ``key``, and why, from the best run that retrieves against the
    best that reads whole documents on the tasks of that tercile both answered."""
    split = _terciles(sets)
    # a bound (the oracle's gold sentences, closed book) is a reference point, not a way of
    # reading documents: it never stands for either side
    runs = policy.contenders(sets.runs)
    retrieving = [r for r in runs if r.get("retrieves") and sets.has(r, key)]
    whole = [r for r in runs if reads_whole_documents(r) and sets.has(r, key)]
    if split is None or not retrieving or not whole:
        return ""
    lengths, bins = split
    out = []
    for label, test in (bins[0], bins[2]):
        ids = [t for t in sets.all_ids if t in lengths and test(lengths[t])]
        out.append(_length_sentence(sets, key, label, ids, retrieving, whole))
    return "**By document length:** " + " ".join(out) + "\n"


def reads_whole_documents(run: Row) -> bool:
    """A run that puts the whole documents in front of its model, as it declared
    (``long_context``); a run logged before that declaration: any that does not retrieve."""
    declared = run.get("long_context")
    return bool(declared) if declared is not None else not run.get("retrieves")


def _length_sentence(sets: TaskSets, key: str, label: str, ids: list[str],
                     retrieving: list[Row], whole: list[Row]) -> str:
    def best(runs: list[Row]) -> Row:
        return max(runs, key=lambda r: np.mean(sets.values(r, key, ids) or [-np.inf]))

    r, w = best(retrieving), best(whole)
    docs = label.split(" (")[0] + " documents (" + label.split(" (", 1)[1]
    skipped = [t for t in ids if sets.tables[w["run_id"]].get(t, {}).get("skipped")]
    both = [t for t in ids if all(sets.tables[x["run_id"]].get(t, {}).get(key) is not None
                                  for x in (r, w))]
    if not both:
        why = (f"{w['run']} skipped all {len(skipped)} (over its context limit)" if skipped
               else "no task of this length was scored by both")
        return (f"Retrieval is the only option for {docs}: {why}, so {r['run']} answers where "
                f"{w['run']} cannot." if skipped else f"For {docs}, {why}.")
    res = sets.pair(r, w, key, both)
    mine, theirs = (float(np.mean([sets.tables[x["run_id"]][t][key] for t in both]))
                    for x in (r, w))
    numbers = (f"`{key}` {r['run']} {mine:.3f} vs {w['run']} {theirs:.3f} on {len(both)} "
               "tasks" + (f", difference {res.mean_diff:+.3f} [95% CI {res.ci_low:+.3f}, "
                          f"{res.ci_high:+.3f}]" if res is not None else ""))
    also = (f"; {w['run']} also skipped {len(skipped)} of {len(ids)} (over its context limit)"
            if skipped else "")
    ahead = r if policy.advantage(mine - theirs, key) > 0 else w
    if res is None or res.ci_includes_zero:
        gap = (f"{ahead['run']} is ahead, but the CI includes 0: {len(both)} tasks cannot "
               "tell the two apart" if mine != theirs else "the two score the same")
        verdict = f"Retrieval does not clearly add value for {docs} on `{key}`: {numbers}; {gap}"
    elif ahead is r:
        verdict = (f"Retrieval adds value for {docs} on `{key}`: {numbers}, because "
                   f"{r['run']}'s chosen chunks beat reading the whole document on the same "
                   "tasks")
    else:
        verdict = (f"Retrieval does not add value for {docs} on `{key}`: {numbers}, because "
                   f"{w['run']}, reading the whole document, scores better on the same "
                   "tasks than the chunks retrieval picks")
    # the small-n rule holds for every sentence that generalises (docs/verdict.md)
    small = (f" (small n: {len(both)} tasks are too few to say this of {docs} in general)"
             if len(both) < SMALL_N else "")
    return verdict + also + small + "."


def loops_recall(points: list[tuple[float, float]]) -> str:
    """Spearman's correlation of an agent's loops with its retrieval recall, with its CI."""
    found = correlation([p[0] for p in points], [p[1] for p in points]) if points else None
    if found is None:
        return ("Loops vs recall: too few agentic tasks with both numbers, or one of them "
                "never varies, to correlate.\n")
    ci = (f" [95% CI {found.ci_low:+.2f}, {found.ci_high:+.2f}]" if found.ci_low is not None
          else "")
    reading = ("no clear relation" if found.ci_includes_zero else
               "more loops go with higher recall" if found.rho > 0 else
               "more loops go with lower recall (the agent keeps searching when it is lost)")
    return (f"**Loops vs recall:** Spearman's rho {found.rho:+.2f}{ci} over {found.n} "
            f"agentic tasks: {reading}.\n")


def judge_section(rows: list[Row], sets: TaskSets) -> str:
    """The judge's own spread over samples, the panel's agreement, and where judges differ."""
    out = [_self_consistency(rows), _agreement(rows)]
    disagreements = _disagreements(sets)
    if disagreements:
        out.append(disagreements)
    return "\n".join(out)


def judged_dimensions(rows: list[Row]) -> list[str]:
    """The G-Eval dimensions these runs were judged on (``metrics.geval.dimensions``), read
    from the parse-failure count every judged dimension logs; the defaults first."""
    found = {key[len("geval_"):-len(_FLAG_SUFFIX)] for r in rows for key in r
             if key.startswith("geval_") and key.endswith(_FLAG_SUFFIX)
             and not key.endswith("_sample" + _FLAG_SUFFIX)}
    return [d for d in DIMENSIONS if d in found or not found] + sorted(found - set(DIMENSIONS))


def further_dimensions(rows: list[Row]) -> str:
    """A table of the dimensions a team added to faithfulness and coverage (their means with
    95% CIs, the share scoring 4 or more, and parse failures), or "" when there are none."""
    extra = [d for d in judged_dimensions(rows) if d not in DIMENSIONS]
    if not extra:
        return ""
    body = []
    for r in rows:
        cells = []
        for d in extra:
            mean, lo, hi = (r.get(f"geval_{d}_{k}") for k in ("mean", "ci_low", "ci_high"))
            share = r.get(f"geval_{d}_share_ge4")
            cells.append("–" if mean is None else f"{mean:.3f}" + (
                f" [{lo:.3f}, {hi:.3f}]" if lo is not None else "")
                + (f"; ≥4: {share:.0%}" if share is not None else "")
                + f"; parse failures: {int(r.get(f'geval_{d}{_FLAG_SUFFIX}') or 0)}")
        body.append([r["run"], *cells])
    return ("**Further G-Eval dimensions** (`metrics.geval.dimensions`), each run over its own "
            "answered tasks: mean [95% CI]; share scoring 4 or more; replies without a "
            "readable score.\n\n" + table(["run", *extra], body))


def _self_consistency(rows: list[Row]) -> str:
    dims = judged_dimensions(rows)
    sampled = [r for r in rows if any(r.get(f"geval_{d}_judge_sd_mean") is not None
                                      for d in dims)]
    if not sampled:
        return ("**Judge self-consistency:** one judge reply per item (`judge.samples=1`), so "
                "the judge's own spread is not measured; `judge.samples=3` measures it.\n")
    header = ["run", "samples", *(f"judge SD ({d})" for d in dims)]
    return ("**Judge self-consistency:** each item was scored by independent judge samples "
            "and its score is their mean; the judge's SD per item, averaged over items (on a "
            "1-5 scale; 0 means the judge always agreed with itself).\n\n"
            + table(header, [[r["run"], r.get("judge_samples"),
                              *(r.get(f"geval_{d}_judge_sd_mean") for d in dims)]
                             for r in sampled]))


def _agreement(rows: list[Row]) -> str:
    paneled = [r for r in rows if r.get("judge_panel")]
    if not paneled:
        return ("**Judge agreement:** no panel (`judge.panel=[claude-sonnet-4-6]` adds a "
                "second judge and measures how far the verdict depends on the judge).\n")
    body = []
    dims = judged_dimensions(rows)
    for r in paneled:
        cells = []
        for d in dims:
            alpha = r.get(f"judge_agreement_{d}")
            lo, hi = r.get(f"judge_agreement_{d}_ci_low"), r.get(f"judge_agreement_{d}_ci_high")
            n = r.get(f"judge_agreement_{d}_n")
            cells.append("– (undefined: too few items or one value throughout)" if alpha is None
                         else f"{alpha:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None else "")
                         + f" (n={int(n or 0)})")
        failures = ", ".join(f"{name}: {int(sum(r.get(f'panel_{name}_geval_{d}_parse_failures') or 0 for d in dims))}"  # noqa: E501
                             for name in r["judge_panel"])
        body.append([r["run"], f"{r.get('judge')} + {', '.join(r['judge_panel'])}", *cells,
                     failures])
    return ("**Judge agreement:** Krippendorff's alpha (ordinal) between the primary judge and "
            "the panel on the same items, with a 95% bootstrap CI over items (1 is perfect "
            "agreement, 0 is chance; below about 0.67 a verdict resting on one judge is "
            "fragile). Parse failures per panel judge are null scores, not counted in alpha.\n\n"
            + table(["run", "judges", *(f"alpha ({d})" for d in dims),
                     "panel parse failures"], body))


def _disagreements(sets: TaskSets, top: int = 3) -> str:
    found = []
    for run in sets.runs:
        for tid in sets.common:
            rec = sets.tables[run["run_id"]][tid]
            for name, view in (rec.get("geval_panel") or {}).items():
                for d in [k for k in view or {} if f"{k}_reasoning" in view]:
                    mine, theirs = rec.get(f"geval_{d}"), (view or {}).get(d)
                    if mine is not None and theirs is not None and mine != theirs:
                        found.append((abs(mine - theirs), run, rec, name, view, d))
    if not found:
        return ""
    found.sort(key=lambda f: (-f[0], f[1]["run"], f[2]["id"], f[4].get(f[5]) or 0))
    out = ["**Where the judges disagree most:**\n"]
    for gap, run, rec, name, view, d in found[:top]:
        samples = len(rec.get(f"geval_{d}_samples") or [None])
        which = f" (the first of its {samples} samples)" if samples > 1 else ""
        out.append(f"- `{rec['id']}` ({run['run']}), {d}: primary judge {rec[f'geval_{d}']:.2f}, "
                   f"{name} {view[d]:.2f} (gap {gap:.2f})\n\n"
                   f"  Primary judge{which}:\n\n{_quote(rec.get(f'geval_{d}_reasoning'))}\n\n"
                   f"  {name}{which}:\n\n{_quote(view.get(f'{d}_reasoning'))}\n")
    return "\n".join(out)


def panel_reversals(sets: TaskSets) -> str:
    """Where a panel judge ranks two compared runs the other way round from the primary
    judge on a G-Eval dimension (the runs' mean difference over the tasks both judges scored
    for both runs has the opposite sign): the ranking then rests on which judge is
    believed, so the key finding says so. Empty when no panel judge reverses one."""
    runs = [r for r in sets.runs if not policy.is_bound(r)]
    found: dict[tuple[str, str], list[str]] = {}
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            for (dim, judge), (mine, theirs, n) in _judge_differences(sets, a, b).items():
                if mine * theirs < 0:
                    found.setdefault((dim, judge), []).append(
                        f"{a['run']} minus {b['run']}: primary judge {mine:+.2f}, {judge} "
                        f"{theirs:+.2f}, on {n} tasks")
    return "".join(f" The panel judge {judge} reverses the primary judge's ranking on {dim} "
                   f"({'; '.join(pairs)}): which run is better on {dim} depends on the judge."
                   for (dim, judge), pairs in found.items())


def _judge_differences(sets: TaskSets, a: Row, b: Row
                       ) -> dict[tuple[str, str], tuple[float, float, int]]:
    """Per (dimension, panel judge): the mean score difference a minus b by the primary
    judge and by the panel judge, over the tasks both judges scored for both runs."""
    first, second = sets.tables[a["run_id"]], sets.tables[b["run_id"]]
    pairs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for tid in sorted(set(first) & set(second)):
        mine, theirs = first[tid], second[tid]
        views = (mine.get("geval_panel") or {}, theirs.get("geval_panel") or {})
        for judge in sorted(set(views[0]) & set(views[1])):
            one, two = views[0][judge] or {}, views[1][judge] or {}
            for dim in [k for k in one if f"{k}_reasoning" in one]:
                found = [mine.get(f"geval_{dim}"), theirs.get(f"geval_{dim}"), one.get(dim),
                         two.get(dim)]
                scores = [float(v) for v in found if v is not None]
                if len(scores) == 4:
                    pairs.setdefault((dim, judge), []).append(
                        (scores[0] - scores[1], scores[2] - scores[3]))
    return {k: (float(np.mean([d[0] for d in v])), float(np.mean([d[1] for d in v])), len(v))
            for k, v in pairs.items()}


def _quote(text: Any) -> str:
    text = str(text or "(no reply)")
    if len(text) > REASONING_CHARS:
        text = text[:REASONING_CHARS] + " […]"
    return "\n".join(f"  > {line}" for line in text.splitlines())


def examples(sets: TaskSets, key: str) -> str:
    """On the metric's common tasks: where an agentic run beats every other run by the
    widest margin, one where a run without retrieval beats every run that retrieves, and the
    worst task. Only runs that have the metric take part."""
    out: list[str] = []
    ids, runs = sets.common_for(key), [r for r in sets.runs if sets.has(r, key)]

    def score(run: Row, tid: str) -> float | None:
        return sets.tables[run["run_id"]].get(tid, {}).get(key)

    sign = 1.0 if policy.higher_is_better(key) else -1.0  # the policy's direction

    def margins(run: Row, rivals: list[Row]) -> list[tuple[float, str]]:
        """Tasks where ``run`` beats every rival, widest margin first."""
        found = []
        for tid in ids:
            mine, theirs = score(run, tid), [score(r, tid) for r in rivals]
            if mine is not None and theirs and all(t is not None for t in theirs):
                margin = sign * mine - max(sign * t for t in theirs if t is not None)
                if margin > 0:
                    found.append((margin, tid))
        return sorted(found, reverse=True)  # widest first: margins are already oriented

    def note(tid: str, extra: str = "") -> str:
        listed = ", ".join(f"{r['run']} {score(r, tid):.3f}" for r in runs
                           if score(r, tid) is not None)
        return f"`{key}`: {listed}{extra}."

    agentic = next((r for r in runs if r.get("agentic")), None)
    others = [r for r in runs if r is not agentic]
    if agentic is not None and others:
        for margin, tid in margins(agentic, others)[:2]:
            out.append(_block(f"{agentic['run']} beats every other run",
                              sets.tables[agentic["run_id"]][tid],
                              note(tid, f" (margin {margin:.3f})")))
    retrieving = [r for r in runs if r.get("retrieves")]
    for run in (r for r in runs if not r.get("retrieves")):
        wins = margins(run, retrieving) if retrieving else []
        if wins:
            out.append(_block(f"{run['run']}, without retrieval, wins",
                              sets.tables[run["run_id"]][wins[0][1]], note(wins[0][1])))
            break
    scored = [sets.tables[r["run_id"]][t] for r in runs for t in ids
              if score(r, t) is not None]
    if scored:
        worst = min(scored, key=lambda x: sign * x[key])
        text = f"Worst `{key}` on the common tasks: {worst[key]:.3f}."
        reasoning = worst.get("geval_coverage_reasoning") or worst.get(
            "geval_faithfulness_reasoning")
        if reasoning:
            text += "\n\nJudge's reasoning:\n\n> " + "\n> ".join(reasoning.splitlines())
        out.append(_block("A failure", worst, text))
    return "\n".join(out) if out else "Not enough scored common tasks to choose examples.\n"


def _block(title: str, rec: dict[str, Any], note: str) -> str:
    reference = (f"\n\n{fenced(rec['reference'])}" if rec.get("reference") else
                 f"none: {rec.get('null_reasons', {}).get('rouge2_f1') or 'the task has none'}")
    return (f"### {title}: {code(rec['id'])}\n\n{note}\n\n**Question:** "
            f"{code(rec.get('question'))}\n\n**Reference:** {reference}\n\n**Predicted "
            f"({rec.get('system')}):**\n\n{fenced(rec.get('predicted'))}\n")


def _longest_run(text: str, char: str) -> int:
    return max((len(m) for m in re.findall(f"{re.escape(char)}+", text)), default=0)


def fenced(text: Any) -> str:
    """A fenced block no text can close: its fence is longer than any backtick run inside
    (data from a dataset or a model may hold fences of its own)."""
    body = str(text)
    fence = "`" * max(3, _longest_run(body, "`") + 1)
    return f"{fence}\n{body}\n{fence}"


def code(text: Any) -> str:
    """An inline code span no text can end early, on one line (a newline would let the
    rest of the text start a Markdown block of its own)."""
    body = " ".join(str(text).split())
    ticks = "`" * (_longest_run(body, "`") + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


__all__ = ["code", "examples", "fenced", "fmt", "further_dimensions", "judge_section",
           "judged_dimensions", "length_breakdown", "length_finding", "loops_recall",
           "tool_call_caveat"]


def unreadable_note(rows: list[Row]) -> str:
    """Judge-scored fields whose replies could not be read, per run (those tasks have no
    score for the field, so its mean rests on fewer tasks)."""
    parts = []
    for r in rows:
        fails = {k.removesuffix("_parse_failures"): int(v) for k, v in r.items()
                 if k.endswith("_parse_failures") and not k.endswith("_sample_parse_failures")
                 and v}
        parts += [f"{r['run']}: {field} on {n} of {int(r.get('n_answered') or 0)} answered "
                  "tasks" for field, n in fails.items()]
    if not parts:
        return ""
    return ("Unreadable judge replies (no score for those tasks; above "
            "runner.max_parse_failure_rate the run fails): " + "; ".join(parts) + ".\n")


def resumed_latency_note(rows: list[Row]) -> str:
    """Runs whose predictions (and so their latencies) were resumed from an earlier run,
    made under whatever load that run had; only runs whose latencies were measured
    (``latency_ms_p50``): a note on latencies that do not exist says nothing."""
    resumed = [r for r in rows if (r.get("n_resumed") or 0) > 0
               and r.get("latency_ms_p50") is not None]
    if not resumed:
        return ""
    parts = [f"{r['run']} ({int(r['n_resumed'])} of {int(r.get('n_tasks') or 0)} answers)"
             for r in resumed]
    if all(r.get("sequential") for r in resumed):  # each round carries the earlier ones on
        return ("Latency over rounds: " + "; ".join(parts) + " were answered in earlier "
                "rounds of this sequential sweep (or an earlier run of it), so their "
                "latencies were measured round by round, under each round's load.\n")
    return ("Latency from an earlier run: " + "; ".join(parts) + " were resumed from an "
            "earlier run of the same configuration, so their latencies were measured then, "
            "under that run's load.\n")
