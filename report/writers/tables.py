"""report.md's section tables, rendered from the model's rows by the one formatter
(``report.writers.cells``): the task sets, the paired tests, quality, cost and latency, the
error taxonomy and the loop budget. A table wider than ``MAX_COLUMNS`` is split into groups,
each with the run column first; no figure is computed here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from metrics.geval import ERROR_CODES
from metrics.stats import Correlation
from report import policy
from report.model import Table
from report.verdict import (
    SMALL_N,
    Decision,
    TaskSets,
    by_dataset,
    judge_spent,
    run_counts,
    shown_pairs,
    spent,
    task_cost,
)
from report.writers.cells import (
    UNKNOWN,
    count,
    interval,
    markdown_table,
    money,
    ms,
    number,
    p_value,
)
from report.writers.cells import lacking as lacking_words
from report.writers.verdict_words import decision_word, n_words
from tracking.spend import PAYERS

Row = dict[str, Any]
MAX_COLUMNS = 8  # wider, a table scrolls sideways: it is split, the run column in each part
DOCS = "docs/verdict.md#the-rules-behind-the-figures"
# report metrics that count something (tokens, chunks): shown rounded, under "Lengths"
LENGTHS = ("answer_input_tokens", "context_chunks", "context_tokens")


def split(table: Table, width: int = MAX_COLUMNS) -> list[Table]:
    """``table`` in parts of at most ``width`` columns, each led by its first column."""
    step = width - 1
    return [Table([table.header[0], *table.header[1 + k:1 + k + step]],
                  [[row[0], *row[1 + k:1 + k + step]] for row in table.rows])
            for k in range(0, max(len(table.header) - 1, 1), step)]


def grouped(groups: Sequence[tuple[str, Table]]) -> str:
    """Each non-empty group under its bold title, split to at most ``MAX_COLUMNS``."""
    out = []
    for title, table in groups:
        if len(table.header) < 2:
            continue
        parts = split(table)
        out += [f"**{title}{' (continued)' if k else ''}**\n\n" + markdown_table(p.header, p.rows)
                for k, p in enumerate(parts)]
    return "\n".join(out)


def task_sets(sets: TaskSets) -> str:
    """How many tasks each run answered, and the common set every comparison uses."""
    parts = {name: (len(p.common), len(p.all_ids)) for name, p in by_dataset(sets).items()}
    head = (f"There are **{len(sets.common)} tasks every compared run answered** (of "
            f"{len(sets.all_ids)} in the sweep)." if len(parts) == 1 else
            f"The sweep ran on **{len(parts)} datasets**, each compared on its own (a task is "
            "paired only with itself, never with another dataset's): "
            + "; ".join(f"`{name}` **{common}** of {every}" for name, (common, every) in
                        parts.items()) + " tasks every compared run of the dataset answered.")
    rows = [[r["run"], count(r["tasks"]), count(r["answered"]), count(r["skipped"]),
             count(r["errored"]), "yes" if r["compared"] else "no: answered no task"]
            for r in run_counts(sets)]
    return (f"{head} Each metric is compared on the tasks every run that has it answered; "
            f"where that is not every task, its n is shown ([how]({DOCS})).\n\n"
            + markdown_table(["run", "tasks", "answered", "skipped", "errored", "compared"], rows))


def paired(sets: TaskSets, keys: Sequence[str], decided: Sequence[Decision],
           descriptive: bool = False) -> str:
    """Every pair of runs on each decision metric: the family's tests with raw and adjusted
    p (a pair with a bound is shown for reference, untested by the verdict)."""
    family = max((d.family for d in decided), default=1)
    intro = (f"Paired bootstrap 95% CIs and Wilcoxon tests, first minus second, on "
             f"{', '.join(f'`{k}`' for k in keys)}: {family} test(s), {policy.CORRECTION}-adjusted "
             f"together; significant when the adjusted p < 0.05 and the CI excludes 0 "
             f"([the rule]({DOCS})).\n")
    if descriptive:
        intro += ("**Descriptive:** this sweep stopped by its anytime-valid intervals (section "
                  "\"Sequential stop\"): these tests are on tasks a data-dependent rule chose "
                  "to run, so their verdicts decide nothing.\n")
    return intro + "".join(_paired_table(sets, key, decided, descriptive) for key in keys)


def _paired_table(sets: TaskSets, key: str, decided: Sequence[Decision],
                  descriptive: bool) -> str:
    rows = []
    for a, b, d, res in shown_pairs(sets, key, decided):
        held = d is not None and d.p_adjusted is not None
        word = decision_word(d, res)
        rows.append([f"{a['run']} vs {b['run']}", f"{n_words(res.n, res.n_clusters)} ({res.n_untied} untied)",
                     res.mean_diff, interval((res.ci_low, res.ci_high)), res.p_text(),
                     p_value(d.p_adjusted) if held and d else
                     "a bound: not decided on" if d is None else "untestable",
                     f"{res.wins}/{res.losses}/{res.ties}",
                     f"descriptive ({word})" if descriptive else word])
    head = f"\n### `{key}`\n\n"
    if not rows:
        return head + "Fewer than two runs share two scored common tasks.\n"
    return head + markdown_table(["pair", "pairs", "mean diff", "95% CI", "Wilcoxon p",
                                  f"{policy.CORRECTION} p", "wins/losses/ties", "verdict"], rows)


def _get(row: Row, key: str) -> Any:
    return row.get(key)


def _mean(row: Row, key: str, n_all: int | None, whole: bool = False) -> str:
    """A mean with its 95% CI; over a common set (``n_all``) its n where not every task."""
    mean = row.get(f"{key}_mean")
    if mean is None:
        return UNKNOWN
    show: Callable[[Any], str] = count if whole else (lambda v: number(v, 3))
    lo, hi = row.get(f"{key}_ci_low"), row.get(f"{key}_ci_high")
    text = f"{show(mean)} [{show(lo)}, {show(hi)}]" if lo is not None else show(mean)
    n = row.get(f"{key}_n")
    notes = [] if n_all is None or n == n_all else [f"n={count(n)}"]
    if n_all is not None and n is not None and n < SMALL_N and lo is not None:
        notes.append("small n: CI unreliable")
    return f"{text} ({'; '.join(notes)})" if notes else text


def quality(rows: Sequence[Row], n_all: int | None = None) -> str:
    """One column per declared report metric (mean [95% CI]) in three groups: the scores
    that may decide, the other measures, and lengths (rounded counts); the share at or above
    a threshold where one is declared. ``n_all``: over the common tasks (a cell with fewer
    scored tasks says its n); None: over each run's own answered tasks."""
    scored = [m for m in policy.report_metrics()
              if any(r.get(f"{m.name}_mean") is not None for r in rows)]
    columns: dict[str, list[tuple[str, Callable[[Row], Any]]]] = {
        "Scores": [], "Faithfulness and coverage": [],
        "Lengths": [("tasks", lambda r: count(n_all if n_all is not None else
                                              r.get("n_answered", 0))),
                    ("words", lambda r: count(r.get("word_count_mean"))),
                    ("target", lambda r: r.get("target_length"))]}
    for m in scored:
        group = ("Lengths" if m.name in LENGTHS else "Scores" if m.compare_priority is not None
                 else "Faithfulness and coverage")
        columns[group].append((m.title, partial(_mean, key=m.name, n_all=n_all,
                                                whole=group == "Lengths")))
        if m.share_at_least is not None and n_all is None:
            columns[group].append((f"≥{m.share_at_least:g}", partial(_get, key=m.share_key)))
    unscored = [m.title for m in policy.report_metrics() if m not in scored]
    return grouped([(title, Table(["run", *(h for h, _ in cols)],
                                  [[r["run"], *(f(r) for _, f in cols)] for r in rows]))
                    for title, cols in columns.items()]) + (
        "\nNot scored in any run (the caveats and each record's null reasons say why): "
        f"{', '.join(unscored)}.\n" if unscored else "")


def quality_section(common: Sequence[Row], finished: Sequence[Row], n_all: int, judged: bool
                    ) -> str:
    """The Quality section: each metric over its common task set, then each run's own."""
    no_judge = "" if judged else "G-Eval columns: no judge (run with `judge=claude-haiku-4-5`)."
    return ("## Quality\n\nEach metric on its own common task set: the tasks every run that has "
            f"the metric answered (means with bootstrap 95% CIs; n shown where it is not all "
            f"{n_all} tasks). {no_judge}\n\n" + quality(common, n_all)
            + "\n\n![comparison](plots/comparison.png)\n\nEach run over all the tasks it answered "
            "(its own n; not comparable across runs whose task sets differ):\n\n" + quality(finished))


def _unknown(row: Row, value: Any, missing: int, shown: Callable[[Any], str],
             partial_mean: bool = False) -> str:
    """A cost or latency cell: the figure, or "unknown (k of n lack it)", never 0;
    ``partial_mean``: with the mean over the answered tasks that carry it, and over how many."""
    if value is not None:
        return shown(value)
    notes = [lacking_words(missing, row.get("n_records", 0))] if missing else []
    partial, n = row.get("cost_usd_answered_mean"), row.get("cost_usd_answered_mean_n")
    if partial_mean and partial is not None and n:
        notes.append(f"{money(partial)} a task over {count(n)} of "
                     f"{count(row.get('n_task_ids', 0))} answered tasks, those that carry it")
    return f"{UNKNOWN} ({'; '.join(notes)})" if notes else UNKNOWN


def cost(finished: Sequence[Row], headline: Sequence[Row], judged: bool) -> str:
    """What each run cost and spent, then its latency and loops (two tables); ``headline``
    (``verdict.headline_rows``) says how many records lack each figure."""
    known = {r["run_id"]: r for r in headline}
    rows = [{**r, **{k: known.get(r["run_id"], {}).get(k) for k in ("lacking", "n_records")}}
            for r in finished]

    def lack(r: Row, field: str) -> int:
        return int((r.get("lacking") or {}).get(field) or 0)

    money5, money4 = (lambda v: money(v)), (lambda v: money(v, 4))
    spend = Table(["run", "tasks", "errors", "skipped", "cost / task", "spent / task", "spent",
                   "judge cost"],
                  [[r["run"], count(r.get("n_tasks", 0)), count(r.get("n_errors", 0)),
                    count(r.get("n_skipped", 0)),
                    _unknown(r, task_cost(r), lack(r, "cost_usd"), money5),
                    _unknown(r, r.get("cost_usd_per_task"), lack(r, "cost_usd"), money5, True),
                    _unknown(r, spent(r), lack(r, "cost_usd"), money4),
                    money(judge_spent(r), 4, "no judge" if not judged else UNKNOWN)]
                   for r in rows])
    latency = Table(["run", "P50 latency", "P90", "P99", "errored: P50", "mean loops",
                     "cost per coverage point"],
                    [[r["run"], *(_unknown(r, r.get(f"latency_ms_p{q}"), lack(r, "latency_ms"), ms)
                                  for q in (50, 90, 99)),
                      ms(r.get("latency_ms_errors_p50")) if r.get("n_errors") else "no errors",
                      number(r.get("loops_mean"), 1, "not agentic" if not r.get("agentic")
                             else UNKNOWN),
                      money(r.get("cost_per_coverage_point")) if judged else "no judge"]
                     for r in rows])
    return (f"Cost per task counts every task run, errored included, as if no call had come "
            f"from the response cache; spent is what was paid ([cost]({DOCS})).\n\n"
            + grouped([("Cost", spend), ("Latency and loops", latency)]))


def taxonomy(finished: Sequence[Row]) -> str:
    """The judge's codes per run, beside the path's mechanical P and IR (metrics/trajectory)
    and how often each agrees with the judge's."""
    defs = "; ".join(f"**{c}** {d.split(':')[0]}" for c, d in ERROR_CODES.items())
    codes = Table(["run", *ERROR_CODES], [[r["run"], *(r.get(f"error_rate_{c}")
                                                        for c in ERROR_CODES)] for r in finished])
    path = Table(["run", "P (path)", "P agrees", "IR (path)", "IR agrees"],
                 [[r["run"], *(cell for c in ("p", "ir") for cell in (
                     (r.get(f"trajectory_{c}_mean"),
                      r.get(f"trajectory_judge_agreement_{c.upper()}"))
                     if r.get("agentic") else ("not agentic", "not agentic")))]
                  for r in finished])
    return (f"Share of judged tasks with each code ({defs}), as the judge assigned them to "
            "tasks scoring below 3; beside them the agent's path's own P and IR, and how often "
            "each agrees with the judge's ([the codes](docs/judging.md#the-agents-path-"
            "trajectory-measures-anchored-to-gold-evidence)).\n\n"
            + grouped([("The judge's codes", codes), ("The agent's path", path)])
            + "\n![taxonomy](plots/error_taxonomy_by_system.png)\n")


def loop_budget(agents: Sequence[Row], key: str) -> str:
    """Each budget's row: the decision metric, recall, loops and what a task costs."""
    curve = sorted(((int(r["max_loops"]), r) for r in agents), key=lambda p: p[0])
    return markdown_table(["max_loops", key, "retrieval recall", "mean loops",
                           "cost / task (no cache)", "spent / task"],
                          [[m, r.get(f"{key}_mean"), r.get("retrieval_recall_mean"),
                            r.get("loops_mean"), money(task_cost(r)),
                            money(r.get("cost_usd_per_task"))] for m, r in curve])


def loops_recall(found: Correlation | None) -> str:
    """Spearman's correlation of an agent's loops with its retrieval recall, with its CI."""
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


# the "Total spent" line of the cost section (what tracking.spend read of the journals)
PAID_BY = dict(zip(PAYERS, ("an earlier attempt of this sweep (stopped before its report)",
                            "other sweeps", "runs outside a sweep"), strict=True))


def _split(row: Row, new: float | None, earlier_key: str) -> tuple[float, float]:
    earlier = float(row.get(earlier_key) or 0.0)
    if row.get("reused_run"):
        return 0.0, earlier + (new or 0.0)
    return new or 0.0, earlier


def total_line(rows: list[Row], pairwise_new: float = 0.0, pairwise_earlier: float = 0.0
               ) -> str:
    """The report's "Total spent" line over every run of the sweep, failed ones included."""
    systems = [_split(r, spent(r), "cost_usd_spent_earlier") for r in rows]
    judges = [_split(r, judge_spent(r), "judge_cost_usd_spent_earlier") for r in rows]
    missing = [r["run"] for r in rows if spent(r) is None]
    judged = any(judge_spent(r) is not None for r in rows)
    if len(missing) == len(rows) and not (judged or pairwise_new or pairwise_earlier):
        return (f"\nTotal spent: unknown (no run's spend is known: records without cost, no "
                f"spend journal): {', '.join(missing)}.\n")
    sys_new, judge_new = sum(s[0] for s in systems), sum(j[0] for j in judges) + pairwise_new
    earlier = (sum(s[1] for s in systems) + sum(j[1] for j in judges) + pairwise_earlier)
    line = (f"\nTotal spent: {money(sys_new + judge_new, 4)} new, paid this time (systems "
            f"{money(sys_new, 4)}, judge {money(judge_new, 4)}"
            + (f", of which the pairwise judge {money(pairwise_new, 4)}" if pairwise_new else "")
            + ")")
    rounds = max((int(r.get("spend_rounds") or 0) for r in rows), default=0)
    if rounds > 1:
        line += f" over its {rounds} rounds"
    if earlier:
        line += (f"; earlier: {money(earlier, 4)}, paid before for the answers this one carries "
                 f"over or reuses (counted there, not again): {_payers(rows, earlier)}")
    reused = sum(_cache_reused(r) for r in rows if not r.get("reused_run"))
    if reused:
        line += (f"; reused from the response cache: {money(reused, 4)}, what those replies cost "
                 "when first paid (not paid again)")
    if missing:
        line += (f"; not counted, their spend unknown (records without cost): "
                 f"{', '.join(missing)}")
    return line + ".\n"


def _payers(rows: list[Row], earlier: float) -> str:
    """Who paid the earlier spend: each payer's part, and what the journals do not say."""
    parts = {k: sum((r.get("spent_from") or {}).get(k, 0.0) for r in rows) for k in PAID_BY}
    named = [f"{money(v, 4)} by {PAID_BY[k]}" for k, v in parts.items() if v > 0]
    rest = earlier - sum(parts.values())
    if rest > 5e-5 or not named:
        named.append(f"{money(rest, 4)} by earlier sweeps or attempts")
    return ", ".join(named)


def _cache_reused(row: Row) -> float:
    uncached, paid = row.get("cost_usd_uncached_total"), row.get("cost_usd_total")
    if uncached is None or paid is None:
        return 0.0
    return max(0.0, float(uncached) - float(paid))
