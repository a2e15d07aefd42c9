"""What a run paid, from the store: its spend journals (every call counted once, each
attempt's and the judge's), who paid (this sweep, an earlier attempt of it, another sweep,
a run outside any), and whether the run was reused. A run that logged no spend (it failed
first: a full disk) is read from its journal, so money paid is never shown as 0
(docs/guarantees.md; the report's "Total spent" line: ``report.writers.tables``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arag.llm.cache import SpendJournal
from tracking.runs import SPEND_ATTEMPT_TAG, SPEND_JOURNAL_TAG

Row = dict[str, Any]
# who paid a run's earlier spend (``spent_from``)
PAYERS = ("attempt", "sweep", "run")


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
