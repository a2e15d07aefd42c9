"""How far each faithfulness signal agrees with people, on a dataset whose tasks carry a
human verdict (``Task.meta["human_label"]``: 1 consistent, 0 inconsistent; SummEdits).

Signals are the faithfulness fields the run's other scorers wrote: ``factcheck``,
``numeric_precision``, ``geval_faithfulness``, ``factual_consistency`` and each panel
judge's faithfulness (``panel_<name>_geval_faithfulness``). Each decides "consistent" when
its value is at least its threshold (``metrics.meta_eval.thresholds``; the defaults were
chosen on SummEdits' evaluation splits, never on a test split: docs/validate-your-judge.md).
A task whose signal has no value is decided consistent: the signal raised no objection, as
a pipeline gating on it would pass it (numeric precision of a summary without numbers, an
unreadable or failed judge reply); such tasks are counted (``<signal>_no_value``) and
unreadable replies apart (``<signal>_unreadable``), never given a score.

Per signal the run logs ``<signal>_balanced_accuracy`` with a bootstrap 95% CI over tasks,
``<signal>_auc_roc`` on the same items (where the signal is graded and both labels occur;
an item with no value ranks as the most consistent, as the decision passes it) and, where
some items have no value, ``<signal>_auc_roc_valued`` on those with one (``_n`` beside),
``<signal>_recall_<edit type>`` (the share of the inconsistent tasks with that edit the
signal flags), ``<signal>_n`` and ``<signal>_threshold``; on an evaluation split also the
threshold that would have done best there (``<signal>_threshold_best``). Each task and
signal is a line of ``meta_items.jsonl`` (``id, signal, value, decision, label``), so every
figure can be recomputed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metrics.aggregate import BOOTSTRAP_SAMPLES
from metrics.base import Metric, Scorer, ScorerEnv, Scores, ScoringItem, register_scorer

LABEL, EDITS, SPLIT = "human_label", "edit_types", "human_label_split"
NO_LABEL = "the task carries no human verdict (a dataset such as dataset=summedits does)"
# what each signal's value is read from; panel judges are added per run
SIGNALS = ("factcheck", "numeric_precision", "geval_faithfulness", "factual_consistency")
UNREADABLE = {"geval_faithfulness": "geval_faithfulness_parse_failed",
              "factual_consistency": "factual_consistency_parse_failed"}
ITEMS_FILE = "meta_items.jsonl"


def _default_thresholds() -> dict[str, float]:
    # a signal passes when nothing is unsupported (1.0), or the judge gives 4 or 5 of 5
    return {"factcheck": 1.0, "numeric_precision": 1.0, "geval_faithfulness": 4.0,
            "factual_consistency": 1.0}


@dataclass
class MetaEvalOptions:
    # signal -> the value at or above which it decides "consistent"; a panel judge's
    # faithfulness uses geval_faithfulness's unless given as panel_<name>_geval_faithfulness
    thresholds: dict[str, float] = field(default_factory=_default_thresholds)


@dataclass
class Judged:
    """One signal over the labelled tasks."""

    signal: str
    ids: list[str]
    values: list[float | None]
    labels: list[int]
    threshold: float

    @property
    def decisions(self) -> list[int]:
        return [1 if v is None or v >= self.threshold else 0 for v in self.values]


def balanced_accuracy_ci(labels: list[int], decisions: list[int], seed: int = 0
                         ) -> tuple[float, float] | None:
    """95% percentile bootstrap over tasks; resamples with one label only are skipped."""
    from sklearn.metrics import balanced_accuracy_score  # here: seconds every sweep need not pay

    y, d = np.asarray(labels), np.asarray(decisions)
    rng = np.random.default_rng(seed)
    scores = []
    for _ in range(BOOTSTRAP_SAMPLES):
        pick = rng.integers(0, len(y), len(y))
        if len(set(y[pick])) == 2:
            scores.append(balanced_accuracy_score(y[pick], d[pick]))
    if len(scores) < 2:
        return None
    return float(np.percentile(scores, 2.5)), float(np.percentile(scores, 97.5))


def best_threshold(judged: Judged) -> float | None:
    """The value that, as a threshold, gives the best balanced accuracy on these tasks
    (ties: the lowest)."""
    from sklearn.metrics import balanced_accuracy_score

    candidates = sorted({v for v in judged.values if v is not None})
    best: tuple[float, float] | None = None
    for t in candidates:
        ba = balanced_accuracy_score(judged.labels, [1 if v is None or v >= t else 0
                                                     for v in judged.values])
        if best is None or ba > best[1] + 1e-12:
            best = (t, ba)
    return None if best is None else best[0]


def signal_metrics(judged: Judged, edits: list[list[str]], split: str | None,
                   unreadable: int) -> dict[str, float]:
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    s, labels, decisions = judged.signal, judged.labels, judged.decisions
    out = {f"{s}_n": float(len(labels)), f"{s}_threshold": judged.threshold,
           f"{s}_no_value": float(sum(v is None for v in judged.values)),
           f"{s}_unreadable": float(unreadable)}
    if len(set(labels)) == 2:
        out[f"{s}_balanced_accuracy"] = float(balanced_accuracy_score(labels, decisions))
        ci = balanced_accuracy_ci(labels, decisions)
        if ci is not None:
            out[f"{s}_balanced_accuracy_ci_low"], out[f"{s}_balanced_accuracy_ci_high"] = ci
    out.update(_auc(judged, roc_auc_score))
    for edit in sorted({e for es in edits for e in es}):
        flagged = [d == 0 for d, y, es in zip(decisions, labels, edits, strict=True)
                   if y == 0 and edit in es]
        if flagged:
            out[f"{s}_recall_{edit}"] = sum(flagged) / len(flagged)
    if split == "evaluation":
        best = best_threshold(judged)
        if best is not None:
            out[f"{s}_threshold_best"] = best
    return out


def _auc(judged: Judged, roc_auc_score: Any) -> dict[str, float]:
    """``<signal>_auc_roc`` on the items balanced accuracy counts, every item: one with no
    value ranks above every value, as the decision passes it; ``_auc_roc_valued`` (with its
    ``_n``) on the items with a value, where some have none. Only for a graded signal (more
    than two values) on items of both labels."""
    s, labels = judged.signal, judged.labels
    valued = [(v, y) for v, y in zip(judged.values, labels, strict=True) if v is not None]
    if len({v for v, _ in valued}) <= 2 or len(set(labels)) < 2:
        return {}
    top = max(v for v, _ in valued) + 1.0
    out = {f"{s}_auc_roc": float(roc_auc_score(labels, [top if v is None else v
                                                        for v in judged.values]))}
    if len(valued) < len(labels) and len({y for _, y in valued}) == 2:
        out[f"{s}_auc_roc_valued"] = float(roc_auc_score([y for _, y in valued],
                                                         [v for v, _ in valued]))
        out[f"{s}_auc_roc_valued_n"] = float(len(valued))
    return out


def _value(record: dict[str, Any], signal: str) -> float | None:
    if signal.startswith("panel_") and signal.endswith("_geval_faithfulness"):
        name = signal[len("panel_"):-len("_geval_faithfulness")]
        value = ((record.get("geval_panel") or {}).get(name) or {}).get("faithfulness")
    else:
        value = record.get(signal)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _unreadable(records: list[dict[str, Any]], signal: str) -> int:
    if signal.startswith("panel_"):
        name = signal[len("panel_"):-len("_geval_faithfulness")]
        return sum(1 for r in records if ((r.get("geval_panel") or {}).get(name) or {})
                   .get("faithfulness_parse_failed"))
    flag = UNREADABLE.get(signal)
    return sum(1 for r in records if flag and r.get(flag))


@register_scorer("meta_eval")
class MetaEvalScorer(Scorer):
    Options = MetaEvalOptions
    # the share of tasks people judged consistent (its mean); the signals' figures are
    # run-level (``aggregate``)
    metrics = [Metric(LABEL, "human label (1: consistent)", ci=False, histogram=False)]

    def __init__(self, options: MetaEvalOptions | None = None):
        self.options = options or MetaEvalOptions()
        self.items: list[dict[str, Any]] = []

    @classmethod
    def from_config(cls, options: Any, env: ScorerEnv) -> Scorer:
        scorer = cls(MetaEvalOptions(thresholds=dict(getattr(options, "thresholds", None)
                                                     or _default_thresholds())))
        scorer.panel = list(env.panel)
        return scorer

    panel: list[str] = []

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        out = []
        for item in items:
            label = item.task.meta.get(LABEL)
            s = Scores({LABEL: label, EDITS: list(item.task.meta.get(EDITS) or []),
                        SPLIT: item.task.meta.get("split")})
            if label is None:
                s.null_reasons[LABEL] = NO_LABEL
            out.append(s)
        return out

    def signals(self, records: list[dict[str, Any]]) -> list[str]:
        """The signals the run's scorers wrote: a value or an unreadable reply on some task
        (a judge signal without a judge, all null, measures nothing)."""
        names = [*SIGNALS, *(f"panel_{n}_geval_faithfulness" for n in self.panel)]
        return [s for s in names if any(_value(r, s) is not None for r in records)
                or _unreadable(records, s)]

    def threshold(self, signal: str) -> float:
        t = self.options.thresholds
        return float(t.get(signal, t.get("geval_faithfulness", 4.0)
                           if signal.startswith("panel_") else 1.0))

    def aggregate(self, answered: list[dict[str, Any]], records: list[dict[str, Any]]
                  ) -> dict[str, float]:
        labelled = [r for r in records if r.get(LABEL) in (0, 1)]
        self.items = []
        if not labelled:
            return {}
        labels = [int(r[LABEL]) for r in labelled]
        edits = [list(r.get(EDITS) or []) for r in labelled]
        split = labelled[0].get(SPLIT)
        out: dict[str, float] = {"human_label_n": float(len(labelled)),
                                 "human_label_consistent": float(sum(labels))}
        for signal in self.signals(records):
            judged = Judged(signal, [str(r["id"]) for r in labelled],
                            [_value(r, signal) for r in labelled], labels,
                            self.threshold(signal))
            out.update(signal_metrics(judged, edits, split, _unreadable(labelled, signal)))
            self.items += [{"id": i, "signal": signal, "value": v, "decision": d, "label": y}
                           for i, v, d, y in zip(judged.ids, judged.values, judged.decisions,
                                                 labels, strict=True)]
        return out

    def artifacts(self) -> dict[str, Any]:
        if not self.items:
            return {}
        return {ITEMS_FILE: "".join(json.dumps(i) + "\n" for i in self.items)}
