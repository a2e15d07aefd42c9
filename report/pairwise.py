"""What a sweep run holds of its pairwise judging (``PairwiseView``) and its verdicts per task in
compare.html; the report's claims on it: ``report/analyses/pairwise.py``."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metrics.pairwise import ARTIFACT, Summary, outcomes, summarize

SKIPPED_TAG = "pairwise_skipped"


@dataclass
class PairwiseView:  # what the parent run holds of its pairwise judging
    rows: list[dict[str, Any]]  # pairwise.jsonl
    skipped: str  # why nothing was judged ("" when it was)
    cost_usd: float  # what the pairwise judge calls were paid by this sweep's judging
    calls: int
    cached_calls: int
    cost_usd_earlier: float = 0.0  # paid by an earlier attempt of the same sweep run

    @property
    def summary(self) -> Summary | None:
        return summarize(self.rows) if self.rows else None


def read(client: Any, run: Any, folder: Path) -> PairwiseView | None:
    """The parent run's pairwise judging, or None when it had none (``judge.pairwise`` off)."""
    skipped = run.data.tags.get(SKIPPED_TAG, "")
    rows: list[dict[str, Any]] = []
    try:
        path = Path(client.download_artifacts(run.info.run_id, ARTIFACT, str(folder)))
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    except Exception:  # noqa: BLE001 - MLflow raises several types for a missing artifact
        if not skipped:
            return None
    metrics = run.data.metrics
    return PairwiseView(rows, skipped, float(metrics.get("pairwise_judge_cost_usd_spent_total")
                                             or metrics.get("pairwise_judge_cost_usd_total") or 0.0),
                        int(metrics.get("pairwise_judge_calls") or 0),
                        int(metrics.get("pairwise_judge_cached_calls") or 0),
                        float(metrics.get("pairwise_judge_cost_usd_spent_earlier") or 0.0))


def per_task(view: PairwiseView | None) -> dict[str, str]:
    """compare.html: per task, the primary judge's winner of each pair and dimension with
    both replies (folded)."""
    summary = view.summary if view is not None else None
    if view is None or summary is None:
        return {}
    out: dict[str, list[str]] = {}
    for o in outcomes(view.rows):
        if o.judge != summary.judges[0] or o.status == "not_judged":
            continue
        shown = {"unreadable": "unreadable reply", "inconsistent":
                 "tie (position-inconsistent)"}.get(o.status, o.winner or "")
        why = "".join(f"<div class='out'><b>{html.escape(r['first'])} shown first:</b> "
                      f"{html.escape(r.get('reply') or '')}</div>" for r in o.rows)
        repeat = f", repeat {o.repeat}" if o.repeat else ""
        out.setdefault(o.task_id, []).append(
            f"<details class='pairwise'><summary>judge, {html.escape(o.pair.name)} "
            f"({html.escape(o.dimension)}{repeat}): <b>{html.escape(shown)}</b></summary>{why}</details>")
    return {task: "".join(parts) for task, parts in out.items()}
