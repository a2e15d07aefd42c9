"""Contracts every registered system, scorer and provider keeps, and what a new one gets
with no edit outside its own file and YAML (tests/plugins: a system and a scorer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from arag.config import ModelConfig
from arag.llm import ChatModel, Completion, make_model
from arag.llm.base import MissingCredentials, ModelError
from arag.llm.registry import PROVIDERS, require_credentials
from arag.records import Prediction, Task
from arag.retrieval import build_chunks
from arag.systems import SYSTEMS, Sources
from arag.trace import ModelCall, Retrieval, ToolCall
from metrics import SCORERS, Metric, ScorerEnv, ScoringItem
from runners.evaluate import evaluate
from runners.job import build_system, make_scorers, prepare
from runners.settings import read
from tests.conftest import ROOT, write_mini_dataset
from tests.plugins.arag_test_plugins import keyword_rag  # noqa: F401  (registers the system)
from tests.plugins.arag_test_plugins.context_words import ContextWords

# in-process, the test plugins are registered by hand; tests/test_plugins.py installs them
# as a package and finds them through their entry points alone
SCORERS.register("context_words")(ContextWords)
PLUGINS = f"hydra.searchpath=[file://{ROOT}/tests/plugins/arag_test_plugins/conf]"
SYSTEM_YAMLS = sorted(p.stem for p in (ROOT / "conf" / "system").glob("*.yaml"))


@pytest.fixture(scope="module")
def mini(tmp_path_factory) -> Path:
    return write_mini_dataset(tmp_path_factory.mktemp("contracts") / "mini")


def test_every_built_in_system_has_a_yaml_and_every_yaml_a_registered_system(make_cfg):
    kinds = {make_cfg(f"system={name}").system.kind for name in SYSTEM_YAMLS}
    assert kinds <= set(SYSTEMS.names())
    assert set(SYSTEMS.names()) - kinds == {"keyword_rag"}  # the test plugin, YAML in tests/


def external_predictions(root: Path, tmp: Path) -> str:
    """A predictions file for the mini dataset, as a pipeline outside the harness writes it:
    each task's answer and the first gold line's text as its context."""
    lines = []
    for raw in (root / "tasks.jsonl").read_text().splitlines():
        task = json.loads(raw)
        doc = task["doc_ids"][0]
        text = (root / "documents" / f"{doc}.txt").read_text().splitlines()
        first = task["gold_lines"][doc][0]
        lines.append(json.dumps({"id": task["id"], "predicted": text[first - 1],
                                 "contexts": [{"text": text[first - 1], "doc_id": doc}]}))
    (tmp / "external.jsonl").write_text("\n".join(lines) + "\n")
    return f"system.predictions={tmp / 'external.jsonl'}"


def given_answers(tmp: Path) -> Path:
    """A SummEdits-like clone: one document, one summary people labelled."""
    folder = tmp / "summedits" / "data" / "summedits"
    folder.mkdir(parents=True)
    item = {"id": "s1", "doc": "Revenue rose 5% to $2 billion.\nMargins held.",
            "summary": "Revenue rose 5%.", "label": 1, "original_summary": "",
            "edit_types": [], "split": "evaluation"}
    (folder / "summedits_ectsum.json").write_text(json.dumps([item]))
    return tmp / "summedits"


@pytest.mark.parametrize("system", [*SYSTEM_YAMLS, "keyword_rag"])
def test_system_contract(system, make_cfg, mini, tmp_path):
    extra = [external_predictions(mini, tmp_path)] if system == "external" else \
        ["system.cascade=[arag,naive]"] if system == "routed" else []
    data = [f"dataset.root={mini}"] if system != "given" else [  # answers given with the tasks
        "dataset=summedits", f"dataset.root={given_answers(tmp_path)}"]
    cfg = make_cfg(PLUGINS, f"system={system}", *data, "metrics.scorers=[length]", *extra)
    job = prepare(read(cfg))
    cls = job.system_class
    assert all(isinstance(getattr(cls, flag), bool) for flag in ("retrieves", "ranks", "agentic"))
    assert not cls.ranks or cls.retrieves, "a system that ranks chunks retrieves them"

    built = build_system(job, make_model(cfg.model))
    # the index is loaded before the task clock starts exactly when the system searches it
    assert (job._index is not None) == (cls.retrieves and cls.searches)

    task = job.dataset.tasks[0]
    pred = built.predict(task, "mini")
    assert pred.error is None and pred.predicted
    again = Prediction.from_dict(json.loads(pred.to_json()))
    assert again == pred and all(type(a) is type(b) for a, b in zip(again.trace, pred.trace,
                                                                      strict=True))
    if system not in ("external", "given"):  # answers read from a file: no model is called
        assert any(isinstance(s, ModelCall) for s in pred.trace)
    assert any(isinstance(s, ToolCall) for s in pred.trace) == cls.agentic

    chunks = build_chunks(job.dataset.corpus, cfg.retrieval.chunk_size, cfg.retrieval.chunk_overlap)
    context = cls.judged_context(pred, task, Sources(job.dataset.corpus,
                                                     {c.chunk_id: c for c in chunks}))
    if cls.retrieves and cls.searches:  # judged on the chunks it put in front of the model
        by_id = {c.chunk_id: c for c in chunks}
        assert pred.context_chunk_ids
        assert context == "\n\n".join(by_id[c].text for c in pred.context_chunk_ids)
    ranking = cls.ranking(pred)
    assert (ranking is not None) == cls.ranks
    if ranking is not None:
        assert ranking and len(set(ranking)) == len(ranking)


def test_a_new_retrieving_system_is_scored_as_it_declares(make_cfg, mini):
    """tests/plugins/keyword_rag.py + its YAML: retrieval, ranking and faithfulness context
    come out right with nothing else edited; so does the plugin scorer's column."""
    scorers = "metrics.scorers=[retrieval,ranking,numeric,context_words]"
    cfg = make_cfg(PLUGINS, "system=keyword_rag", f"dataset.root={mini}", scorers,
                   "retrieval.top_k=2")
    job = prepare(read(cfg))
    system = build_system(job, make_model(cfg.model))
    preds = [system.predict(t, "mini") for t in job.dataset.tasks]
    chunks = build_chunks(job.dataset.corpus, cfg.retrieval.chunk_size, cfg.retrieval.chunk_overlap)
    records = evaluate(preds, {t.id: t for t in job.dataset.tasks}, job.dataset.corpus, chunks,
                       make_scorers(read(cfg))[0], cfg.target_length, job.system_class)
    for rec, pred in zip(records, preds, strict=True):
        assert rec["retrieval_recall"] is not None and rec["retrieval_precision"] is not None
        # ranked 2 deep: scored at k=1, and null with the reason at depths it never reached
        assert rec["recall_at_1"] is not None and rec["mrr_at_1"] is not None
        assert rec["recall_at_5"] is None and rec["null_reasons"]["recall_at_5"]
        doc_words = len(job.dataset.corpus.documents[pred.doc_ids[0]].text.split())
        chunk_words = sum(len(c.text.split()) for c in chunks if c.chunk_id in pred.context_chunk_ids)
        assert rec["context_words"] == chunk_words < doc_words  # judged on its chunks


def _answered_and_skipped() -> list[ScoringItem]:
    task = Task("t", "summarization", ("D",), "Summarize D's quarter.",
                "q3 revenue rose 8.1 percent to $452.2 million.", {"D": (1,)})
    made = []
    for skipped in (False, True):
        pred = Prediction(id="t", source="s", system="x", model="m", task_type="summarization",
                          question=task.question, doc_ids=["D"], ground_truth=task.reference,
                          predicted=None if skipped else "revenue rose 8.1 percent to $452.2 million.",
                          retrieved_chunk_ids=["D#L1-2"], skipped=skipped,
                          skip_reason="too long" if skipped else None,
                          trace=[Retrieval("semantic_search", {}, ["D#L1-2", "D#L3-4"])])
        made.append(ScoringItem(pred, task, {"D#L1-2"}, "Revenue rose 8.1 percent to $452.2 "
                                "million.", 50, True, ranking=["D#L1-2", "D#L3-4"]))
    return made


@pytest.mark.parametrize("name", SCORERS.names())
def test_scorer_contract(name, make_cfg):
    cfg = make_cfg()
    cls = SCORERS.get(name)
    options = cfg.metrics.get(name)
    if cls.Options is not None:  # its options are a typed node of the config
        assert OmegaConf.get_type(options) is cls.Options
    scorer = cls.from_config(options, ScorerEnv())
    assert scorer.metrics and all(isinstance(m, Metric) for m in scorer.metrics)
    assert len(set(scorer.fields)) == len(scorer.fields)
    answered, skipped = scorer.score(_answered_and_skipped())
    for scores in (answered, skipped):
        assert set(scorer.fields) <= set(scores.values)
        for field, value in scores.values.items():
            if value is None and field in scorer.fields:
                assert scores.null_reasons.get(field), f"{name}: {field} is null without a reason"
    assert all(skipped.values[f] is None for f in scorer.fields)
    for metric in scorer.metrics:  # what a sequential sweep's intervals rely on
        value = answered.values.get(metric.name)
        if metric.bounds is not None and value is not None:
            assert metric.bounds[0] <= value <= metric.bounds[1], f"{metric.name} outside its bounds"
    records = [{"id": "t", **answered.values}]
    assert all(isinstance(v, float) for v in scorer.aggregate(records, records).values())
    json.dumps(scorer.artifacts())


def _model_config(provider: str):
    """The first model option of the provider, as composed (its file over the schema)."""
    for path in sorted((ROOT / "conf" / "model").glob("*.yaml")):
        node = OmegaConf.load(path)
        if node.get("provider") == provider:
            return OmegaConf.merge(OmegaConf.structured(ModelConfig), node)
    return OmegaConf.create({"name": provider, "provider": provider, "model_id": provider,
                             "script": ["an answer"]})


@pytest.mark.parametrize("name", PROVIDERS.names())
def test_provider_contract(name, monkeypatch):
    provider = PROVIDERS.get(name)
    cfg = _model_config(name)
    env_vars = provider.required_env_vars(cfg)  # declared, or named by its config
    assert all(isinstance(v, str) and v.isupper() for v in env_vars)
    for var in env_vars:
        monkeypatch.delenv(var, raising=False)
    if env_vars:  # the check before a run names the choice and the variable
        with pytest.raises(MissingCredentials, match=f"model={cfg.name}.*{env_vars[0]}"):
            require_credentials({f"model={cfg.name}": cfg})
        for var in env_vars:
            monkeypatch.setenv(var, "test-credential")
    require_credentials({f"model={cfg.name}": cfg})
    if name == "none":
        with pytest.raises(ValueError, match="names no model"):
            make_model(cfg)
        return
    # a server nobody listens on, reached once: no network is needed to run the contract
    unreachable = OmegaConf.merge(cfg, {"base_url": "http://127.0.0.1:9", "max_retries": 0,
                                        "timeout_s": 5})
    model = make_model(unreachable)
    assert isinstance(model, ChatModel) and model.provider == name
    assert model.classify_error(ValueError("a bug, not an outage")) is None
    try:  # a provider that needs no server answers; one that does fails as an outage
        completion = model.complete("system", [{"role": "user", "content": "<question>q</question>"}])
    except ModelError as exc:
        assert exc.kind == "connection" and "test-credential" not in str(exc)
    else:
        assert isinstance(completion, Completion) and completion.usage.output_tokens > 0
