"""Checks before any run opens: config values the schema's types cannot express, and the
credentials of every provider the run will call."""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from arag.config import RANGE, ConfigError, option_value
from arag.datasets.features import NUMERIC, known_features
from arag.llm.registry import PROVIDERS
from arag.retrieval import check_precision
from arag.retrieval.embedder import resolve_embedder_path
from arag.systems import SYSTEMS
from arag.systems.routed import ROUTE_FEATURES, member_config, route_of
from arag.tools.toolset import MAX_TOP_K, TOOL_SPECS
from metrics import SCORERS, declared_metrics
from report import policy
from report.baseline import COST_FIELDS
from report.baseline_report import ON_INCONCLUSIVE, parse_map, parse_rules
from report.cli import check_decide_on
from runners.judges import panel_configs
from tracking.paths import resolve


def validate_config(cfg: DictConfig) -> None:
    """Value checks the schema's types cannot express; each names the key and the fix."""
    missing = [k for k in missing_keys(cfg) if not k.startswith("hydra.")]
    if missing:  # ``???`` in a config file: a value only the user can give
        raise ConfigError(f"{', '.join(missing)} must be set. Fix: add {missing[0]}=<value> to "
                          "the command (e.g. dataset.root=<your folder> for dataset=folder)")
    tools = list(cfg.system.tools)
    agentic = SYSTEMS.has(cfg.system.kind) and SYSTEMS.get(cfg.system.kind).agentic
    top_k = cfg.system.top_k or cfg.retrieval.top_k
    checks = [
        ("retrieval.parent_chunk_size", cfg.retrieval.parent_chunk_size is None
         or cfg.retrieval.parent_chunk_size > cfg.retrieval.chunk_size,
         f"more words than retrieval.chunk_size ({cfg.retrieval.chunk_size}), or null for off",
         f"retrieval.parent_chunk_size={cfg.retrieval.chunk_size * 4}"),
        ("retrieval.reranker_path",
         option_value(cfg.retrieval.rerank) != "cross_encoder"
         or bool(cfg.retrieval.reranker_path) and Path(cfg.retrieval.reranker_path).is_dir(),
         "a folder holding a sentence-transformers CrossEncoder (rerank=cross_encoder)",
         "retrieval.reranker_path=/path/to/cross-encoder"),
        ("system.kind", SYSTEMS.has(cfg.system.kind), f"a registered system, one of "
         f"{SYSTEMS.names()}", "system=arag"),
        ("system.tools", all(t in TOOL_SPECS for t in tools),
         f"a list of known tools, from {sorted(TOOL_SPECS)}",
         "system.tools=[keyword_search,semantic_search,chunk_read]"),
        # an agent with no tool reads nothing: a closed-book run compared as an agent
        ("system.tools", not agentic or bool(tools),
         f"at least one tool for the agentic system {cfg.system.kind!r} (with none it reads "
         "no document: for a closed-book baseline use system=closed_book)",
         "system.tools=[keyword_search,semantic_search,chunk_read]"),
        ("system.top_k" if cfg.system.top_k else "retrieval.top_k",
         not tools or top_k <= MAX_TOP_K,
         f"at most {MAX_TOP_K} for a system with tools (the most a search tool returns)",
         f"{'system' if cfg.system.top_k else 'retrieval'}.top_k={MAX_TOP_K}"),
        ("metrics.scorers", all(SCORERS.has(n) for n in cfg.metrics.scorers),
         f"a list of registered scorers, from {SCORERS.names()}",
         f"metrics.scorers=[{','.join(SCORERS.names())}]"),
        # no scorer: every run of the sweep would be answered, paid for and score nothing
        ("metrics.scorers", bool(cfg.metrics.scorers),
         "at least one scorer (with none, a run is paid for and scores nothing)",
         "metrics.scorers=[rouge,length] (or leave it out for every scorer)"),
        # a scorer reusing another's replies (Scorer.reads) sees them only when listed after it
        ("metrics.scorers", not (late := _read_too_late(list(cfg.metrics.scorers))),
         f"each scorer after the scorers it reads ({late})",
         f"metrics.scorers=[{','.join(_reordered(list(cfg.metrics.scorers)))}]"),
        # neighbours sharing as many sentences as a chunk holds words never advance
        ("retrieval.chunk_overlap", cfg.retrieval.chunk_overlap < cfg.retrieval.chunk_size,
         f"fewer sentences than retrieval.chunk_size ({cfg.retrieval.chunk_size} words) holds",
         "retrieval.chunk_overlap=1"),
        ("tracking.experiment", cfg.tracking.experiment is None
         or bool(str(cfg.tracking.experiment).strip()),
         "an experiment name, or null for the dataset's name", "tracking.experiment=null"),
        ("report.decide_on", all(m in policy.decidable() for m in cfg.report.decide_on),
         *_decide_on_fix(cfg)),
        ("report.on_inconclusive", cfg.report.on_inconclusive in ON_INCONCLUSIVE,
         f"one of {', '.join(ON_INCONCLUSIVE)}", "report.on_inconclusive=fail"),
        ("mode", cfg.mode in ("run", "evaluate"), "'run' or 'evaluate'", "mode=run"),
        ("source_run_id", cfg.mode != "evaluate" or bool(cfg.source_run_id),
         "the id of the MLflow run to re-score when mode=evaluate",
         "mode=evaluate source_run_id=<run id from the MLflow UI>"),
    ]
    for key, ok, must, example in checks:
        if not ok:
            value = OmegaConf.select(cfg, key)
            raise ConfigError(f"{key}={value!r} is invalid: it must be {must}. Fix: {example}")
    check_routing(cfg)  # before the schema's generic finite check: its fixes name the rule's
    check_decide_on(list(cfg.report.decide_on))
    check_schema(cfg)
    check_providers(cfg)
    check_embedder(cfg.retrieval.embedder)
    check_bertscore_layers(cfg.metrics)
    panel_configs(cfg)  # every judge.panel entry is a judge option that can judge
    check_fail_on(cfg.report.fail_on)
    parse_map(cfg.report.baseline_map)  # each entry pairs two run names
    check_slices(cfg.report)
    check_sequential(cfg)


def scoreable(cfg: DictConfig) -> list[str]:
    """The per-task metrics this run's scorers declare (``metrics.scorers``), leaving out,
    without a judge, those of scorers that ask one (they declare their judge requests)."""
    from metrics import default_scorers
    from metrics.base import Scorer

    judged = str(cfg.judge.provider) != "none"
    chosen = set(cfg.metrics.scorers)
    return sorted({m.name for scorer in default_scorers() if scorer.name in chosen
                   and (judged or type(scorer).judge_requests is Scorer.judge_requests)
                   for m in scorer.metrics})


def _decide_on_fix(cfg: DictConfig) -> tuple[str, str]:
    """What ``report.decide_on`` must be and the fix, in metrics this run can score: the
    closest to each unknown name (one that only a judge scores is said so)."""
    can = scoreable(cfg) or policy.decidable()
    known = set(policy.decidable())
    fixed, judged = [], []
    for name in cfg.report.decide_on:
        close = difflib.get_close_matches(name, can, n=1)
        other = difflib.get_close_matches(name, sorted(known - set(can)), n=1, cutoff=0.8)
        if name in known or close:
            fixed.append(name if name in known else close[0])
        elif other:
            judged.append(other[0])
    fixed = fixed or ["rouge2_f1" if "rouge2_f1" in can else can[0]]
    needs = (f" ({', '.join(judged)}: scored only with a judge, e.g. judge=claude-haiku-4-5)"
             if judged else "")
    return (f"a list of per-task metrics this run can score{needs}: {', '.join(can)}",
            f"report.decide_on=[{','.join(dict.fromkeys(fixed))}]")


def check_fail_on(specs: Any) -> None:
    """Each ``report.fail_on`` entry is <metric>:<margin> with a finite margin, one per
    metric, on a metric the scorers declare (or a per-task cost field): found before any
    job runs, not when the sweep ends."""
    known = [*policy.decidable(), *COST_FIELDS]
    for rule in parse_rules(specs):
        if rule.metric not in known:
            raise ConfigError(f"report.fail_on names {rule.metric!r}, a metric no scorer "
                              f"declares (known: {', '.join(known)}). Fix: "
                              f"report.fail_on=[rouge2_f1:{rule.margin:g}]")


def check_sequential(cfg: DictConfig) -> None:
    """``report.equivalence_margin`` holds finite positive margins of known metrics; a
    sequential sweep decides on named metrics that declare their range (an anytime-valid
    interval needs it)."""
    declared = {m.name: m for m in declared_metrics()}
    for metric, margin in (cfg.report.get("equivalence_margin") or {}).items():
        if metric not in declared:
            raise ConfigError(f"report.equivalence_margin.{metric} names no metric. Fix: one "
                              f"of {policy.decidable()}")
        if isinstance(margin, bool) or not isinstance(margin, int | float) \
                or not math.isfinite(margin) or margin <= 0:
            raise ConfigError(f"report.equivalence_margin.{metric}={margin!r} is invalid: it "
                              "must be a finite positive number in the metric's units. Fix: "
                              f"report.equivalence_margin.{metric}=0.02 (or leave it out for "
                              "2% of the metric's range)")
    if not cfg.runner.get("sequential"):
        if cfg.runner.get("max_tasks") is not None:  # a cap the user set is never ignored
            raise ConfigError(f"runner.max_tasks={cfg.runner.max_tasks} caps a sequential "
                              "sweep's rounds, and runner.sequential is false, so it would "
                              "cap nothing. Fix: dataset.limit="
                              f"{cfg.runner.max_tasks} (it caps the tasks of any run), or "
                              "runner.sequential=true")
        return
    if not cfg.report.decide_on:
        raise ConfigError("runner.sequential=true stops when the comparisons on "
                          "report.decide_on are settled, and report.decide_on is empty. Fix: "
                          "report.decide_on=[rouge2_f1] (a metric with a declared range)")
    unbounded = [m for m in cfg.report.decide_on if declared[m].bounds is None]
    if unbounded:
        bounded = sorted(n for n, m in declared.items() if m.bounds is not None)
        raise ConfigError(f"report.decide_on={_shown(cfg.report.decide_on)} is invalid with "
                          f"runner.sequential=true: {', '.join(unbounded)} declares no range, "
                          "and an anytime-valid interval needs one. Fix: decide on metrics "
                          f"from {bounded}")


def check_providers(cfg: DictConfig) -> None:
    """The model and the judge name registered providers, and the system's temperature is
    one the model's provider accepts (its API would refuse every request otherwise)."""
    for key in ("model", "judge"):
        if not PROVIDERS.has(str(cfg[key].provider)):
            raise ConfigError(f"{key}.provider={cfg[key].provider!r} is not a known provider. "
                              f"Fix: {key}.provider=<one of {', '.join(PROVIDERS.names())}>, "
                              f"or pick a {key} option ({key}=offline)")
    provider = PROVIDERS.get(str(cfg.model.provider))
    high = provider.max_temperature
    if high is not None and cfg.system.temperature > high:
        raise ConfigError(f"system.temperature={cfg.system.temperature} is invalid: the "
                          f"{provider.name} provider (model={cfg.model.name}) accepts 0 to "
                          f"{high:g}. Fix: system.temperature={min(high, 1.0):g}")


def check_embedder(embedder: DictConfig) -> None:
    """The embedder's path holds a model, its device is there, its precision runs on this
    CPU."""
    if embedder.path is not None:
        path = resolve(embedder.path)
        fix = ("Fix: give the folder of a sentence-transformers model, or "
               "retrieval.embedder.path=null for the packaged MiniLM")
        if not path.exists():
            raise ConfigError(f"retrieval.embedder.path={embedder.path!r} does not exist. {fix}")
        if not (path / "config.json").is_file():
            raise ConfigError(f"retrieval.embedder.path={embedder.path!r} holds no model (no "
                              f"config.json in it). {fix}")
    device = str(embedder.device)
    if not _device_available(device):
        raise ConfigError(f"retrieval.embedder.device={device!r} is not available on this "
                          "machine. Fix: retrieval.embedder.device=cpu, or auto (the GPU "
                          "where there is one, else the CPU)")
    try:  # bf16 where the CPU has no bfloat16 instructions
        check_precision(str(embedder.precision.value))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def check_bertscore_layers(metrics: DictConfig) -> None:
    """``metrics.bertscore.num_layers`` is a layer the model has (its config.json's
    ``num_hidden_layers``), when BERTScore runs on a local model."""
    options = metrics.get("bertscore")
    if "bertscore" not in metrics.scorers or options is None:
        return
    config = Path(resolve_embedder_path(options.model_path)) / "config.json"
    try:
        layers = int(json.loads(config.read_text(encoding="utf-8"))["num_hidden_layers"])
    except (OSError, ValueError, KeyError, TypeError):
        return  # a hub name, or a model that does not say: the scorer reports what it finds
    if options.num_layers > layers:
        raise ConfigError(f"metrics.bertscore.num_layers={options.num_layers} is invalid: the "
                          f"model ({config.parent}) has {layers} layers. Fix: "
                          f"metrics.bertscore.num_layers={layers}")


def _device_available(device: str) -> bool:
    kind, _, index = device.partition(":")
    if kind in ("cpu", "auto"):  # auto: the GPU where there is one, else the CPU
        return True  # without importing torch: seconds a warm run need not pay
    import torch

    if kind == "cuda":
        return (torch.cuda.is_available() and (index == "" or index.isdigit())
                and int(index or 0) < torch.cuda.device_count())
    if kind == "mps":
        return bool(torch.backends.mps.is_available())
    return False  # not a device the embedder runs on


def missing_keys(cfg: DictConfig, prefix: str = "") -> list[str]:
    """Keys left ``???``, found without resolving anything (``OmegaConf.missing_keys``
    resolves interpolations, and one that reads a missing key raises instead)."""
    found = []
    for key in map(str, cfg.keys()):
        if OmegaConf.is_missing(cfg, key):
            found.append(f"{prefix}{key}")
            continue
        node = cfg._get_node(key)
        if isinstance(node, DictConfig):
            found += missing_keys(node, f"{prefix}{key}.")
    return found


def check_schema(node: DictConfig, prefix: str = "") -> None:
    """Every key of a typed config node is one its schema declares (``+foo=bar`` is read by
    nothing), and every value with a declared ``Range`` (``arag.config.ranged``) is in it."""
    schema = OmegaConf.get_type(node)
    if not (isinstance(schema, type) and is_dataclass(schema)):
        return  # a free-form node (``options``): its reader checks it
    declared = {f.name: f for f in fields(schema)}
    for key in map(str, node):
        dotted = f"{prefix}{key}"
        if key not in declared:
            raise ConfigError(
                f"{dotted} is not a setting: nothing reads it (known keys here: "
                f"{', '.join(sorted(declared))}). Fix: remove +{dotted}=... or correct its name")
        value = node[key]
        if isinstance(value, DictConfig):
            check_schema(value, f"{dotted}.")
            continue
        limits = declared[key].metadata.get(RANGE)
        items = list(value) if isinstance(value, ListConfig) else [value]
        if limits is not None and not all(limits.allows(v) for v in items):
            raise ConfigError(f"{dotted}={_shown(value)} is invalid: it must be {limits.must}. "
                              f"Fix: {dotted}={_shown(_default(declared[key]))}")
        if any(isinstance(v, float) and not math.isfinite(v) for v in items):
            # a number with no declared range (a plugin's option) is still a number
            raise ConfigError(f"{dotted}={_shown(value)} is invalid: it must be a finite "
                              f"number (a bound left open is null, not inf). Fix: "
                              f"{dotted}={_shown(_default(declared[key]))}")


def refusal(cfg: DictConfig, dotted: str, text: str) -> tuple[str, str] | None:
    """Why ``dotted=text`` would be refused as a number (out of its declared range, or not
    finite) and the value to suggest instead; None: it would not be, or it is not a number
    of a typed node (what the key itself checks later)."""
    parent, _, leaf = dotted.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    schema = OmegaConf.get_type(node) if isinstance(node, DictConfig) else None
    if not (isinstance(schema, type) and is_dataclass(schema)):
        return None
    declared = {f.name: f for f in fields(schema)}.get(leaf)
    try:
        value = float(text)
    except ValueError:
        return None
    limits = declared.metadata.get(RANGE) if declared is not None else None
    if declared is None or (math.isfinite(value) and (limits is None or limits.allows(value))):
        return None
    must = limits.must if limits is not None else ""
    if not math.isfinite(value):
        must = "a finite number" + (f", {must}" if must else "")
    return must, _shown(_default(declared))


def _default(f: Any) -> Any:
    if f.default is not MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not MISSING else "<value>"


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, ListConfig | list):
        return f"[{','.join(_shown(v) for v in value)}]"
    return str(value)


def _read_too_late(names: list[str]) -> str:
    """'<a> reads <b>' for the first listed scorer whose ``reads`` come after it, or ''."""
    for n, name in enumerate(names):
        reads = SCORERS.get(name).reads if SCORERS.has(name) else ()
        late = [r for r in reads if r in names[n + 1:]]
        if late:
            return f"{name} reads {late[0]}'s replies"
    return ""


def _reordered(names: list[str]) -> list[str]:
    """``names`` with every scorer moved after the scorers it reads."""
    out: list[str] = []
    for name in names:
        reads = SCORERS.get(name).reads if SCORERS.has(name) else ()
        out += [r for r in reads if r in names and r not in out]
        out += [name] if name not in out else []
    return out


def check_routing(cfg: DictConfig) -> None:
    """``report.budget`` limits are finite and not negative; ``report.route_by`` names
    features known before any system answers; ``system=routed``'s rule or cascade is one
    it can run (its members are conf/system options, its threshold finite)."""
    report = cfg.report
    for name in ("cost_usd_per_task", "latency_ms_p90"):
        value = (report.get("budget") or {}).get(name)
        if value is not None and (not math.isfinite(float(value)) or float(value) < 0):
            raise ConfigError(f"report.budget.{name}={value!r} is invalid: it must be a finite "
                              "number, 0 or more (or null for no limit). Fix: "
                              f"report.budget.{name}={0.05 if name.startswith('cost') else 5000}")
    for name in report.get("route_by") or []:
        if name not in ROUTE_FEATURES:
            gold = " (evidence_position comes from the gold)" \
                if name == "evidence_position" else ""
            raise ConfigError(f"report.route_by names {name!r}, which is not a feature known "
                              f"before any system answers; use any of {list(ROUTE_FEATURES)}"
                              f"{gold}. Fix: report.route_by=[document_tokens]")
    if len(report.get("cascade") or []) == 1:
        raise ConfigError(f"report.cascade={list(report.cascade)} is a cascade of one system. "
                          "Fix: report.cascade=[naive,arag] (or [] to choose the order)")
    if cfg.system.kind == "routed":
        names, _ = route_of(OmegaConf.to_object(cfg.system))  # type: ignore[arg-type]
        for name in names:
            member_config(name, resolve("."))


def check_policies(configs: list[Any]) -> None:
    """``report.cascade`` names systems of the sweep (its jobs' ``system.name``, or what
    their runs are called: an external file's stem)."""
    names = sorted({str(c.system.name) for c in configs} | {
        SYSTEMS.get(c.system.kind).run_label(str(c.system.name), c.system.get("predictions"))
        for c in configs if SYSTEMS.has(c.system.kind)})
    for cfg in configs[:1]:
        unknown = [n for n in cfg.report.get("cascade") or [] if n not in names]
        if unknown:
            raise ConfigError(f"report.cascade names {unknown[0]!r}, which is not a system of "
                              f"this sweep ({names}). Fix: report.cascade=[{','.join(names[:2])}]")


def check_slices(report: Any) -> None:
    """``report.slice_by`` names known document features; ``report.slice_edges`` gives
    increasing edges of a numeric one."""
    known = known_features()
    repeated = sorted({str(n) for n in report.slice_by if list(report.slice_by).count(n) > 1})
    if repeated:  # a feature twice would be tested twice and counted twice in the family
        raise ConfigError(f"report.slice_by names {', '.join(repeated)} more than once. Fix: "
                          f"report.slice_by=[{','.join(dict.fromkeys(map(str, report.slice_by)))}]")
    for name in report.slice_by:
        if name not in known:
            close = difflib.get_close_matches(str(name), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"report.slice_by names {name!r}, which is not a document "
                              f"feature{hint}. The known features are {known}. Fix: "
                              "report.slice_by=[document_tokens]")
    for name, edges in (report.slice_edges or {}).items():
        if name not in NUMERIC:
            raise ConfigError(f"report.slice_edges.{name}: only a numeric feature has edges "
                              f"({sorted(NUMERIC)}); a categorical one is sliced by value. "
                              f"Fix: remove report.slice_edges.{name}")
        values = list(edges)  # empty: quantile bins
        if any(isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
               for v in values):
            raise ConfigError(f"report.slice_edges.{name}={_shown(values)} is invalid: every "
                              "edge must be a finite number (the outer bins are open already). "
                              f"Fix: report.slice_edges.{name}=[8000,32000,128000]")
        if any(b <= a for a, b in zip(values, values[1:], strict=False)):
            raise ConfigError(f"report.slice_edges.{name}={values} is invalid: the edges "
                              "must be a strictly increasing list. Fix: "
                              f"report.slice_edges.{name}=[8000,32000,128000]")

