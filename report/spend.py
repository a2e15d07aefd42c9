"""What a sweep paid, each call counted once: the report's "Total spent" line (its *new*,
*earlier*, *reused* and unknown parts: docs/guarantees.md). A run that logged no spend (it
failed first: a full disk) is read from its spend journal, so money paid is never shown as 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arag.llm.cache import SpendJournal
from report import verdict
from report.writers.cells import money
from tracking.runs import SPEND_ATTEMPT_TAG, SPEND_JOURNAL_TAG

Row = dict[str, Any]


def annotate(rows: list[Row], runs: list[Any], started: int | None, client: Any = None,
             sweep: Any = None) -> None:
    """Mark each row whose run ended before the sweep run ``started`` (ms) as reused, fill a
    row that logged no spend from its journal, and give each its whole spend
    (``run_spend_usd``: system and judge, every attempt). In a sweep's report (``sweep``:
    its run) whose journals name who paid, a row's ``..._spent_total`` is what this sweep
    paid, all its rounds, and ``spent_from`` says who paid the rest."""
    by_id = {r.info.run_id: r for r in runs}
    for row in rows:
        run = by_id.get(row["run_id"])
        if run is None:
            continue
        ended = run.info.end_time
        row["reused_run"] = bool(started and ended and ended < started)
        if row.get("cost_usd_spent_total") is None:
            row.update(journal_spend(run.data.tags))
        entries = journal_entries(run)
        if entries or (entries is not None and row.get("cost_usd_total") is not None):
            row["run_spend_usd"] = sum(e["cost_usd"] for e in entries)  # no line: nothing paid
        if sweep is not None and entries and all("sweep_run" in e for e in entries):
            row.update(_by_payer(entries, sweep, client))


def journal_entries(run: Any) -> list[dict[str, Any]] | None:
    """Every line of a run's spend journals, the system's and its judge's (``kind``); None
    when the run names no journal."""
    path = run.data.tags.get(SPEND_JOURNAL_TAG)
    if not path:
        return None
    system = Path(path)
    judge = system.with_name(f"judge_spend.{run.info.run_id}.jsonl")
    return [{**e, "kind": kind} for kind, file in (("system", system), ("judge", judge))
            for e in SpendJournal(file).entries()]


def spend_until(entries: list[dict[str, Any]], tasks: int) -> float:
    """What the rounds up to ``tasks`` tasks paid (lines of no round: all of them), over every
    attempt: a look's spend, the same however often the sweep was run again."""
    return sum(e["cost_usd"] for e in entries
               if e.get("round_tasks") is None or e["round_tasks"] <= tasks)


PAYERS = {"attempt": "an earlier attempt of this sweep (stopped before its report)",
          "sweep": "other sweeps", "run": "runs outside a sweep"}


def _by_payer(entries: list[dict[str, Any]], sweep: Any, client: Any) -> Row:
    """This sweep's spend on a run (every round) and who paid the rest: an earlier attempt
    of the same sweep (same overrides), another sweep, or a run outside any sweep."""
    mine = sweep.info.run_id
    overrides = sweep.data.tags.get("sweep_overrides")
    payer: dict[str | None, str] = {mine: "new", None: "run"}
    out: Row = {"cost_usd_spent_total": 0.0, "cost_usd_spent_earlier": 0.0,
                "judge_cost_usd_spent_total": 0.0, "judge_cost_usd_spent_earlier": 0.0,
                "spent_from": {k: 0.0 for k in PAYERS}, "spend_rounds": set()}
    for e in entries:
        who = e.get("sweep_run")
        if who not in payer:
            try:
                same = client.get_run(who).data.tags.get("sweep_overrides") == overrides
            except Exception:  # noqa: BLE001 - a sweep run deleted since: another sweep
                same = False
            payer[who] = "attempt" if same else "sweep"
        prefix = "judge_" if e["kind"] == "judge" else ""
        if payer[who] == "new":
            out[f"{prefix}cost_usd_spent_total"] += e["cost_usd"]
            out["spend_rounds"].add(e.get("round_tasks"))
        else:
            out[f"{prefix}cost_usd_spent_earlier"] += e["cost_usd"]
            out["spent_from"][payer[who]] += e["cost_usd"]
    out["spend_rounds"] = len(out["spend_rounds"] - {None})
    return out


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
    parts = {k: sum((r.get("spent_from") or {}).get(k, 0.0) for r in rows) for k in PAYERS}
    named = [f"{money(v, 4)} by {PAYERS[k]}" for k, v in parts.items() if v > 0]
    rest = earlier - sum(parts.values())
    if rest > 5e-5 or not named:
        named.append(f"{money(rest, 4)} by earlier sweeps or attempts")
    return ", ".join(named)


def _cache_reused(row: Row) -> float:
    uncached, paid = row.get("cost_usd_uncached_total"), row.get("cost_usd_total")
    if uncached is None or paid is None:
        return 0.0
    return max(0.0, float(uncached) - float(paid))
