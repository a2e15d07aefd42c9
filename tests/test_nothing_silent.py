"""Nothing silent: a setting that is NaN, infinite, contradicts another or would score
nothing, a store that keeps nothing, and a user's mistake that used to end in a raw
traceback are each refused before any run opens, in one line naming the key or file and
the fix."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from arag.config import ConfigError
from arag.datasets import DatasetError
from arag.datasets.base import load_dataset
from arag.registry import UnknownName
from runners.validation import validate_config
from tests.conftest import ROOT, all_runs, compose_cfg, run_cli
from tracking.storage import StorageError, check_tracking

# setting(s) -> what the refusal says (the key and the fix)
REFUSED = {
    "retrieval.min_score=nan": "Fix: retrieval.min_score=null",
    "retrieval.min_score=inf": "Fix: retrieval.min_score=null",
    "retrieval.min_score=-inf": "Fix: retrieval.min_score=null",
    "model.price_input=inf": "Fix: model.price_input=0.0",
    "model.price_input=1e308": "Fix: model.price_input=0.0",
    "judge.price_output=1e308": "Fix: judge.price_output=0.0",
    "model.retry_base_delay_s=nan": "Fix: model.retry_base_delay_s=1.0",
    "system.temperature=inf": "Fix: system.temperature=0.0",
    "system.temperature=nan": "Fix: system.temperature=0.0",
    "model=claude-haiku-4-5 system.temperature=50": "accepts 0 to 1. Fix: system.temperature=1",
    "model=claude-haiku-4-5 system.temperature=1.5": "accepts 0 to 1. Fix: system.temperature=1",
    "model=gpt-4o-mini system.temperature=50": "accepts 0 to 2. Fix: system.temperature=1",
    "retrieval.chunk_size=100 retrieval.chunk_overlap=1000": "Fix: retrieval.chunk_overlap=1",
    "retrieval.chunk_size=100 retrieval.chunk_overlap=100": "Fix: retrieval.chunk_overlap=1",
    "tracking.experiment=''": "Fix: tracking.experiment=null",
    "metrics.scorers=[]": "scores nothing). Fix: metrics.scorers=",
    "runner.verbose=-1": "Fix: runner.verbose=0",
    "runner.verbose=99": "Fix: runner.verbose=0",
    "model.provider=foo": "Fix: model.provider=<one of",
    "judge.provider=foo": "Fix: judge.provider=<one of",
    "retrieval.embedder.path=/etc": "holds no model (no config.json in it). Fix:",
    "metrics.bertscore.num_layers=100": "has 6 layers. Fix: metrics.bertscore.num_layers=6",
}


@pytest.mark.parametrize("settings", list(REFUSED))
def test_a_setting_that_would_pass_silently_is_refused_with_the_key_and_the_fix(settings):
    with pytest.raises(ConfigError) as refused:
        validate_config(compose_cfg(["system=arag", *settings.split()]))
    message = str(refused.value)
    key = settings.split()[-1].split("=")[0]
    assert key in message and REFUSED[settings] in message, message
    assert "\n" not in message


@pytest.mark.parametrize("settings", [
    "model=gpt-4o-mini system.temperature=1.5", "model=claude-haiku-4-5 system.temperature=1",
    "model=offline system.temperature=1.5", "retrieval.min_score=0.2",
    "retrieval.chunk_size=100 retrieval.chunk_overlap=99", "tracking.experiment=mine",
    "runner.verbose=2", "model.price_output=75", "metrics.bertscore.num_layers=6",
    "metrics.scorers=[rouge] metrics.bertscore.num_layers=100"])
def test_the_same_settings_in_range_pass(settings):
    validate_config(compose_cfg(["system=arag", *settings.split()]))


def test_an_unknown_registered_name_is_a_config_error():
    # every entry point reports a ConfigError as one line (a registry lookup included)
    assert issubclass(UnknownName, ConfigError)


@pytest.mark.parametrize("uri", ["sqlite://", "sqlite:///:memory:",
                                 "sqlite:///file:runs?mode=memory&cache=shared"])
def test_a_store_that_keeps_nothing_is_refused(uri, tmp_path):
    with pytest.raises(StorageError) as refused:
        check_tracking(SimpleNamespace(uri=uri, artifact_location=str(tmp_path)))
    assert "in-memory store" in str(refused.value)
    assert "Fix: tracking.uri=sqlite:///mlruns/mlflow.db" in str(refused.value)


def test_a_file_store_on_disk_is_kept(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    checked = check_tracking(compose_cfg([f"tracking.uri={uri}",
                                          f"tracking.artifact_location={tmp_path}"]).tracking)
    assert checked.endswith("mlflow.db") and (tmp_path / "mlflow.db").stat().st_size > 0


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "calls"
    root.mkdir()
    (root / "first.txt").write_text("Revenue rose 5% to $10 million. Margins held.\n")
    return root


def _load_folder(root: Path) -> None:
    load_dataset(compose_cfg(["dataset=folder", f"dataset.root={root}"]).dataset, ROOT,
                 call_models=False)


def test_a_link_loop_in_a_folder_is_named(tmp_path):
    root = _folder(tmp_path)
    (root / "a.txt").symlink_to(root / "b.txt")
    (root / "b.txt").symlink_to(root / "a.txt")
    with pytest.raises(DatasetError) as refused:
        _load_folder(root)
    assert f"{root / 'a.txt'}: a symbolic link that leads back to itself" in str(refused.value)
    assert "Fix: delete the link" in str(refused.value)


def test_an_unreadable_document_is_named(tmp_path, monkeypatch):
    root = _folder(tmp_path)
    locked = root / "locked.txt"
    locked.write_text("Costs fell.\n")
    read_text = Path.read_text

    def denied(path: Path, *args, **kwargs):  # root reads a chmod 000 file: deny it here
        if path == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return read_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(DatasetError) as refused:
        _load_folder(root)
    assert f"{locked}: cannot be read (Permission denied)" in str(refused.value)


# each through the real command line: one line, no traceback, nothing opened
CLI_REFUSED = {  # two that ended in a raw traceback (each command takes about a minute here)
    "model.provider=foo": "model.provider='foo' is not a known provider",
    "retrieval.embedder.path=/etc": "retrieval.embedder.path='/etc' holds no model",
}


@pytest.mark.slow
@pytest.mark.parametrize("setting", list(CLI_REFUSED))
def test_the_command_refuses_it_in_one_line_without_a_traceback(setting, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    result = run_cli(tmp_path, "system=arag,naive", "dataset=sample", "dataset.limit=1",
                     setting, env=env)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if CLI_REFUSED[setting] in line]
    assert lines and "Fix:" in lines[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "mlflow.db").exists() or all_runs(tmp_path) == []


@pytest.mark.slow
def test_hydra_full_error_still_shows_the_trace(tmp_path):
    result = run_cli(tmp_path, "system=arag,naive", "dataset=sample", "dataset.limit=1",
                     "model.provider=foo", env={**os.environ, "HYDRA_FULL_ERROR": "1"})
    assert result.returncode != 0
    assert CLI_REFUSED["model.provider=foo"] in result.stderr
    assert "Traceback" in result.stderr and "ConfigError" in result.stderr
