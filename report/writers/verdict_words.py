"""Words for the verdict's claims: the fixed-sample family's pairs and best contender, a
sequential sweep's looks and stop, and why nothing could be tested."""

from __future__ import annotations

from typing import Any

from metrics.stats import ALPHA, MIN_UNTIED, POWER, SIMULATIONS, Paired
from report.model import Claim, Note
from report.verdict import SMALL_N, Decision, Row, spent, tasks_asked
from report.writers.cells import Style, count, interval, money, number, p_value, signed
from report.writers.words import words

RULE_WORDS = (f"Holm-adjusted Wilcoxon with a bootstrap CI, simulated from the observed "
              f"differences, {SIMULATIONS:,} resamples")
CONTEXT_SETTING = "model.context_limit"  # what an "exceeds the model's context" skip names


def decision_word(d: Decision | None, paired: Paired) -> str:
    """A test's verdict in the paired table; a pair outside the family: unadjusted."""
    if d is None:
        return f"{paired.verdict()} (unadjusted)"
    if d.paired is None or not d.paired.testable:
        return "too few to test"
    return "significant" if d.significant else "no significant difference"


def n_words(n: int, documents: int | None) -> str:
    """A pair's n: its tasks, and the documents they read where tasks share one."""
    return f"{n} tasks on {documents} documents" if documents else str(n)


def stopped_words(run: Row) -> str:
    """How a run the cost cap stopped is said: what it ran of what it was asked and what it
    spent (the spend journal's figure); empty for a run the cap did not stop."""
    not_run = int(run.get("n_not_run") or 0)
    if not not_run:
        return ""
    return (f"stopped by the cost cap: {count(run.get('n_tasks') or 0)} of "
            f"{count(tasks_asked(run))} tasks run, {not_run} not run, "
            + (f"spent {money(spent(run), 4)}" if spent(run) is not None else "spend unknown"))


def _n(claim: Claim) -> str:
    return n_words(claim.n_tasks or 0, claim.n_documents)


def _name(run: str, claim: Claim) -> str:
    void = claim.figures.get("void") or []
    return f"{run} (called no tool: closed-book)" if run in void else run


def _p(claim: Claim) -> str:
    family = int(claim.figures.get("family") or 1)
    if family == 1:
        return f"p={p_value(claim.p)}"
    return (f"p={p_value(claim.p)}, Holm-adjusted over {family} comparisons "
            f"p={p_value(claim.p_adjusted)}")


def _shrunk(claim: Claim, style: Style) -> str:
    skips = claim.figures.get("skips") or []
    if not skips:
        return ""
    whys = []
    for s in skips:
        if s["skipped"]:
            setting = f", {style.code(CONTEXT_SETTING)}" if "context" in (s["reason"] or "") else ""
            whys.append(f"{s['run']} skipped {s['skipped']} ({s['reason']}{setting})")
        if s["errored"]:
            whys.append(f"{s['run']} errored on {s['errored']}")
    return f" of {claim.figures.get('n_all')}: the tasks both answered; {'; '.join(whys)}"


@words("difference", "no_difference", "untestable")
def pair(c: Claim, style: Style, short: bool) -> str:
    a, b = (_name(r, c) for r in c.runs)
    metric = style.code(c.metric or "")
    descriptive = bool(c.figures.get("descriptive"))
    if short:
        if c.kind == "difference" and not descriptive:
            small = ", small n" if (c.n_tasks or 0) < SMALL_N else ""
            better = str(c.figures.get("better") or c.runs[0])
            loser = c.runs[1] if better == c.runs[0] else c.runs[0]
            return (f"{_name(better, c)} beats {_name(loser, c)} on {c.metric} (by "
                    f"{abs(c.difference or 0):.3f}, n={_n(c)}{small})")
        if c.difference is None or c.ci is None:
            return f"{a} vs {b} on {metric}: too few tasks for a paired comparison"
        text = (f"{a} vs {b} on {metric}: difference {signed(c.difference)} "
                f"{interval(c.ci)}, n={_n(c)}")
        if descriptive:
            return text + " (fixed-sample, descriptive: the intervals decide)"
        if c.kind == "untestable":
            return text + f", too few to test (fewer than {MIN_UNTIED} untied pairs)"
        return text + f", adjusted p={p_value(c.p_adjusted)}" + _would_decide(c, style, short=True)
    means = c.figures.get("means") or []
    text = f"{style.strong(a)} vs {style.strong(b)} (n={_n(c)}{_shrunk(c, style)})"
    if len(means) == 2:
        text += f": {means[0]:.3f} vs {means[1]:.3f}"
    if c.difference is None or c.ci is None:
        return f"{text}; too few tasks for a paired comparison."
    if not c.figures.get("untied"):
        return f"{text}: {style.strong('a tie')}, identical on all {c.n_tasks} tasks."
    small = (f" (small n: a bootstrap CI over {c.n_tasks} pairs is unreliable)"
             if (c.n_tasks or 0) < SMALL_N else "")
    text += f", difference {signed(c.difference)}, 95% CI {interval(c.ci)}{small}"
    if c.p is not None:
        untied = "documents' mean differences" if c.n_documents else "pairs"
        text += f", Wilcoxon {_p(c)} over {c.figures.get('untied')} untied {untied}"
    tail = _stability(c, style) + _would_decide(c, style, short=False)
    if descriptive:
        return (f"{text}: {style.strong('descriptive')} (a sequential sweep decides by its "
                f"anytime-valid intervals, not by this test).{tail}")
    if c.kind == "difference":
        better = c.figures.get("better") or c.runs[0]
        return f"{text}: {style.strong('significant')}, {better} is better.{tail}"
    if c.kind == "untestable":
        return (f"{text}: {style.strong('too few to test')} (only {c.figures.get('untied')} "
                f"pairs differ, at least {MIN_UNTIED} are needed).{tail}")
    return f"{text}: {style.strong('no significant difference')} ({_why_not(c)}).{tail}"


def _why_not(c: Claim) -> str:
    rejects = c.p_adjusted is not None and c.p_adjusted < ALPHA
    p = "adjusted p" if int(c.figures.get("family") or 1) > 1 else "p"
    includes_zero = c.ci is not None and c.ci[0] <= 0 <= c.ci[1]
    if not rejects and includes_zero:
        return f"the test does not reject ({p} ≥ {ALPHA}) and the CI includes 0"
    if not rejects:
        return (f"the test does not reject ({p} ≥ {ALPHA}); the CI excludes 0, but a "
                "difference needs both")
    return f"the test rejects ({p} < {ALPHA}) but the CI includes 0; a difference needs both"


def _stability(c: Claim, style: Style) -> str:
    f = c.figures
    if "stable_share" not in f:
        return ""
    tasks = (f" On {f['stable_share']:.0%} of the {f['stable_tasks']} tasks the winner is the "
             "same in at least 80% of the repeats.")
    if f["same_sign"]:
        return f" Each of the {f['repeats']} repeats alone gives the same sign.{tasks}"
    return (f" {style.strong('The winner is not stable across repeats')}: {c.runs[0]} leads "
            f"in {f['repeats_leading']} of {f['repeats']} repeats taken alone.{tasks}")


def _would_decide(c: Claim, style: Style, short: bool) -> str:
    """The rule's minimum detectable difference over the pair's own units and what its
    observed difference would need; both of one quantity, named."""
    f = c.figures
    if "units" not in f:
        return ""
    unit, quantity = f["unit"], f["quantity"]
    mdd, needed, observed = f.get("mdd"), f.get("needed"), f.get("observed") or 0.0
    if short:
        parts = [f"the rule detects {mdd:.3f} here" if mdd is not None else
                 f"no detectable difference over {f['units']} {unit}"]
        if needed:
            parts.append(f"declaring {observed:.3f} would take about {count(needed)} {unit}"
                         + (f" ({quantity})" if unit == "documents" else ""))
        return "; " + ", ".join(parts)
    family = int(f.get("family") or 1)
    holm = f"; Holm at its worst case, p < {ALPHA}/{family}" if family > 1 else ""
    rule = f"the rule that decides ({RULE_WORDS}{holm})"
    mdd_words = style.strong("minimum detectable difference")
    of = " (of their mean differences)" if unit == "documents" else ""
    if mdd is None:
        text = f" The {mdd_words} of {rule} cannot be computed: {f.get('mdd_why')}."
    else:
        text = (f" The {mdd_words} over these {f['units']} {unit}{of} is {mdd:.3f}: the "
                f"smallest true difference {rule} declares with {POWER:.0%} power.")
    if observed == 0:
        return text + " The observed difference is 0: no number of tasks would declare it."
    said = "difference" if unit == "tasks" else quantity
    if mdd is None or observed < mdd:
        text += (f" Declaring the observed {said} ({observed:.3f}) would "
                 + (f"take about {count(needed)} {unit}." if needed
                    else f"take {f.get('needed_why')}."))
    return text


@words("best")
def best(c: Claim, style: Style, short: bool) -> str:
    first, second = c.runs
    mean = (c.figures.get("means") or [None])[0]
    if c.figures.get("tied"):
        return (f"No best mean: {', '.join(c.figures['tied'])} tie at {number(mean)}: no "
                "winner is declared.")
    if c.figures.get("descriptive"):
        return (f"Best mean: {first} ({number(mean)}), ahead of {second} by "
                f"{abs(c.difference or 0):.3f} (descriptive: the intervals decide).")
    if c.figures.get("ahead"):
        return (f"Best: {style.strong(first)} ({number(mean)}), significantly ahead of "
                f"{second}." + _would_decide(c, style, short))
    return (f"Best mean: {first} ({number(mean)}), but not significantly ahead of {second}: "
            "no winner is declared." + _would_decide(c, style, short))


NO_TEST = {"no_runs": "no run answered any task",
           "one_contender": "fewer than two contenders answered, so there is no pair to compare",
           "no_pairs": "no two contenders have two scored tasks in common",
           "too_few": f"too few tasks to test (a test needs {MIN_UNTIED} that differ)"}


@words("no_test")
def no_test(c: Claim, style: Style, short: bool) -> str:
    """Why nothing was tested (said after "Nothing decided" in the answer)."""
    f = c.figures
    reason = str(f.get("reason"))
    if reason == "one_contender":
        return (f": {f.get('contenders')} contender(s) answered, so there is no pair to "
                "compare")
    if reason == "too_few":
        return (f" on {c.metric}: too few tasks to test (at most {f.get('shared')} shared; a "
                f"test needs {MIN_UNTIED} that differ)")
    if reason == "no_pairs":
        return f": no two contenders have two scored tasks in common on {c.metric}"
    return ": " + NO_TEST.get(reason, reason)


STOP_WORDS = {"decided": "decided", "equivalent": "settled: no difference worth having",
              "settled": "settled", "max_tasks": "stopped at runner.max_tasks: undecided",
              "tasks_out": "ran out of tasks: undecided",
              "cost_cap": "stopped at the cost cap: undecided"}


@words("stopped")
def stopped(c: Claim, style: Style, short: bool) -> str:
    f: dict[str, Any] = dict(c.figures)
    said = STOP_WORDS.get(str(f.get("stop")), "stopped before its rule did: undecided")
    head, _, tail = said.partition(":")
    spend = f.get("spend_usd")
    of = (f" ({money(spend, 2)} of an estimated {money(f.get('estimated_full_usd'), 2)})"
          if spend else "")
    text = (f"{head[0].upper()}{head[1:]} after {f['tasks']} of {f['tasks_total']} tasks{of}"
            f"{':' + tail if tail else ''}")
    if short:
        return text
    return (text + ", by anytime-valid 95% intervals for each mean paired difference (the "
            f"family's error rate split across {len(f.get('comparisons') or [])} "
            "comparison(s)).")


@words("sequential")
def look(c: Claim, style: Style, short: bool) -> str:
    first, second = c.runs
    state, metric = c.figures.get("state"), style.code(c.metric or "")
    span = interval(c.ci, sign=True)
    if state == "decided":
        better = c.figures.get("better")
        return (f"{style.strong(str(better))} is better on {metric}: {first} minus {second} "
                f"lies in {span} over {c.n_tasks} tasks")
    if state == "equivalent":
        return (f"{first} and {second} are equivalent on {metric}: the difference lies in "
                f"{span}, within ±{c.figures.get('margin'):g}")
    return (f"{first} vs {second} on {metric} is undecided: the difference lies in {span} "
            f"over {c.n_tasks} tasks")


@words("descriptive_tests")
def descriptive_tests(n: Note, style: Style, short: bool) -> str:
    why = ("The sweep stopped when its anytime-valid intervals allowed" if n.counts.get("early")
           else "The sweep looked at its anytime-valid intervals after every round and stopped "
           f"for another reason ({str(n.counts.get('stop') or 'undecided').replace('_', ' ')})")
    if short:
        return "sequential sweep: fixed-sample p-values and CIs are descriptive; the intervals decide"
    return (f"{why}: the p-values and bootstrap CIs elsewhere in this report are computed on "
            "tasks a data-dependent rule chose to run and are descriptive, not tests. The "
            "decision is the intervals'.")


@words("self_preference")
def self_preference(n: Note, style: Style, short: bool) -> str:
    c = n.counts
    runs = ", ".join(n.runs)
    if short:
        return f"judge {c['judge']} is of the {c['family']} family, as {runs}: it may favour them"
    other = c["panel_other_family"]
    suggestion = (f"the panel's {', '.join(style.code(j) for j in other)} is of another "
                  "family: read its figures beside the primary judge's" if other else
                  "add a judge of another family: "
                  + style.code(f"judge.panel=[{c['suggest']}]"))
    return (f"{style.strong('Self-preference:')} the judge {style.code(c['judge'])} is of the "
            f"{c['family']} family, as the model of {runs}; LLM judges favour their own "
            f"family's answers, so its scores may favour "
            f"{'that run' if len(n.runs) == 1 else 'those runs'}: {suggestion}.")


@words("factcheck_accuracy")
def factcheck_accuracy(n: Note, style: Style, short: bool) -> str:
    measured = "; ".join(f"{ba:.3f} [{low:.3f}, {high:.3f}] on SummEdits' {split} split"
                         for split, (ba, low, high) in n.counts.items())
    if short:
        return f"factcheck is a no-LLM screen: balanced accuracy {measured}"
    return (f"The verdict decides on {style.code('factcheck')}, a no-LLM check whose balanced "
            f"accuracy against people, held out from its tuning, is {measured} (95% CIs; "
            "docs/validate-your-judge.md): a screen for changed figures, names and opposites, "
            "not a judge of faithfulness.")

