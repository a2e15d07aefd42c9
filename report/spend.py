"""What a sweep paid, each call counted once: the report's "Total spent" line.

A run logs what its own attempt paid (``cost_usd_spent_total``, ``judge_cost_usd_spent_total``,
from the spend journals as each call returned) apart from what earlier attempts paid for
the answers it carries over (``..._spent_earlier``). A sweep's total then says:

* **new**: paid this time, by this sweep (or run) over the runs it ran (a run it reused
  unchanged from an earlier sweep ran before it started: nothing of it is new), plus its
  pairwise judge;
* **earlier**: paid before, by earlier sweeps or killed attempts, for the answers this one
  carries over or reuses: counted there, never added to the new figure;
* **reused**: what the replies served by the response cache cost when they were first
  paid (``cost_usd_uncached_total`` less ``cost_usd_total``): not paid again;
* **unknown**: runs whose spend neither the metrics nor the journal say, named; a total
  with no known figure at all is "unknown", never $0.

A run that failed before logging its spend (a full disk) is read from its spend journal
(the run's ``spend_journal`` and ``spend_attempt`` tags), so money paid is never shown as 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arag.llm.cache import SpendJournal
from report import verdict
from tracking.runs import SPEND_ATTEMPT_TAG, SPEND_JOURNAL_TAG

Row = dict[str, Any]


def annotate(rows: list[Row], runs: list[Any], started: int | None) -> None:
    """Mark each row whose run ended before the sweep run ``started`` (ms) as reused, and
    fill a row that logged no spend from its journal."""
    by_id = {r.info.run_id: r for r in runs}
    for row in rows:
        run = by_id.get(row["run_id"])
        if run is None:
            continue
        ended = run.info.end_time
        row["reused_run"] = bool(started and ended and ended < started)
        if row.get("cost_usd_spent_total") is None:
            row.update(journal_spend(run.data.tags))


def journal_spend(tags: dict[str, str]) -> dict[str, float]:
    """A run's spend as its journal has it: this attempt's and the earlier ones'; empty
    when the run names no journal or it is gone."""
    path = tags.get(SPEND_JOURNAL_TAG)
    if not path or not Path(path).exists():
        return {}
    new, earlier = SpendJournal(Path(path), tags.get(SPEND_ATTEMPT_TAG) or "-").spent()
    return {"cost_usd_spent_total": new, "cost_usd_spent_earlier": earlier}


def _split(row: Row, new: float | None, earlier_key: str) -> tuple[float, float]:
    earlier = float(row.get(earlier_key) or 0.0)
    if row.get("reused_run"):
        return 0.0, earlier + (new or 0.0)
    return new or 0.0, earlier


def total_line(rows: list[Row], pairwise_new: float = 0.0, pairwise_earlier: float = 0.0
               ) -> str:
    """The report's "Total spent" line over every run of the sweep, failed ones included."""
    systems = [_split(r, verdict.spent(r), "cost_usd_spent_earlier") for r in rows]
    judges = [_split(r, verdict.judge_spent(r), "judge_cost_usd_spent_earlier") for r in rows]
    missing = [r["run"] for r in rows if verdict.spent(r) is None]
    judged = any(verdict.judge_spent(r) is not None for r in rows)
    if len(missing) == len(rows) and not (judged or pairwise_new or pairwise_earlier):
        return (f"\nTotal spent: unknown (no run's spend is known: records without cost, no "
                f"spend journal): {', '.join(missing)}.\n")
    sys_new, judge_new = sum(s[0] for s in systems), sum(j[0] for j in judges) + pairwise_new
    earlier = (sum(s[1] for s in systems) + sum(j[1] for j in judges) + pairwise_earlier)
    line = (f"\nTotal spent: ${sys_new + judge_new:.4f} new, paid this time (systems "
            f"${sys_new:.4f}, judge ${judge_new:.4f}"
            + (f", of which the pairwise judge ${pairwise_new:.4f}" if pairwise_new else "")
            + ")")
    if earlier:
        line += (f"; earlier: ${earlier:.4f}, paid by earlier sweeps or attempts for the "
                 "answers this one carries over or reuses (counted there, not again)")
    reused = sum(_cache_reused(r) for r in rows if not r.get("reused_run"))
    if reused:
        line += (f"; reused from the response cache: ${reused:.4f}, what those replies cost "
                 "when first paid (not paid again)")
    if missing:
        line += (f"; not counted, their spend unknown (records without cost): "
                 f"{', '.join(missing)}")
    return line + ".\n"


def _cache_reused(row: Row) -> float:
    uncached, paid = row.get("cost_usd_uncached_total"), row.get("cost_usd_total")
    if uncached is None or paid is None:
        return 0.0
    return max(0.0, float(uncached) - float(paid))
