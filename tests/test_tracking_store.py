"""Which MLflow store a command uses, and where its artifacts go: MLflow's own convention
(``$MLFLOW_TRACKING_URI``) unless ``tracking.uri`` is given; the console names the store;
artifacts live beside a sqlite store; the printed UI address opens that store."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from report import console
from tests.conftest import ROOT, compose_cfg
from tracking import logs
from tracking.paths import DEFAULT_URI, artifact_location, resolve, store_line
from tracking.runs import ensure_experiment

TEAM = "http://mlflow.team.internal:5000"


def test_mlflow_tracking_uri_is_the_store_unless_tracking_uri_is_given(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert compose_cfg([]).tracking.uri == DEFAULT_URI
    monkeypatch.setenv("MLFLOW_TRACKING_URI", TEAM)
    assert compose_cfg([]).tracking.uri == TEAM
    given = "sqlite:////tmp/elsewhere/mlflow.db"
    assert compose_cfg([f"tracking.uri={given}"]).tracking.uri == given  # the command wins


@pytest.mark.parametrize("module", ["report.cli", "report.baseline_report"])
def test_python_m_report_reads_mlflow_tracking_uri_and_names_the_store(module, monkeypatch,
                                                                        capsys):
    import importlib

    import mlflow

    opened: list[str] = []

    class Client:
        def __init__(self, tracking_uri: str):
            opened.append(tracking_uri)

        def __getattr__(self, name):
            raise LookupError("no such run")

    monkeypatch.setattr(mlflow, "MlflowClient", Client)
    monkeypatch.setattr(mlflow, "set_tracking_uri", lambda uri: None)
    import tracking.storage  # the store is checked first, as run.py checks it: no server here

    monkeypatch.setattr(tracking.storage, "probe_server", lambda *args, **kw: None)
    monkeypatch.setattr(tracking.storage, "bound_server_calls", lambda: None)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", TEAM)
    main = importlib.import_module(module).main
    with pytest.raises(LookupError):
        main(["p1"] if module == "report.cli" else ["b1", "c1"])
    assert opened == [TEAM]
    assert f"MLflow store: {TEAM} (from $MLFLOW_TRACKING_URI)" in capsys.readouterr().err
    opened.clear()
    with pytest.raises(LookupError):
        main(["p1", "--tracking-uri", "http://other:5000"] if module == "report.cli"
             else ["b1", "c1", "--tracking-uri", "http://other:5000"])
    assert opened == ["http://other:5000"]
    assert "MLflow store: http://other:5000 (given on the command)" in capsys.readouterr().err


def test_the_store_line_says_which_store_and_why(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert store_line(DEFAULT_URI, "sqlite:////p/mlruns/mlflow.db") \
        == "MLflow store: sqlite:////p/mlruns/mlflow.db (the default store)"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://u:secret@team:5000")
    line = store_line("http://u:secret@team:5000")
    assert "(from $MLFLOW_TRACKING_URI)" in line and "secret" not in line


class Experiments:
    """An MLflow client that records where each new experiment keeps its artifacts."""

    def __init__(self):
        self.created: dict[str, str | None] = {}

    def get_experiment_by_name(self, name):
        return None

    def create_experiment(self, name, artifact_location=None):
        self.created[name] = artifact_location
        return "1"


def test_artifacts_go_beside_a_sqlite_store_unless_artifact_location_says(tmp_path):
    client = Experiments()
    store = f"sqlite:///{tmp_path}/x/mlflow.db"
    ensure_experiment(client, "beside", SimpleNamespace(uri=store, artifact_location=None))
    ensure_experiment(client, "told", SimpleNamespace(uri=store,
                                                      artifact_location=str(tmp_path / "art")))
    ensure_experiment(client, "server", SimpleNamespace(uri=TEAM, artifact_location=None))
    assert client.created == {"beside": (tmp_path / "x" / "artifacts").as_uri(),
                              "told": (tmp_path / "art").as_uri(), "server": None}
    # the default store's artifacts stay where they always were
    assert artifact_location(DEFAULT_URI, None) == str(resolve("mlruns/artifacts"))
    assert compose_cfg([]).tracking.artifact_location is None


def test_the_printed_ui_address_opens_the_store_the_run_is_in():
    page = "#/experiments/3/runs/p1/artifacts"
    assert console.ui_url(DEFAULT_URI, "3", "p1") == f"make ui, then http://127.0.0.1:5000/{page}"
    store = "sqlite:////data/team/mlflow.db"
    assert console.ui_url(store, "3", "p1") \
        == f"make ui STORE={store}, then http://127.0.0.1:5000/{page}"
    assert console.ui_url(TEAM, "3", "p1") == f"{TEAM}/{page}"
    dry = subprocess.run(["make", "-n", "ui", f"STORE={store}"], cwd=ROOT, capture_output=True,
                         text=True)
    assert f"--backend-store-uri {store}" in dry.stdout


LIBRARY_LINES = """
import logging, os
from report.__main__ import setup_console
setup_console()
import faiss  # its loader logs INFO lines on import
logging.getLogger("report.report").info("ours: shown")
print(os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"])
"""


def test_python_m_report_keeps_library_info_lines_and_download_bars_out():
    done = subprocess.run([sys.executable, "-c", LIBRARY_LINES], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "faiss" not in done.stderr and "ours: shown" in done.stderr
    assert done.stdout.strip() == "false"  # MLflow's per-artifact download bars are off


def test_each_warning_is_printed_once_per_command(monkeypatch, capsys):
    import logging

    monkeypatch.setattr(logs.OncePerCommand, "printed", set())
    root, log = logging.getLogger(), logging.getLogger("runners.job")
    for job in range(3):  # Hydra sets up the console anew for each job; the job quiets it
        handler = logging.StreamHandler(sys.stderr)
        root.addHandler(handler)
        try:
            logs.quiet(tracking=False)
            log.warning("dataset x: 5 of 6 documents exceed the context budget")  # preflight
            log.warning("dataset x: 5 of 6 documents exceed the context budget")  # the job
            log.warning(f"job {job}: its own warning")
        finally:
            root.removeHandler(handler)
    err = capsys.readouterr().err
    assert err.count("exceed the context budget") == 1
    assert all(f"job {n}: its own warning" in err for n in range(3))
