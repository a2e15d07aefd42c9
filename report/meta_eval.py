"""The report's section on a meta-evaluation run (``dataset=summedits``): each faithfulness
signal's agreement with people, beside the published figures on the same domain."""

from __future__ import annotations

from typing import Any

from report.model import Claim
from report.verdict import fmt, table

Row = dict[str, Any]
SUFFIX = "_balanced_accuracy"
# SummEdits (Laban et al. 2023, "LLMs as Factual Reasoners"), upstream README
# (github.com/salesforce/factualNLG): balanced accuracy on the ectsum domain's test split
PUBLISHED = (("GPT-4", 87.0), ("Gemini-pro", 83.1), ("ChatGPT", 78.6), ("Claude 2.1", 77.1),
             ("QAFactEval", 72.6), ("SummaC-Conv", 57.9), ("people", 95.4))
PUBLISHED_SPLIT = ("ectsum", "test")
EDITS = ("entity_modification", "antonym_swap", "hallucinated_fact_insertion",
         "negation_insertion_removal")


def signals(row: Row) -> list[str]:
    return [k[: -len(SUFFIX)] for k in row if k.endswith(SUFFIX)]


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _signal_row(row: Row, signal: str) -> list[Any]:
    ba = row.get(signal + SUFFIX)
    lo, hi = row.get(f"{signal}{SUFFIX}_ci_low"), row.get(f"{signal}{SUFFIX}_ci_high")
    ci = f" [{_pct(lo)}, {_pct(hi)}]" if lo is not None else ""
    valued, n_valued = row.get(f"{signal}_auc_roc_valued"), row.get(f"{signal}_auc_roc_valued_n")
    auc = fmt(row.get(f"{signal}_auc_roc")) + (
        f" ({fmt(valued)} on the {n_valued:.0f} items with a value)" if valued is not None
        else "")
    return [f"`{signal}`", _pct(ba) + ci, auc,
            *(_pct(row.get(f"{signal}_recall_{e}")) for e in EDITS),
            fmt(row.get(f"{signal}_threshold"), 2), int(row.get(f"{signal}_n") or 0),
            int(row.get(f"{signal}_no_value") or 0), int(row.get(f"{signal}_unreadable") or 0)]


def same_split_sentence(row: Row) -> str:
    domain, split = row.get("dataset_domain"), row.get("dataset_split")
    if (domain, split) == PUBLISHED_SPLIT:
        return ("This run is on the same split as the published figures (ectsum domain, test "
                "split), so the rows compare directly (the published ones are point figures "
                "without CIs).")
    return (f"This run is on the {domain} domain's {split} split, not the same split as the "
            "published figures (ectsum domain, test split): compare with them only as a rough "
            "guide; `dataset.split=test` on an upstream clone gives the comparable figure.")


def is_meta_evaluation(rows: list[Row]) -> bool:
    """Whether these runs measure faithfulness signals against people (``dataset=summedits``)
    rather than compare systems: then the report's answer is their agreement, not a verdict."""
    return bool(rows) and all(signals(r) for r in rows)


def _signal_figure(row: Row, signal: str) -> str:
    ba = row.get(signal + SUFFIX)
    lo, hi = row.get(f"{signal}{SUFFIX}_ci_low"), row.get(f"{signal}{SUFFIX}_ci_high")
    ci = f" [95% CI {_pct(lo)}, {_pct(hi)}]" if lo is not None else " (no CI)"
    return f"`{signal}` {_pct(ba)}%{ci} (n={int(row.get(f'{signal}_n') or 0)})"


def _split_words(row: Row) -> str:
    return f"SummEdits {row.get('dataset_domain')} domain, {row.get('dataset_split')} split"


def meta_answer(rows: list[Row]) -> str:
    """The report's one-sentence answer for a meta-evaluation: the best signal's figure."""
    scored = [(row, s) for row in rows for s in signals(row) if row.get(s + SUFFIX) is not None]
    if not scored:
        return "Meta-evaluation: no signal has a balanced accuracy (no item was decided)."
    row, best = max(scored, key=lambda p: p[0][p[1] + SUFFIX])
    return (f"Meta-evaluation, not a comparison of systems: the best faithfulness signal "
            f"against people's labels is {_signal_figure(row, best)} balanced accuracy "
            f"({_split_words(row)}).")


def meta_findings(rows: list[Row]) -> list[Claim]:
    """The key finding of each meta-evaluation run: every signal's balanced accuracy with
    its CI, beside the published figures, and on which split."""
    return [Claim("meta_evaluation", "Key finding", (row["run"],), key=True, figures={
        "split": row.get("dataset_split"), "domain": row.get("dataset_domain"),
        "signals": {s: {"balanced_accuracy": row.get(s + SUFFIX),
                        "ci_low": row.get(f"{s}{SUFFIX}_ci_low"),
                        "ci_high": row.get(f"{s}{SUFFIX}_ci_high"),
                        "n": row.get(f"{s}_n")} for s in signals(row)},
        "published": dict(PUBLISHED)}) for row in rows if signals(row)]


def meta_words(c: Claim, style: Any, short: bool) -> str:
    """A meta-evaluation run's agreement with people, in words (``report/writers``)."""
    row = {"dataset_domain": c.figures["domain"], "dataset_split": c.figures["split"],
           **{k: v for s, f in c.figures["signals"].items() for k, v in (
               (s + SUFFIX, f["balanced_accuracy"]), (f"{s}{SUFFIX}_ci_low", f["ci_low"]),
               (f"{s}{SUFFIX}_ci_high", f["ci_high"]), (f"{s}_n", f["n"]))}}
    figures = "; ".join(_signal_figure(row, s) for s in c.figures["signals"])
    if short:
        return f"agreement with people ({_split_words(row)}): " + figures.replace("`", "")
    published = ", ".join(f"{name} {value:.1f}%" for name, value in c.figures["published"].items())
    return (f"**Agreement with people** ({c.runs[0]}, {_split_words(row)}): balanced accuracy "
            f"{figures}. Published ({PUBLISHED_SPLIT[0]} domain, {PUBLISHED_SPLIT[1]} split, no "
            f"CIs): {published}. {same_split_sentence(row)}")


def meta_section(rows: list[Row]) -> str:
    """One table per meta-evaluation run: its signals and the published anchors."""
    out = []
    for row in (r for r in rows if signals(r)):
        head = ["signal", "balanced accuracy % [95% CI]", "AUC-ROC",
                *(f"recall {e}" for e in EDITS), "threshold", "n", "no value", "unreadable"]
        body = [_signal_row(row, s) for s in signals(row)]
        body += [[f"{name} (published)", f"{value:.1f}", "", *([""] * len(EDITS)), "", "", "",
                  ""] for name, value in PUBLISHED]
        out.append(
            f"## Agreement with people: {row['run']}\n\n"
            "Each faithfulness signal against the human labels of SummEdits (Laban et al. "
            "2023): balanced accuracy with a bootstrap 95% CI over items, AUC-ROC where the "
            "signal is graded (on the same items: one with no value ranks as the most "
            "consistent; in brackets, on the items with a value only), and per edit type "
            "the share of inconsistent summaries it flags. A signal decides "
            "\"consistent\" at or above its threshold "
            "(`metrics.meta_eval.thresholds`, chosen on evaluation splits only); a task where "
            "it has no value (no number to check, an unreadable judge reply) counts as "
            "\"consistent\" and is counted under *no value*. Published rows: SummEdits "
            "upstream README (github.com/salesforce/factualNLG), ectsum domain, test split. "
            + same_split_sentence(row) + " Per item: `meta_items.jsonl`.\n\n"
            + table(head, body))
    return "\n".join(out)


VALIDATING_SIGNAL = "geval_faithfulness"
# a judge is "validated" only when the whole 95% CI of its balanced accuracy lies above this
# floor: 50% is chance (a coin, or one answer for every summary), so a CI reaching it is
# no evidence the judge tells faithful summaries from unfaithful ones
VALIDATION_FLOOR = 0.5


def _measured(client: Any, model_id: str, prompt_version: str | None) -> Any | None:
    """The latest meta-evaluation run of this judge model and judge prompts in the store
    that measured its faithfulness against people, or None."""
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string=(
        "params.`dataset.adapter` = 'summedits' and "
        f"params.`judge.model_id` = '{model_id}'"), order_by=["attributes.start_time DESC"])
    return next((r for r in runs if VALIDATING_SIGNAL + SUFFIX in r.data.metrics
                 and r.data.params.get("judge_prompt_version") == prompt_version), None)


def _figure(run: Any) -> str:
    m = run.data.metrics
    lo, hi = m.get(f"{VALIDATING_SIGNAL}{SUFFIX}_ci_low"), m.get(f"{VALIDATING_SIGNAL}{SUFFIX}_ci_high")
    ci = f" [95% CI {_pct(lo)}, {_pct(hi)}]" if lo is not None else " (no CI)"
    return f"balanced accuracy {_pct(m[VALIDATING_SIGNAL + SUFFIX])}%{ci}"


def _where(run: Any) -> str:
    m, params = run.data.metrics, run.data.params
    return (f"SummEdits {params.get('dataset.options.domain')} domain, "
            f"{params.get('dataset.split')} split, n={int(m.get(VALIDATING_SIGNAL + '_n') or 0)}; "
            f"meta-evaluation run {run.info.run_id}")


def beats_floor(run: Any) -> bool:
    """Whether the measured judge's CI lies wholly above ``VALIDATION_FLOOR``."""
    low = run.data.metrics.get(f"{VALIDATING_SIGNAL}{SUFFIX}_ci_low")
    return low is not None and low > VALIDATION_FLOOR


def agreement_sentence(run: Any, model_id: str) -> str:
    return (f"**Judge validated:** `{model_id}` (these judge prompts) agrees with people at "
            f"{_figure(run)} on G-Eval faithfulness, its CI above {_pct(VALIDATION_FLOOR)}% "
            f"(chance) ({_where(run)}).\n")


def below_floor_sentence(run: Any, model_id: str) -> str:
    return (f"Judge measured, not better than chance: `{model_id}` (these judge prompts) "
            f"agrees with people at {_figure(run)} on G-Eval faithfulness ({_where(run)}); its "
            f"CI does not lie above {_pct(VALIDATION_FLOOR)}% (chance), so its faithfulness "
            "scores are no evidence of faithfulness.")


def _judges(rows: list[Row]) -> list[tuple[str, str, str | None]]:
    """(model id, judge name, prompt version) of each judge of a judged sweep that is not a
    meta-evaluation itself."""
    judged = [r for r in rows if (r.get("judge_calls") or 0) > 0 and not signals(r)]
    return sorted({(str(r["judge_model_id"]), str(r.get("judge")), r.get("judge_prompt_version"))
                   for r in judged if r.get("judge_model_id")}, key=lambda j: j[:2])


def judge_caveats(client: Any, rows: list[Row]) -> list[str]:
    """The caveat for each judge that was measured against people and did not beat chance."""
    out = []
    for model_id, _, version in _judges(rows):
        found = _measured(client, model_id, version)
        if found is not None and not beats_floor(found):
            out.append(below_floor_sentence(found, model_id))
    return out


def judge_validation(client: Any, rows: list[Row], checked_by_people: str = "") -> str:
    """For a judged sweep (not a meta-evaluation itself): the judge's measured agreement
    with people, or a caveat that it has none and the command that measures it; a judge
    measured and not better than chance is left to the caveats (``judge_caveats``).
    ``checked_by_people``: the sentence quoting the agreement with the sweep's own human
    labels (``report.human_agreement.quote``); it comes first and replaces the caveat."""
    out = []
    for model_id, name, version in _judges(rows):
        found = _measured(client, model_id, version)
        if found is not None and not beats_floor(found):
            continue  # said among the caveats
        if found is None and checked_by_people:
            continue  # validated by the sweep's own labels: no caveat
        out.append(agreement_sentence(found, model_id) if found is not None else (
            f"**Judge unvalidated:** no measurement of `{model_id}` with these judge prompts "
            "against human labels is in this store, so how far its faithfulness scores agree "
            "with people is unknown. Measure it: `python run.py dataset=summedits "
            f"judge={name} dataset.split=test dataset.root=<a clone of "
            "github.com/salesforce/factualNLG>` (docs/validate-your-judge.md).\n"))
    return "\n".join([checked_by_people, *out] if checked_by_people else out)
