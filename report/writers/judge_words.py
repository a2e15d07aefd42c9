"""Words for how far the judge can be trusted (``report/analyses/judge.py``, docs/judging.md,
docs/validate-your-judge.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from report.model import Claim, Note
from report.writers.cells import MARKDOWN, UNKNOWN, Style, interval, markdown_table, number, share
from report.writers.words import words

REASONING_CHARS = 1500
METHOD = "docs/judging.md#judging-g-eval-error-taxonomy-numeric-facts"


def estimate(value: Any, low: Any = None, high: Any = None, *, digits: int = 3) -> str:
    """A figure with its interval where it has one: 0.550 [0.200, 0.800]; none: unknown."""
    return UNKNOWN if value is None else number(value, digits) + (
        f" {interval((low, high), digits)}" if low is not None and high is not None else "")


def table(style: Style, short: bool, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A table under a claim's words, in report.md only (the console says the words)."""
    return "" if short or not style.markdown or not rows else "\n\n" + markdown_table(header, rows)


def _alpha(value: float | None, low: float | None, high: float | None, n: float | None) -> str:
    return "undefined (too few items or one value throughout)" if value is None else \
        f"{estimate(value, low, high)} (n={int(n or 0)})"


@words("judge_spread")
def spread(c: Claim, style: Style, short: bool) -> str:
    """The judge's own spread over samples, and its agreement with a panel."""
    samples, panel, dims = c.figures["samples"], c.figures["panel"], c.figures["dimensions"]
    said = [f"{style.strong('Judge self-consistency:')} one judge reply per item "
            f"({style.code('judge.samples=1')}): its own spread is not measured; "
            f"{style.code('judge.samples=3')} measures it." if not samples else
            f"{style.strong('Judge self-consistency:')} the judge's SD per item over its samples, "
            f"averaged over items (0: it always agreed with itself; {METHOD})."
            + table(style, short, ["run", "samples", *(f"judge SD ({d})" for d in dims)],
                    [[run, *cells] for run, cells in samples.items()])]
    said.append(f"{style.strong('Judge agreement:')} no panel "
                f"({style.code('judge.panel=[claude-sonnet-4-6]')} adds a second judge)." if not panel
                else f"{style.strong('Judge agreement:')} Krippendorff's alpha between the primary "
                "judge and the panel on the same items (below about 0.67 a verdict resting on one "
                f"judge is fragile; {METHOD})." + table(
                    style, short, ["run", "judges", *(f"alpha ({d})" for d in dims),
                                   "panel parse failures"],
                    [[run, " + ".join(filter(None, [f["judges"][0], ", ".join(f["judges"][1:])])),
                      *(_alpha(*f["alpha"][d]) for d in dims),
                      ", ".join(f"{k}: {v}" for k, v in f["failures"].items())]
                     for run, f in panel.items()]))
    return ("\n\n" if style.markdown else " ").join(said)


def _quote(text: Any) -> str:
    text = str(text or "(no reply)")
    text = text[:REASONING_CHARS] + " […]" if len(text) > REASONING_CHARS else text
    return "\n".join(f"  > {line}" for line in text.splitlines())


@words("judge_disagreement")
def disagreement(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    head = (f"{style.code(f['task'])} ({c.runs[0]}), {f['dimension']}: primary judge {f['primary']:.2f}, "
            f"{f['judge']} {f['other']:.2f} (gap {abs(f['primary'] - f['other']):.2f})")
    if short or not style.markdown:
        return "Judges disagree: " + head
    which = f" (the first of its {f['samples']} samples)" if f["samples"] > 1 else ""
    return ((f"{style.strong('Where the judges disagree most:')}\n\n" if f["rank"] == 0 else "")
            + f"- {head}\n\n  Primary judge{which}:\n\n{_quote(f['primary_reasoning'])}\n\n"
            f"  {f['judge']}{which}:\n\n{_quote(f['other_reasoning'])}")


@words("judge_reversal")
def reversal(c: Claim, style: Style, short: bool) -> str:
    f, dim = c.figures, c.figures["dimension"]
    pairs = "; ".join(f"{a} minus {b}: primary judge {mine:+.2f}, {f['judge']} {theirs:+.2f}, "
                      f"on {n} tasks" for a, b, mine, theirs, n in f["pairs"])
    return (f"The panel judge {f['judge']} reverses the primary judge's ranking on {dim} "
            f"({pairs}): which run is better on {dim} depends on the judge.")


def _dimension(mean: float | None, low: float | None, high: float | None,
               at_least_4: float | None, failures: int) -> str:
    return UNKNOWN if mean is None else (
        estimate(mean, low, high) + (f"; ≥4: {share(at_least_4)}" if at_least_4 is not None else "")
        + f"; parse failures: {failures}")


@words("judge_dimensions")
def dimensions(c: Claim, style: Style, short: bool) -> str:
    runs = c.figures["runs"]
    extra = list(next(iter(runs.values()), {}))
    return (f"{style.strong('Further G-Eval dimensions')} ({style.code('metrics.geval.dimensions')}: "
            + ", ".join(extra) + "), each run over its own answered tasks: mean [95% CI]; share "
            "scoring 4 or more; replies without a readable score." + table(
                style, short, ["run", *extra],
                [[run, *(_dimension(*f[d]) for d in extra)] for run, f in runs.items()]))


FIVE_POINT = "1-5"


def _kind(scale: str) -> str:
    return "quadratic-weighted kappa" if scale == FIVE_POINT else "Cohen's kappa"


def _kappa(k: Mapping[str, Any] | None) -> str:
    return "undefined (one value throughout)" if k is None else estimate(
        k["value"], k["ci_low"], k["ci_high"], digits=2)


def _low(a: Mapping[str, Any], floor: float) -> bool:
    return a["kappa"] is not None and a["kappa"]["value"] < floor


def _percent(value: Any, low: Any = None, high: Any = None) -> str:
    return _pct(value) + (f" [{_pct(low)}, {_pct(high)}]" if low is not None else "")


@words("people_judge")
def people_judge(c: Claim, style: Style, short: bool) -> str:
    f, rho = c.figures, lambda r: UNKNOWN if r is None else estimate(
        r["rho"], r["ci_low"], r["ci_high"], digits=2)
    rows = [[style.code(a["dimension"]), a["scale"] if a["threshold"] is None else
             f"{a['scale']} (judge yes at ≥ {a['threshold']:g})", (a["kappa"] or {}).get("n", 0),
             f"{_kind(a['scale'])} {_kappa(a['kappa'])}", rho(a["spearman"]),
             _percent(*a["balanced_accuracy"] or [None]), "undefined" if a["kappa"] is None else
             f"{style.strong('low')} (< {f['low']})" if _low(a, f["low"]) else "ok", a["unmatched"]]
            for a in f["judge"]]
    text = (f"People's labels ({f['sources']}) against the judge's scores of the same answers; "
            f"a kappa below {f['low']} is {style.strong('low')}: that dimension's judge scores "
            "are not to be trusted alone (docs/validate-your-judge.md#read-the-agreement)." + table(
                style, short, ["dimension", "scale", "n", "judge vs people: kappa [95% CI]",
                               "Spearman [95% CI]", "balanced accuracy % [95% CI]", "agreement",
                               "not compared"], rows))
    if f["mixed"]:
        text += ("\n\nLeft out, labelled on both scales (1-5 and yes/no): "
                 + ", ".join(style.code(d) for d in f["mixed"]) + ". Fix: one scale per dimension.")
    if f["left_out"]:
        text += "\n\nLabels left out:\n\n" + "\n".join(f"- {why}" for why in f["left_out"])
    head = "\n\n### Between labellers\n\n" if style.markdown and not short else " Between labellers: "
    if not f["labellers"]:
        return text + head + ("No answer was labelled by two people on the same dimension, so how "
                              "far people agree with each other is not measured here.")
    return text + head + "Kappa between each two labellers on the answers both labelled." + table(
        style, short, ["dimension", "labellers", "n (both labelled)", "kappa [95% CI]"],
        [[style.code(x["dimension"]), f"{x['first']}, {x['second']}", x["n"], _kappa(x["kappa"])]
         for x in f["labellers"]])


@words("people_agreement")
def people_agreement(c: Claim, style: Style, short: bool) -> str:
    found, floor = c.figures["judge"], c.figures["low"]
    parts = [f"{style.code(a['dimension'])} {_kind(a['scale'])} {_kappa(a['kappa'])} "
             f"(n={a['kappa']['n']})" + (f" — {style.strong('low')}" if _low(a, floor) else "")
             for a in found]
    low = [a["dimension"] for a in found if _low(a, floor)]
    warning = (f" Agreement is low on {', '.join(style.code(d) for d in low)}: its judge scores "
               "are not to be trusted alone." if low else "")
    return (f"{style.strong('Judge checked against your labels:')} {'; '.join(parts)}, 95% CIs "
            f"in brackets (labels: {c.figures['sources']}).{warning}")


# a meta-evaluation (report.meta_eval) and the judge's measured agreement with people
PUBLISHED_SPLIT = ("ectsum", "test")  # the split of the published figures (report.meta_eval)


def _pct(value: Any) -> str:
    return number(None) if value is None else f"{100 * value:.1f}"


def _ba(f: Mapping[str, Any]) -> str:
    return f"{_pct(f['balanced_accuracy'])}%" + (
        f" [95% CI {_pct(f['ci_low'])}, {_pct(f['ci_high'])}]" if f["ci_low"] is not None
        else " (no CI)")


def _figure(name: str, f: Mapping[str, Any], style: Style) -> str:
    return f"{style.code(name)} {_ba(f)} (n={int(f['n'] or 0)})"


def _split(f: Mapping[str, Any]) -> str:
    return f"SummEdits {f['domain']} domain, {f['split']} split"


def same_split(f: Mapping[str, Any], style: Style) -> str:
    if (f["domain"], f["split"]) == PUBLISHED_SPLIT:
        return "This run is on the published figures' split (ectsum domain, test split)."
    return (f"This run is on the {f['domain']} domain's {f['split']} split, not the same split as "
            "the published figures (ectsum domain, test split): compare with them only roughly.")


def best_signal(name: str, f: Mapping[str, Any], where: Mapping[str, Any], style: Style = MARKDOWN) -> str:
    return ("Meta-evaluation, not a comparison of systems: the best faithfulness signal against people's "
            f"labels is {_figure(name, f, style)} balanced accuracy ({_split(where)}).")


def meta_answer(rows: Sequence[dict[str, Any]], style: Style = MARKDOWN) -> str:
    """A meta-evaluation's one-sentence answer: the best signal's figure."""
    from report.meta_eval import SUFFIX, signal_figures, signals

    scored = [(row, s) for row in rows for s in signals(row) if row.get(s + SUFFIX) is not None]
    if not scored:
        return "Meta-evaluation: no signal has a balanced accuracy (no item was decided)."
    row, best = max(scored, key=lambda p: p[0][p[1] + SUFFIX])
    return best_signal(best, signal_figures(row, best), {"domain": row.get("dataset_domain"),
                                                         "split": row.get("dataset_split")}, style)


@words("meta_evaluation")
def meta_evaluation(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    figures = "; ".join(_figure(s, v, style) for s, v in f["signals"].items())
    if short:
        return f"agreement with people ({_split(f)}): {figures}"
    published = ", ".join(f"{name} {value:.1f}%" for name, value in f["published"].items())
    return (f"{style.strong('Agreement with people')} ({c.runs[0]}, {_split(f)}): balanced "
            f"accuracy {figures}. Published (ectsum domain, test split, no CIs): {published}. "
            + same_split(f, style))


def _auc(s: dict[str, Any]) -> str:
    valued = s["auc_roc_valued"]
    return number(s["auc_roc"]) + (f" ({number(valued)} on the {s['auc_roc_valued_n']:.0f} items "
                                   "with a value)" if valued is not None else "")


@words("meta_signals")
def meta_signals(c: Claim, style: Style, short: bool) -> str:
    f, edits = c.figures, c.figures["edits"]
    rows = [[style.code(name), _percent(s["balanced_accuracy"], s["ci_low"], s["ci_high"]), _auc(s),
             *(_pct(s[f"recall_{e}"]) for e in edits), number(s["threshold"], 2),
             int(s["n"] or 0), int(s["no_value"] or 0), int(s["unreadable"] or 0)]
            for name, s in f["signals"].items()]
    rows += [[f"{name} (published)", f"{value:.1f}", *([""] * (len(edits) + 5))]
             for name, value in f["published"].items()]
    return ("Each faithfulness signal against SummEdits' human labels, beside the upstream "
            f"README's published figures (docs/validate-your-judge.md#what-the-run-logs). "
            f"{same_split(f, style)} Per item: {style.code('meta_items.jsonl')}." + table(
                style, short, ["signal", "balanced accuracy % [95% CI]", "AUC-ROC",
                               *(f"recall {e}" for e in edits), "threshold", "n", "no value",
                               "unreadable"], rows))


def _measured(f: Mapping[str, Any], style: Style) -> str:
    return (f"{style.code(f['model_id'])} (these judge prompts) agrees with people at balanced "
            f"accuracy {_ba(f)} on G-Eval faithfulness")


def _where(f: Mapping[str, Any]) -> str:
    return f"{_split(f)}, n={int(f['n'] or 0)}; meta-evaluation run {f['run_id']}"


@words("judge_validated", "judge_below_chance", "judge_unvalidated")
def validation(c: Claim | Note, style: Style, short: bool) -> str:
    """The judge's measured agreement with people, or the command that measures it."""
    f = c.figures if isinstance(c, Claim) else c.counts
    if c.kind == "judge_validated":
        return (f"{style.strong('Judge validated:')} {_measured(f, style)}, its CI above "
                f"{_pct(f['floor'])}% (chance) ({_where(f)}).")
    if c.kind == "judge_below_chance":
        return (f"Judge measured, not better than chance: {_measured(f, style)} ({_where(f)}); its "
                f"CI does not lie above {_pct(f['floor'])}% (chance), so its faithfulness scores are "
                "no evidence of faithfulness.")
    command = (f"python run.py dataset=summedits judge={f['judge']} dataset.split=test "
               "dataset.root=<a clone of github.com/salesforce/factualNLG>")
    return (f"{style.strong('Judge unvalidated:')} no measurement of {style.code(f['model_id'])} "
            "with these judge prompts against human labels is in this store, so how far its "
            f"faithfulness scores agree with people is unknown. Measure it: {style.code(command)} "
            "(docs/validate-your-judge.md).")
