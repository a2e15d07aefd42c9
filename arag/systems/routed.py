"""A routed system (``system=routed``): the policy the sweep report recommends, run live.

* ``system.rule={feature: document_tokens, threshold: 6000, below: stuffing, above: arag}``
  sends a task to ``below`` when its feature (known before any system answers) is under the
  threshold, to ``above`` otherwise;
* ``system.cascade=[naive,arag]`` asks the first on every task and the next where it
  declined (``decline_reason``: a skip, an empty answer or a refusal, what the system itself
  sees; the report's what-if cascade reads the same signal off the records).

Each member is built from its own ``conf/system`` option (tools, top_k, max_tokens,
temperature, citations) with the run's model, retrieval and budgets, so a task it answers is
the very request that member makes alone: after a full sweep the response cache answers it.
Each record says which member answered (``routed_to``) and why (``route_reason``); its cost
and latency are the members' measured ones (a cascade's both calls), calls answered from the
cache flagged on the trace. Its declarations follow its members: it retrieves (the index
loads) if any member does, and a task a non-retrieving member answered has no retrieval
score (``retrieves_task``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import OmegaConf

from arag.calls import CallLog
from arag.config import ConfigError, SystemConfig, compose_option
from arag.datasets.features import document_tokens
from arag.records import Prediction, Task
from arag.systems.base import SYSTEMS, RunSetup, Sources, System, register_system
from arag.trace import ModelCall

ROUTE_FEATURES = ("document_tokens", "n_documents")  # known before any system answers
REFUSAL = "refusal"


def decline_reason(skipped: bool, answer: str | None, stop_reason: str | None = None,
                   error_kind: str | None = None, skip_reason: str | None = None
                   ) -> str | None:
    """Why a system declined a task, from what it sees of its own answer: a skip, an empty
    answer or a model refusal; None when it answered (an error is not a decline)."""
    if stop_reason == REFUSAL or error_kind == REFUSAL:
        return "the model refused (stop_reason refusal)"
    if skipped:
        return f"skipped: {skip_reason}" if skip_reason else "skipped"
    if error_kind is None and not (answer or "").strip():
        return "an empty answer"
    return None


def declined(pred: Prediction) -> str | None:
    """``decline_reason`` of a prediction (an errored one declines only by refusing)."""
    if pred.error and pred.error_kind != REFUSAL:
        return None
    return decline_reason(pred.skipped, pred.predicted, pred.stop_reason, pred.error_kind,
                          pred.skip_reason)


def feature_value(feature: str, task: Task, setup_corpus: Any) -> float:
    """A routing feature of a task, as the records' document features compute it."""
    if feature == "n_documents":
        return float(len(task.doc_ids))
    docs = [setup_corpus.documents[d] for d in task.doc_ids if d in setup_corpus.documents]
    return float(document_tokens(docs))


def system_options(base: Path) -> list[str]:
    return sorted(p.stem for p in (base / "conf" / "system").glob("*.yaml"))


def member_config(name: str, base: Path) -> SystemConfig:
    """``conf/system/<name>.yaml`` (over the options its defaults list names), typed."""
    known = system_options(base)
    if name not in known or name == "routed":
        raise ConfigError(f"system=routed names {name!r}, which is not a system option "
                          f"it can route to; the options are {[k for k in known if k != 'routed']}"
                          ". Fix: e.g. system.cascade=[naive,arag]")
    typed = OmegaConf.merge(OmegaConf.structured(SystemConfig), compose_option(base / "conf", "system", name))
    out = OmegaConf.to_object(typed)
    assert isinstance(out, SystemConfig)
    return out


def route_of(options: SystemConfig) -> tuple[list[str], dict[str, Any] | None]:
    """The members a routed system's settings name, and its rule (None: a cascade); a
    setting it cannot run raises with the fix."""
    rule, cascade = options.rule, list(options.cascade)
    if rule.given and cascade:
        raise ConfigError("system=routed takes system.rule or system.cascade, not both. Fix: "
                          "leave one out")
    if cascade:
        if len(cascade) < 2:
            raise ConfigError(f"system.cascade={cascade} is a cascade of one system: it has "
                              "nothing to escalate to. Fix: system.cascade=[naive,arag]")
        return cascade, None
    if not rule.given:
        raise ConfigError("system=routed needs system.rule or system.cascade. Fix: "
                          "'system.rule={feature: document_tokens, threshold: 6000, below: "
                          "stuffing, above: arag}' or system.cascade=[naive,arag]")
    missing = [k for k in ("feature", "threshold", "below", "above")
               if getattr(rule, k) is None]
    if missing:
        raise ConfigError(f"system.rule lacks {missing}. Fix: 'system.rule={{feature: "
                          "document_tokens, threshold: 6000, below: stuffing, above: arag}'")
    if rule.feature not in ROUTE_FEATURES:
        raise ConfigError(f"system.rule.feature={rule.feature!r} is not a feature known "
                          f"before any system answers; use one of {list(ROUTE_FEATURES)}. "
                          "Fix: system.rule.feature=document_tokens")
    if not math.isfinite(float(rule.threshold or 0.0)):
        raise ConfigError(f"system.rule.threshold={rule.threshold!r} is not a finite number. "
                          "Fix: system.rule.threshold=6000")
    return [str(rule.below), str(rule.above)], {
        "feature": rule.feature, "threshold": float(rule.threshold or 0.0),
        "below": rule.below, "above": rule.above}


@register_system("routed")
class Routed(System):
    """Each task answered by one member (a rule), or by the first member that does not
    decline it (a cascade)."""

    own_settings = ("rule", "cascade")
    members: ClassVar[dict[str, tuple[type[System], SystemConfig]]] = {}
    order: ClassVar[list[str]] = []
    rule: ClassVar[dict[str, Any] | None] = None

    @classmethod
    def configure(cls, setup: RunSetup) -> type[System]:
        names, rule = route_of(setup.options)
        members = {}
        for name in dict.fromkeys(names):
            options = member_config(name, setup.base)
            member = SYSTEMS.get(options.kind).configure(replace(setup, options=options))
            members[name] = (member, options)
        kinds = [m for m, _ in members.values()]
        flags = {flag: any(getattr(k, flag) for k in kinds)
                 for flag in ("retrieves", "ranks", "agentic", "cites", "long_context",
                              "calls_models")}
        flags["searches"] = any(k.retrieves and k.searches for k in kinds)
        route = (f"{rule['below']} below {rule['threshold']:g} {rule['feature']}, "
                 f"{rule['above']} above" if rule else "cascade " + " -> ".join(names))
        return type(cls.__name__, (cls,), {
            **flags, "members": members, "order": names, "rule": rule,
            "notes": (f"routed: {route}; each record says which member answered "
                      "(routed_to) and why (route_reason)",),
            "__module__": cls.__module__, "__qualname__": cls.__qualname__})

    @classmethod
    def member_of(cls, pred: Prediction) -> type[System] | None:
        found = cls.members.get(pred.routed_to or "")
        return found[0] if found else None

    @classmethod
    def retrieves_task(cls, pred: Prediction) -> bool:
        member = cls.member_of(pred)
        return member.retrieves_task(pred) if member else cls.retrieves

    @classmethod
    def ranking(cls, pred: Prediction) -> list[str] | None:
        member = cls.member_of(pred)
        return member.ranking(pred) if member and member.ranks else None

    @classmethod
    def judged_sources(cls, pred: Prediction, task: Task, sources: Sources
                       ) -> list[tuple[str, str]] | None:
        member = cls.member_of(pred)
        return member.judged_sources(pred, task, sources) if member else \
            super().judged_sources(pred, task, sources)

    @classmethod
    def context_chunks(cls, pred: Prediction, task: Task, sources: Sources) -> int | None:
        member = cls.member_of(pred)
        return member.context_chunks(pred, task, sources) if member else \
            super().context_chunks(pred, task, sources)

    def __init__(self, name: str, ctx: Any):
        super().__init__(name, ctx)
        self.built: dict[str, System] = {}
        for member, (kind, options) in self.members.items():
            own = replace(ctx, tools=list(options.tools), top_k=options.top_k or ctx.top_k,
                          max_tokens=options.max_tokens, temperature=options.temperature,
                          citations=options.citations)
            self.built[member] = kind(options.name, own)

    def predict(self, task: Task, source: str) -> Prediction:
        if self.rule is not None:
            value = feature_value(self.rule["feature"], task, self.ctx.corpus)
            below = value < self.rule["threshold"]
            member = self.rule["below"] if below else self.rule["above"]
            pred = self.built[member].predict(task, source)
            why = (f"{self.rule['feature']} {value:g} {'<' if below else '>='} "
                   f"{self.rule['threshold']:g}")
            return self._as_routed(pred, member, why)
        asked: list[Prediction] = []
        for member in self.order:
            pred = self.built[member].predict(task, source)
            asked.append(pred)
            reason = declined(pred)
            if reason is None or member == self.order[-1]:
                why = "; ".join(f"{m} declined ({declined(p)})"
                                for m, p in zip(self.order, asked[:-1], strict=False))
                return self._as_routed(_joined(asked), member,
                                       why or f"{member} answered first")
        raise AssertionError("a cascade has members")  # pragma: no cover

    def _as_routed(self, pred: Prediction, member: str, why: str) -> Prediction:
        calls = [s for s in pred.trace if isinstance(s, ModelCall)]
        if calls and all(s.cached for s in calls):
            why += "; every model call answered from the response cache"
        return replace(pred, system=self.name, routed_to=member, route_reason=why)

    def answer(self, task: Task, calls: CallLog, pred: Prediction) -> None:
        raise NotImplementedError("a routed system's members answer")


def _joined(asked: list[Prediction]) -> Prediction:
    """The last member's prediction carrying what every member asked cost and took: a
    cascade's cost and latency are the sum of its calls."""
    last = asked[-1]
    if len(asked) == 1:
        return last

    def total(key: str) -> Any:
        values = [getattr(p, key) for p in asked]
        return None if any(v is None for v in values) else sum(values)

    return replace(last, cost_usd=total("cost_usd"), cost_usd_uncached=total("cost_usd_uncached"),
                   latency_ms=total("latency_ms"), input_tokens=total("input_tokens"),
                   output_tokens=total("output_tokens"),
                   cache_read_input_tokens=total("cache_read_input_tokens"),
                   cache_creation_input_tokens=total("cache_creation_input_tokens"),
                   loops=total("loops"), started_at=asked[0].started_at,
                   trace=[step for p in asked for step in p.trace])
