"""Shared fixtures: composed configs pointed at temporary stores, a small dataset."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

import runners.config  # noqa: F401  (registers the schema)
from tests import forked

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "datasets"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_LOGGING", "false")
os.environ.pop("MLFLOW_TRACKING_URI", None)  # the default store follows it: the shell's is not ours
# Workers of `pytest -n N` share the cores: each worker (and every sweep it starts, which
# inherits this) gets its share of math threads. torch's OpenMP threads spin while they
# wait, so two workers with a thread per core each ran the end-to-end sweeps 1.6x slower
# (tests/test_sweep.py and tests/test_embedding_reuse.py with -n 2: 496 s, against 311 s).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))


def pytest_addoption(parser):
    parser.addoption("--runapi", action="store_true", default=False,
                     help="run live tests against the real Anthropic API (needs ANTHROPIC_API_KEY)")
    parser.addoption("--runslow", action="store_true", default=False,
                     help="run the slow end-to-end tests too (always on when CI is set)")


def pytest_collection_modifyitems(config, items):
    run_api = config.getoption("--runapi") and os.environ.get("ANTHROPIC_API_KEY")
    run_slow = config.getoption("--runslow") or os.environ.get("CI")
    skip_api = pytest.mark.skip(reason="live API test: pass --runapi and set ANTHROPIC_API_KEY")
    skip_slow = pytest.mark.skip(reason="slow end-to-end test: pass --runslow (CI runs them)")
    for item in items:
        if "api" in item.keywords and not run_api:
            item.add_marker(skip_api)
        elif "slow" in item.keywords and not run_slow:
            item.add_marker(skip_slow)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _longest_files_first(items)


def _longest_files_first(items):
    """On xdist's workers (each collects, and all must agree): the test files longest
    first by the committed CI durations (``tests/durations.py``), a file's tests together and
    in their own order. With ``--dist loadfile --no-loadscope-reorder`` (``.ci/run``) the long
    end-to-end files start first and the short ones fill in at the end. A file not measured
    yet counts a second a test."""
    from collections import Counter

    from tests.durations import load

    seconds = load()
    files = {item: item.nodeid.split("::")[0] for item in items}
    tests_in = Counter(files.values())
    # stable: a file's tests keep their order
    items.sort(key=lambda item: -seconds.get(files[item], float(tests_in[files[item]])))


@pytest.fixture(scope="session", autouse=True)
def _fork_server_environment():
    """The environment end-to-end commands are forked in (tests/forked.py): the session's,
    before any test sets a variable of its own."""
    forked.snapshot()


@pytest.fixture(autouse=True)
def _no_store_from_the_environment(monkeypatch):
    """The config's default store follows $MLFLOW_TRACKING_URI (runners/config.py), which
    the developer's shell or an earlier test's ``mlflow.set_tracking_uri`` may have set: a
    test starts without it (tests that want it set it)."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture(autouse=True)
def _each_test_reads_its_datasets():
    """A test starts as a new process would: no dataset read by an earlier test is kept
    (``arag.datasets.forget_loaded``), whatever it monkeypatched."""
    from arag.datasets import forget_loaded

    forget_loaded()


@pytest.fixture(autouse=True)
def _each_test_paces_afresh():
    """A test starts as a new process would: no rate limiter learned from an earlier
    test's server (``arag.llm.limits.forget``)."""
    from arag.llm.limits import forget

    forget()


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory) -> Path:
    """An index/response cache shared by tests (content-keyed, so sharing is safe)."""
    return tmp_path_factory.mktemp("cache")


def store_overrides(tmp: Path, cache: Path | None = None) -> list[str]:
    return [
        f"tracking.uri=sqlite:///{tmp}/mlflow.db",
        f"tracking.artifact_location={tmp}/artifacts",
        f"cache.dir={cache or tmp / 'cache'}",
        f"runner.runs_dir={tmp}/runs",
        "runner.progress=false",
    ]


def compose_cfg(overrides: list[str]):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


@pytest.fixture
def make_cfg(tmp_path, shared_cache):
    def make(*overrides: str, fresh_cache: bool = False):
        base = store_overrides(tmp_path, None if fresh_cache else shared_cache)
        return compose_cfg(base + list(overrides))

    return make


FACTS = {
    "revenue": "Third quarter revenue rose {g} percent to ${r} million.",
    "eps": "Adjusted earnings per share were ${e} compared with $0.98 a year ago.",
    "guide": "We expect full year revenue of $1.80 billion to $1.85 billion.",
}


def write_mini_dataset(root: Path, n_docs: int = 2, filler: int = 60) -> Path:
    """A small dataset in the jsonl layout: filler lines plus three gold fact lines."""
    (root / "documents").mkdir(parents=True, exist_ok=True)
    docs, tasks = [], []
    for k in range(n_docs):
        tic = f"T{k}X"
        lines = ["Good morning and welcome to the conference call.",
                 "This call contains forward-looking statements under the safe harbor rules."]
        lines += [f"Our team opened {i + 3} new offices in region {i} and hired engineers."
                  for i in range(filler)]
        values = {"g": f"8.{k}", "r": f"452.{k}", "e": f"1.1{k}"}
        gold = []
        positions = [2 + p * filler // 60 for p in (18, 38, 48)]  # 20, 40, 50 for 60 fillers
        for pos, key in zip(positions, ("revenue", "eps", "guide"), strict=True):
            lines.insert(pos, FACTS[key].format(**values))
            gold.append(pos + 1)
        doc_id = f"{tic}_q3_2024"
        (root / "documents" / f"{doc_id}.txt").write_text("\n".join(lines) + "\n")
        docs.append({"doc_id": doc_id, "path": f"documents/{doc_id}.txt", "company": f"{tic} Corp",
                     "ticker": tic, "doc_type": "EARNINGS_CALL", "period": "Q3 2024"})
        tasks.append({
            "id": doc_id, "doc_ids": [doc_id],
            "question": f"Summarize the key highlights from {tic}'s Q3 2024 earnings call.",
            "reference": (f"q3 revenue rose {values['g']} percent to ${values['r']} million.\n"
                          f"q3 adjusted eps ${values['e']}.\n"
                          "sees fy revenue $1.80 billion to $1.85 billion."),
            "gold_lines": {doc_id: gold},
        })
    (root / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return root


@pytest.fixture
def mini_dataset(tmp_path) -> Path:
    return write_mini_dataset(tmp_path / "mini")


def run_cli(tmp: Path, *overrides: str, cache: Path | None = None, sweep: bool = True,
            env: dict[str, str] | None = None):
    sweep_dir = f"{tmp}/multirun/{len(list(tmp.glob('multirun/*')))}"
    # the caller's overrides come last, so they win over the temporary-store defaults
    cmd = [sys.executable, "run.py"] + (["-m"] if sweep else []) + store_overrides(tmp, cache) \
        + [f"hydra.sweep.dir={sweep_dir}", f"hydra.run.dir={tmp}/outputs"] + list(overrides)
    return forked.run(cmd, cwd=ROOT, env=env, timeout=900)


def client_for(tmp: Path):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{tmp}/mlflow.db")


def all_runs(tmp: Path):
    client = client_for(tmp)
    exps = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(exps) if exps else []


@pytest.fixture(scope="session")
def sample_sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    first = run_cli(tmp, "system=arag,naive,stuffing", "dataset=sample")
    second = run_cli(tmp, "system=arag,naive,stuffing", "dataset=sample")
    changed = run_cli(tmp, "system=arag,naive", "dataset=sample", "max_loops=4",
                      "retrieval.top_k=3")
    return tmp, first, second, changed
