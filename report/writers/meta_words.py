"""Words for a meta-evaluation (``report.meta_eval``) and for the judge's measured agreement
with people (docs/validate-your-judge.md)."""

from __future__ import annotations

from typing import Any

from report.model import Claim, Note
from report.writers.cells import MARKDOWN, Style, number
from report.writers.judge_words import table
from report.writers.words import words

PUBLISHED_SPLIT = ("ectsum", "test")  # the split of the published figures (report.meta_eval)


def _pct(value: Any) -> str:
    return number(None) if value is None else f"{100 * value:.1f}"


def _figure(name: str, f: dict[str, Any], style: Style) -> str:
    ci = (f" [95% CI {_pct(f['ci_low'])}, {_pct(f['ci_high'])}]" if f["ci_low"] is not None
          else " (no CI)")
    return f"{style.code(name)} {_pct(f['balanced_accuracy'])}%{ci} (n={int(f['n'] or 0)})"


def _split(domain: Any, split: Any) -> str:
    return f"SummEdits {domain} domain, {split} split"


def same_split(domain: Any, split: Any, style: Style) -> str:
    if (domain, split) == PUBLISHED_SPLIT:
        return ("This run is on the same split as the published figures (ectsum domain, test "
                "split), so the rows compare directly (the published ones have no CIs).")
    return (f"This run is on the {domain} domain's {split} split, not the same split as the "
            "published figures (ectsum domain, test split): compare with them only as a rough "
            f"guide; {style.code('dataset.split=test')} on an upstream clone gives the comparable "
            "figure.")


def best_signal(name: str, f: dict[str, Any], domain: Any, split: Any,
                style: Style = MARKDOWN) -> str:
    return ("Meta-evaluation, not a comparison of systems: the best faithfulness signal "
            f"against people's labels is {_figure(name, f, style)} balanced accuracy "
            f"({_split(domain, split)}).")


@words("meta_evaluation")
def meta_evaluation(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    figures = "; ".join(_figure(s, v, style) for s, v in f["signals"].items())
    if short:
        return f"agreement with people ({_split(f['domain'], f['split'])}): {figures}"
    published = ", ".join(f"{name} {value:.1f}%" for name, value in f["published"].items())
    return (f"{style.strong('Agreement with people')} ({c.runs[0]}, {_split(f['domain'], f['split'])}):"
            f" balanced accuracy {figures}. Published ({PUBLISHED_SPLIT[0]} domain, "
            f"{PUBLISHED_SPLIT[1]} split, no CIs): {published}. "
            + same_split(f["domain"], f["split"], style))


def _auc(s: dict[str, Any]) -> str:
    valued = s["auc_roc_valued"]
    return number(s["auc_roc"]) + (f" ({number(valued)} on the {s['auc_roc_valued_n']:.0f} items "
                                   "with a value)" if valued is not None else "")


@words("meta_signals")
def meta_signals(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    edits = f["edits"]
    rows = [[style.code(name), _pct(s["balanced_accuracy"]) + (
        f" [{_pct(s['ci_low'])}, {_pct(s['ci_high'])}]" if s["ci_low"] is not None else ""),
        _auc(s), *(_pct(s[f"recall_{e}"]) for e in edits), number(s["threshold"], 2),
        int(s["n"] or 0), int(s["no_value"] or 0), int(s["unreadable"] or 0)]
        for name, s in f["signals"].items()]
    rows += [[f"{name} (published)", f"{value:.1f}", "", *([""] * len(edits)), "", "", "", ""]
             for name, value in f["published"].items()]
    return ("Each faithfulness signal against the human labels of SummEdits: balanced accuracy "
            "with a bootstrap 95% CI over items, AUC-ROC where the signal is graded (in brackets: "
            "on the items with a value only), per edit type the share of inconsistent summaries "
            f"it flags; a signal decides \"consistent\" at or above its threshold "
            f"({style.code('metrics.meta_eval.thresholds')}) and where it has no value (counted "
            "under no value). Published rows: the SummEdits upstream README. "
            + same_split(f["domain"], f["split"], style)
            + f" Per item: {style.code('meta_items.jsonl')} (docs/validate-your-judge.md)."
            + table(style, short, ["signal", "balanced accuracy % [95% CI]", "AUC-ROC",
                                   *(f"recall {e}" for e in edits), "threshold", "n", "no value",
                                   "unreadable"], rows))


def _measured(f: dict[str, Any]) -> str:
    ci = (f" [95% CI {_pct(f['ci_low'])}, {_pct(f['ci_high'])}]" if f["ci_low"] is not None
          else " (no CI)")
    return f"balanced accuracy {_pct(f['balanced_accuracy'])}%{ci}"


def _where(f: dict[str, Any]) -> str:
    return (f"{_split(f['domain'], f['split'])}, n={int(f['n'] or 0)}; meta-evaluation run "
            f"{f['run_id']}")


@words("judge_validated")
def validated(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    return (f"{style.strong('Judge validated:')} {style.code(f['model_id'])} (these judge prompts) "
            f"agrees with people at {_measured(f)} on G-Eval faithfulness, its CI above "
            f"{_pct(f['floor'])}% (chance) ({_where(f)}).")


@words("judge_below_chance")
def below_chance(n: Note, style: Style, short: bool) -> str:
    f = n.counts
    return (f"Judge measured, not better than chance: {style.code(f['model_id'])} (these judge "
            f"prompts) agrees with people at {_measured(f)} on G-Eval faithfulness ({_where(f)}); "
            f"its CI does not lie above {_pct(f['floor'])}% (chance), so its faithfulness scores "
            "are no evidence of faithfulness.")


@words("judge_unvalidated")
def unvalidated(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    command = (f"python run.py dataset=summedits judge={f['judge']} dataset.split=test "
               "dataset.root=<a clone of github.com/salesforce/factualNLG>")
    return (f"{style.strong('Judge unvalidated:')} no measurement of {style.code(f['model_id'])} "
            "with these judge prompts against human labels is in this store, so how far its "
            f"faithfulness scores agree with people is unknown. Measure it: {style.code(command)} "
            "(docs/validate-your-judge.md).")
