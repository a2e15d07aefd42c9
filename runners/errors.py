"""Errors are not results: a run's failures counted by kind, and whether they exceed what
``runner.max_error_rate`` allows (then the run ends FAILED, tagged ``too_many_errors``, the
command exits non-zero, and the same command retries the errored tasks).

Task errors are predictions whose model calls failed (``Prediction.error_kind``). Judge
errors are failed judge calls (by ``ModelError.kind``) and replies the scorers could not
read (``unparseable``: recorded for the run that got them, never cached).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from typing import Any

from arag.llm.window import CONTEXT_WINDOW
from arag.records import Prediction
from arag.systems.predictions_file import PIPELINE_ERROR
from metrics.base import PARSE_FAILURES

UNPARSEABLE = "unparseable"
# what to do about each kind of failure, before running the same command again
_FIXES = {
    "auth": "check the provider's API key in the environment",
    "credentials": "export the provider's API key",
    "permission": "check the API key's permissions",
    "connection": "check model.base_url (and judge.base_url) and the network",
    "timeout": "wait for the API to recover, or raise model.timeout_s",
    "rate_limit": ("raise model.max_retries (requests are paced by the rate-limit headers), or "
                   "set model.input_tokens_per_minute to the account's limit"),
    "overloaded": "wait for the API to recover",
    "server": "wait for the API to recover",
    "unparseable": ("check the judge's replies in predictions.eval.jsonl (a judge model that "
                    "does not follow the format: pick another with judge=...); "
                    "runner.max_parse_failure_rate sets how many unreadable replies a score "
                    "may have"),
    PIPELINE_ERROR: ("the predictions file (system.predictions) records these tasks as failed by "
                 "your pipeline: give them answers there (the same command reads the file "
                 "again)"),
    "tools_unsupported": "enable tool calling on the model's server (docs/models.md) or drop "
                         "system=arag from the sweep",
    "unsupported_parameter": "set the model option the error names (e.g. "
                             "model.options.send_temperature=false for a reasoning model; "
                             "docs/models.md)",
    "crash": "the system raised on these tasks: see the traceback in the job's log",
}


def show_trace() -> bool:
    """Whether a user's mistake is logged with its traceback as well as its one line:
    ``HYDRA_FULL_ERROR=1``, Hydra's own switch for full traces."""
    return os.environ.get("HYDRA_FULL_ERROR") == "1"


class TooManyErrors(RuntimeError):
    """A run's errors exceed ``runner.max_error_rate``; the message lists them and the fix."""


class EndpointDown(TooManyErrors):
    """Every call of a run (its model's, or its judge's) failed on connection errors or
    timeouts: the endpoint is not there, and the sweep's next job would wait out the same
    retries, so the sweep stops."""


# the failures that say an endpoint is not there (not busy, not refusing a request)
UNREACHABLE = frozenset({"connection", "timeout"})


def endpoint_down(metrics: Mapping[str, float]) -> bool:
    """Whether every task errored, or every judge call failed, on ``UNREACHABLE`` kinds."""
    n_tasks, n_errors = int(metrics.get("n_tasks", 0)), int(metrics.get("n_errors", 0))
    task_kinds = set(kinds_of(metrics, "n_errors_"))
    if n_tasks and n_errors == n_tasks and task_kinds and task_kinds <= UNREACHABLE:
        return True
    judge_kinds = set(kinds_of(metrics, "judge_errors_")) - {UNPARSEABLE, CONTEXT_WINDOW}
    return (failed_judge_calls(metrics) > 0 and not metrics.get("judge_calls")
            and bool(judge_kinds) and judge_kinds <= UNREACHABLE)


class CostCapReached(RuntimeError):
    """``runner.max_cost_usd`` stopped the run before every task ran; the message says what
    was answered and how to go on."""


def cost_cap_message(run_id: str, metrics: Mapping[str, float], cap: float) -> str:
    answered, total = int(metrics.get("n_answered", 0)), int(metrics.get("n_tasks", 0))
    not_run = int(metrics.get("n_not_run", 0))
    # with runner.repeats each task is answered K times: the counts are of answers
    unit, done = ("answers", "given") if metrics.get("n_repeats", 1) > 1 else ("tasks",
                                                                             "answered")
    return (f"run {run_id} stopped by the cost cap runner.max_cost_usd={cap:g}: {answered} of "
            f"{total + not_run} {unit} {done}, {not_run} not run (spent "
            f"${_spent(metrics):.4f}). To go on, raise runner.max_cost_usd "
            f"(or set it to null) and run the same command again: {done} {unit} are resumed, "
            "not paid again.")


def _spent(metrics: Mapping[str, float]) -> float:
    """What was paid for the run's predictions, as the spend journal has it (this attempt
    and the earlier ones: the figure the cap holds); what its records count where nothing
    was journaled."""
    if "cost_usd_spent_total" not in metrics:
        return float(metrics.get("cost_usd_total", 0.0))
    return float(metrics["cost_usd_spent_total"] + metrics.get("cost_usd_spent_earlier", 0.0))


def error_metrics(predictions: list[Prediction], judge_errors: Mapping[str, int] | None
                  ) -> dict[str, float]:
    """``n_errors_<kind>`` per task-error kind; ``judge_errors`` and ``judge_errors_<kind>``
    when the run has a judge."""
    out = {f"n_errors_{kind}": float(n) for kind, n in task_error_kinds(predictions).items()}
    if judge_errors is not None:
        out["judge_errors"] = float(sum(judge_errors.values()))
        out.update({f"judge_errors_{kind}": float(n) for kind, n in judge_errors.items() if n})
    return out


def judge_error_counts(judges: Mapping[str, Any]) -> Counter[str] | None:
    """Failures of every judge of the run (its panel included) by kind; None without one."""
    if not judges:
        return None
    return sum((Counter(j.errors) for j in judges.values()), Counter())


def zero_stale_counts(previous: Mapping[str, float], metrics: Mapping[str, float]
                      ) -> dict[str, float]:
    """Zeros for the error counts a continued run logged before and has no more, so its
    metrics never show errors that were retried away."""
    return {k: 0.0 for k, v in previous.items()
            if k.startswith(("n_errors_", "judge_errors")) and v and k not in metrics}


def task_error_kinds(predictions: list[Prediction]) -> Counter[str]:
    return Counter(p.error_kind or "error" for p in predictions if p.error)


def kinds_of(metrics: Mapping[str, float], prefix: str) -> dict[str, int]:
    """``{kind: count}`` from a run's ``<prefix><kind>`` metrics."""
    return {k[len(prefix):]: int(v) for k, v in metrics.items() if k.startswith(prefix) and v}


def failed_judge_calls(metrics: Mapping[str, float]) -> int:
    """Judge calls that failed. Unreadable replies are not outages, and requests left
    unsent because they do not fit the judge's window fail the same way every time: neither
    is counted (a run is not retried for them)."""
    return int(metrics.get("judge_errors", 0) - metrics.get(f"judge_errors_{UNPARSEABLE}", 0)
               - metrics.get(f"judge_errors_{CONTEXT_WINDOW}", 0))


# judge replies that could not be read and that the next run asks again (judge.reask_unreadable)
TO_ASK_AGAIN = "judge_replies_to_ask_again"


def replies_to_ask_again(metrics: Mapping[str, float]) -> int:
    """How many of a run's judge replies could not be read and are asked again by the next
    run of the same command: a FINISHED run is never "nothing to do" while there are any."""
    return int(metrics.get(TO_ASK_AGAIN, 0))


def has_errors(metrics: Mapping[str, float]) -> bool:
    """Whether a run holds errored tasks or failed judge calls: it is never "nothing to do"
    while it does (the same command retries them)."""
    return bool(metrics.get("n_errors", 0)) or failed_judge_calls(metrics) > 0


def too_many_errors(metrics: Mapping[str, float], runner: Any) -> str | None:
    """Why the run's errors exceed ``runner.max_error_rate``, with their kinds and the fix,
    or None when they do not."""
    limit = float(runner.max_error_rate)
    problems, kinds = [], Counter[str]()
    n_tasks, n_errors = int(metrics.get("n_tasks", 0)), int(metrics.get("n_errors", 0))
    if n_tasks and n_errors / n_tasks > limit:
        task_kinds = kinds_of(metrics, "n_errors_")
        kinds.update(task_kinds)
        problems.append(f"{n_errors} of {n_tasks} tasks errored ({_counts(task_kinds)})")
    failed = failed_judge_calls(metrics)
    asked = failed + int(metrics.get("judge_calls", 0))
    if failed and failed / asked > limit:
        judge_kinds = {k: v for k, v in kinds_of(metrics, "judge_errors_").items()
                       if k != UNPARSEABLE}
        kinds.update(judge_kinds)
        problems.append(f"{failed} of {asked} judge calls failed ({_counts(judge_kinds)})")
    unreadable = unreadable_fields(metrics, float(getattr(runner, "max_parse_failure_rate", 0.5)))
    if unreadable:
        kinds["unparseable"] += 1
        problems.append("; ".join(unreadable))
    if not problems:
        return None
    fixes = list(dict.fromkeys(_FIXES.get(k, "see the errors in predictions.jsonl")
                               for k in kinds))
    retry = ("errored tasks are retried, finished ones kept" if runner.retry_errors else
             "add runner.retry_errors=true (it is false) so errored tasks are retried")
    return (f"{'; '.join(problems)}: above runner.max_error_rate={limit:g}. Fix: "
            f"{'; '.join(fixes)}; then run the same command again ({retry}); "
            "runner.max_error_rate=0.1 accepts up to 10% errors")


def all_skipped(predictions: list[Prediction]) -> str | None:
    """Why a run with tasks has no task that ran (every one skipped), or None: such a run
    answered nothing and must not end FINISHED as if it had been scored."""
    if not predictions or not all(p.skipped for p in predictions):
        return None
    reasons = Counter(p.skip_reason or "no reason given" for p in predictions)
    reason, n = reasons.most_common(1)[0]
    return (f"every one of the {len(predictions)} tasks was skipped ({n} of them: {reason}); "
            "nothing was answered or scored. Fix: change the setting the reason names (e.g. "
            "model.context_limit, or a retrieving system such as system=naive)")


def unreadable_fields(metrics: Mapping[str, float], limit: float) -> list[str]:
    """Judge-scored fields whose replies were unreadable on more than ``limit`` of the
    answered tasks (``<field>_parse_failures``), each said with its count."""
    answered = int(metrics.get("n_answered", 0))
    out = []
    for key, value in sorted(metrics.items()):
        if not key.endswith(PARSE_FAILURES) or key.endswith("_sample" + PARSE_FAILURES):
            continue
        if answered and value / answered > limit:
            out.append(f"{key.removesuffix(PARSE_FAILURES)} unreadable on {int(value)} of "
                       f"{answered} answered tasks (above runner.max_parse_failure_rate="
                       f"{limit:g})")
    return out


def _counts(kinds: Mapping[str, int]) -> str:
    return ", ".join(f"{kind} x{n}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
