"""The report's "Repeats" section: what answering every task K times (``runner.repeats``)
shows. The variance of the comparison metric split into tasks, generation and the judge
(``metrics.repeats``), per run and per compared pair; whether more tasks, more repeats or
more judge samples would narrow a pair's CI most, in a sentence with the numbers; the
stability of each pair's verdict across repeats; pass^k for pass/fail fields; and, where
repeats cannot vary (temperature 0, the offline model), a caveat that says so.
"""

from __future__ import annotations

import itertools

from metrics import declared_metrics
from metrics.repeats import (
    STABLE_SHARE,
    Components,
    difference_components,
    pass_all,
    projected_narrowing,
    stability_share,
    variance_components,
)
from report import policy
from report.console import metric_label
from report.verdict import Record, Row, TaskSets, fmt, is_answered, table


def repeats(row: Row) -> int:
    """``runner.repeats`` of a run (1 for runs made before repeats existed)."""
    return int(row.get("repeats") or 1)


def repeated(rows: list[Row]) -> list[Row]:
    return [r for r in rows if repeats(r) > 1]


def cannot_vary(row: Row) -> bool:
    """Whether a run's repeats are identical by construction: the deterministic offline
    model, or requests sent at temperature 0."""
    return row.get("model_provider") == "offline" or row.get("temperature_sent") in ("0", "0.0")


def caveat(rows: list[Row]) -> list[str]:
    """The banner's note on repeats that cannot vary (empty without repeats)."""
    fixed = [r["run"] for r in repeated(rows) if cannot_vary(r)]
    if not fixed:
        return []
    return [f"Repeats of {', '.join(fixed)} cannot vary: the offline model is deterministic and "
            "a request at temperature 0 usually gets the same reply (some APIs still vary). "
            "They were run and their measured within-task spread is in the Repeats section "
            "(0 when every repeat matched); it says nothing about generation noise of a "
            "sampled model."]


def _answered(sets: TaskSets, run: Row, ids: list[str]) -> list[Record]:
    wanted = set(ids)
    return [x for x in sets.answers.get(run["run_id"], []) if x["id"] in wanted
            and is_answered(x)]


def _parts_row(name: str, parts: Components) -> list[object]:
    return [name, parts.n_tasks, parts.repeats, parts.between_tasks,
            parts.within_task, parts.judge, _narrows_most(parts)]


def _narrows_most(parts: Components) -> str:
    """Which of tasks, repeats or judge samples holds the largest share of the CI."""
    if parts.between_tasks is None or parts.within_task is None:
        return "–"
    k = max(1, parts.repeats)
    judge = parts.judge or 0.0
    shares = {"more tasks": parts.between_tasks,
              "more repeats": max(0.0, parts.within_task - judge) / k,
              "more judge samples": judge / k}
    if not any(shares.values()):
        return "none (no spread)"
    return max(shares, key=lambda s: shares[s])


def section(sets: TaskSets, rows: list[Row], key: str) -> str:
    """The "Repeats" section; empty when every run answered each task once."""
    many = repeated(sets.runs)
    if not many:
        return ""
    ks = sorted({repeats(r) for r in many})
    out = [f"Each task was answered **K={'/'.join(map(str, ks))} times** per system "
           "(`runner.repeats`). Every mean, CI and test above is over tasks: a task's repeats "
           "are averaged first and the bootstrap resamples tasks with their repeats, so "
           "repeats narrow a CI only as far as they average out generation noise.\n",
           f"Variance of one answer's `{key}`, split (between tasks: how tasks differ; "
           "within a task: how repeats of the same task differ, the judge's noise included; "
           "judge: the judge's own, from `judge.samples`; – where not measurable):\n"]
    body = [_parts_row(r["run"], variance_components(_answered(sets, r, sets.common_for(key)),
                                                     key)) for r in sets.runs]
    pairs = list(itertools.combinations(sets.runs, 2))
    sentences = []
    for a, b in pairs:
        ids = sets.scored_ids([a, b], key)
        first, second = _answered(sets, a, ids), _answered(sets, b, ids)
        parts = difference_components(first, second, key)
        body.append(_parts_row(f"{a['run']} − {b['run']}", parts))
        sentences.append(_pair_sentence(a, b, key, parts, first, second))
    out.append(table(["run / pair", "tasks", "K", "between tasks", "within task",
                      "judge", "narrows the CI most"], body))
    out += [f"- {s}" for s in sentences if s]
    out.append(_pass_all(sets))
    return "\n".join(p for p in out if p) + "\n"


def _pair_sentence(a: Row, b: Row, key: str, parts: Components, first: list[Record],
                   second: list[Record]) -> str:
    what = f"{a['run']}-{b['run']}"
    projection = projected_narrowing(parts)
    text = (projection.sentence(what) if projection is not None else
            f"{what}: fewer than two tasks with repeats from both, or no spread at all, so "
            "no projection.")
    if parts.judge:
        text += (f" The judge's own variance is {fmt(parts.judge, 4)} of the within-task "
                 f"{fmt(parts.within_task, 4)}: more `judge.samples` narrow only that part.")
    stable = stability_share(first, second, key, policy.higher_is_better(key))
    if stable is not None:
        text += (f" Stability: on {stable[0]:.0%} of {stable[1]} tasks the winner is the same "
                 f"in at least {STABLE_SHARE:.0%} of the repeats.")
    return text


def _pass_all(sets: TaskSets) -> str:
    """pass^k of every pass/fail field a run has, per run."""
    fields = [m.name for m in declared_metrics() if m.passes]
    rows = [[r["run"], f, value] for r in sets.runs for f in fields
            if (value := pass_all([x for x in sets.answers.get(r["run_id"], [])
                                   if is_answered(x)], f)) is not None]
    if not rows:
        return ""
    return ("\npass^k: the share of tasks whose every repeat is correct.\n\n"
            + table(["run", "field", "pass^k"], rows))


def stability_metrics(sets: TaskSets, key: str) -> dict[str, dict[str, float]]:
    """Run id -> its stability share on ``key`` against each other run with repeats
    (``stability/<other>``), and for the parent run (key ``"parent"``) every pair's
    (``stability/<a> vs <b>``)."""
    out: dict[str, dict[str, float]] = {}
    for a, b in itertools.combinations(repeated(sets.runs), 2):
        ids = sets.scored_ids([a, b], key)
        share = stability_share(_answered(sets, a, ids), _answered(sets, b, ids), key,
                                policy.higher_is_better(key))
        if share is None:
            continue
        la, lb = metric_label(a["run"]), metric_label(b["run"])
        out.setdefault("parent", {})[f"stability/{la} vs {lb}"] = share[0]
        out.setdefault(a["run_id"], {})[f"stability/{lb}"] = share[0]
        out.setdefault(b["run_id"], {})[f"stability/{la}"] = share[0]
    return out
