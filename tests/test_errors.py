"""Errors are not results (fast parts): error budgets and their message, judge replies that
are never cached, URL credentials redacted, storage checks, a UTF-8 BOM, closest-key
suggestions and one override per key in a sweep."""

from __future__ import annotations

import logging
import sqlite3
import sys
import time
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace

import pytest

from arag.datasets import load_dataset
from arag.llm.base import ModelError
from arag.llm.cache import CachedModel, MeteredModel
from arag.llm.pricing import Prices
from arag.llm.scripted import ScriptedModel
from arag.redact import (
    RedactingFilter,
    keys_with_credentials,
    redact,
    reveal,
    stash_credentials,
)
from metrics.geval import GEvalScorer, parse_score
from metrics.judging import judge_calls, judge_request, unreadable_reason
from runners.errors import has_errors, too_many_errors, zero_stale_counts
from runners.preflight import job_overrides
from runners.resume import nothing_to_do
from runners.validation import ConfigError
from tests import forked
from tests.conftest import ROOT, write_mini_dataset
from tracking.storage import StorageError, check_tracking, prepare_sqlite, probe_server, writable_dir

RUNNER = SimpleNamespace(max_error_rate=0.0, retry_errors=True, rerun=False)


# --- error budget -------------------------------------------------------------------------

def test_any_errored_task_fails_the_run_by_default_with_kinds_counts_and_the_fix():
    metrics = {"n_tasks": 6, "n_errors": 6, "n_errors_overloaded": 5, "n_errors_auth": 1}
    message = too_many_errors(metrics, RUNNER)
    assert message is not None
    assert "6 of 6 tasks errored (overloaded x5, auth x1)" in message
    assert "runner.max_error_rate=0" in message and "run the same command again" in message
    assert "wait for the API to recover" in message and "API key" in message
    assert too_many_errors({"n_tasks": 6, "n_errors": 0}, RUNNER) is None


def test_max_error_rate_accepts_a_share_of_errors():
    tolerant = SimpleNamespace(**{**vars(RUNNER), "max_error_rate": 0.2})
    assert too_many_errors({"n_tasks": 10, "n_errors": 2, "n_errors_server": 2}, tolerant) is None
    assert "3 of 10" in too_many_errors({"n_tasks": 10, "n_errors": 3}, tolerant)


def test_failed_judge_calls_count_against_the_budget_but_unreadable_replies_do_not():
    failed = {"n_tasks": 4, "n_errors": 0, "judge_calls": 4, "judge_errors": 3,
              "judge_errors_overloaded": 2, "judge_errors_unparseable": 1}
    message = too_many_errors(failed, RUNNER)
    assert message and "2 of 6 judge calls failed (overloaded x2)" in message
    unreadable = {"n_tasks": 4, "n_errors": 0, "judge_calls": 8, "judge_errors": 1,
                  "judge_errors_unparseable": 1}
    assert too_many_errors(unreadable, RUNNER) is None and not has_errors(unreadable)


def test_opting_out_of_retries_is_named_in_the_fix():
    keep = SimpleNamespace(**{**vars(RUNNER), "retry_errors": False})
    assert "runner.retry_errors=true" in too_many_errors({"n_tasks": 1, "n_errors": 1}, keep)


def _run(status: str, **metrics: float):
    return SimpleNamespace(info=SimpleNamespace(status=status),
                           data=SimpleNamespace(metrics=metrics))


def test_a_finished_run_with_errors_is_never_nothing_to_do():
    assert nothing_to_do(_run("FINISHED", n_errors=0), RUNNER)
    assert not nothing_to_do(_run("FINISHED", n_errors=2), RUNNER)
    assert not nothing_to_do(_run("FINISHED", n_errors=0, judge_errors=1), RUNNER)
    assert not nothing_to_do(_run("FAILED", n_errors=0), RUNNER)
    keep = SimpleNamespace(**{**vars(RUNNER), "retry_errors": False})
    assert nothing_to_do(_run("FINISHED", n_errors=2), keep)


def test_error_counts_retried_away_are_zeroed_on_the_continued_run():
    previous = {"n_errors_overloaded": 3.0, "judge_errors": 2.0, "rouge1_f1_mean": 0.3}
    assert zero_stale_counts(previous, {"judge_errors": 0.0}) == {"n_errors_overloaded": 0.0}


# --- judge replies ------------------------------------------------------------------------

def _judge(tmp_path, replies, reask_unreadable: int = 2):
    inner = ScriptedModel(replies)
    return inner, MeteredModel(CachedModel(inner, tmp_path, reask_unreadable=reask_unreadable),
                               Prices(1, 5, 0.1, 1.25))


def _readable(text: str) -> bool:
    return parse_score(text) is not None


def test_an_unparseable_judge_reply_is_recorded_counted_and_asked_again(tmp_path):
    inner, judge = _judge(tmp_path, ["I cannot decide.", "Final score: 4", "Final score: 2"])
    request = {"x": judge_request("grade", "summary A", 50)}
    first = judge_calls(judge, request, readable=_readable)
    assert first["x"].text == "I cannot decide."  # the run that got it records it
    assert judge.errors["unparseable"] == 1 and judge.to_ask_again == 1
    assert "asked again by the next run" in unreadable_reason("no score", first["x"])
    second = judge_calls(judge, request, readable=_readable)  # never served as an answer
    assert second["x"].text == "Final score: 4" and len(inner.requests) == 2
    third = judge_calls(judge, request, readable=_readable)  # a readable reply is cached
    assert third["x"].text == "Final score: 4" and third["x"].cached and len(inner.requests) == 2


def test_an_unreadable_reply_is_asked_again_up_to_its_limit_then_kept(tmp_path):
    """judge.reask_unreadable=2: three asks in all, then the last reply is served (the
    judge is not paid again) and the null says after how many asks."""
    inner, judge = _judge(tmp_path, ["no idea", "still no idea", "none", "Final score: 5"])
    request = {"x": judge_request("grade", "summary A", 50)}
    reasons = []
    for _ in range(5):
        reply = judge_calls(judge, request, readable=_readable)["x"]
        reasons.append(unreadable_reason("no score", reply))
    assert len(inner.requests) == 3  # asked once, then again twice
    assert reply.text == "none" and reply.cached
    assert reasons[:2] == ["no score (asked again by the next run of the same command)"] * 2
    assert reasons[2:] == ["no score: unreadable after 3 asks"] * 3
    assert judge.to_ask_again == 2


def test_a_batch_asks_an_unreadable_reply_again_like_a_single_call(tmp_path):
    inner, judge = _judge(tmp_path, ["no idea", "Final score: 3"], reask_unreadable=1)
    requests = {"x": judge_request("grade", "summary A", 50)}
    first = judge_calls(judge, requests, batch=True, readable=_readable)["x"]
    second = judge_calls(judge, requests, batch=True, readable=_readable)["x"]
    third = judge_calls(judge, requests, batch=True, readable=_readable)["x"]
    assert (first.text, second.text, third.text) == ("no idea", "Final score: 3",
                                                     "Final score: 3")
    assert third.cached and len(inner.requests) == 2


def test_reask_unreadable_zero_keeps_the_first_unreadable_reply(tmp_path):
    inner, judge = _judge(tmp_path, ["no idea", "Final score: 3"], reask_unreadable=0)
    request = {"x": judge_request("grade", "summary A", 50)}
    judge_calls(judge, request, readable=_readable)
    again = judge_calls(judge, request, readable=_readable)["x"]
    assert again.text == "no idea" and again.cached and len(inner.requests) == 1
    assert unreadable_reason("no score", again) == "no score: unreadable after 1 ask"


class _Down(ScriptedModel):
    def complete(self, *args, **kwargs):
        raise ModelError("HTTP 529: Overloaded", kind="overloaded")


def test_judge_failures_are_counted_by_kind(tmp_path):
    judge = MeteredModel(CachedModel(_Down([]), tmp_path), Prices(1, 5, 0.1, 1.25))
    replies = judge_calls(judge, {str(i): judge_request("s", f"p{i}", 10) for i in range(3)})
    assert all(isinstance(r, ModelError) for r in replies.values())
    assert judge.errors == {"overloaded": 3} and judge.calls == 0


def test_without_criteria_every_geval_field_is_null_with_the_reason(tmp_path):
    judge = MeteredModel(CachedModel(_Down([]), tmp_path), Prices(1, 5, 0.1, 1.25))
    scorer = GEvalScorer(judge, "anthropic/x", tmp_path)
    item = SimpleNamespace(prediction=SimpleNamespace(skipped=False, error=None,
                                                      predicted="revenue rose"),
                           task=SimpleNamespace(reference="revenue rose 5%", question="q",
                                                meta={}))
    (scores,) = scorer.score([item])  # type: ignore[list-item]
    assert scores.values["geval_faithfulness"] is None and scores.values["error_codes"] is None
    assert "could not write the G-Eval criteria" in scores.null_reasons["geval_coverage"]
    assert "529" in scores.null_reasons["geval_faithfulness"]
    assert not (tmp_path / "geval").exists()  # no criteria file: the next run asks again


# --- credentials in URLs ------------------------------------------------------------------

def test_url_credentials_are_redacted_and_revealed_only_to_the_connection(monkeypatch):
    monkeypatch.delenv("ARAG_URL_CREDENTIALS", raising=False)
    url = "http://user:s3cr3t-pass@127.0.0.1:8080/v1"
    assert redact(f"base_url={url} x") == "base_url=http://***@127.0.0.1:8080/v1 x"
    args = stash_credentials(["run.py", f"model.base_url={url}", "system=naive"])
    assert args == ["run.py", "model.base_url=http://***@127.0.0.1:8080/v1", "system=naive"]
    assert reveal("http://***@127.0.0.1:8080/v1") == url
    assert reveal("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
    assert keys_with_credentials({"model": {"base_url": url}, "tracking": {
        "uri": "http://***@h"}}) == ["model.base_url"]


def test_log_records_and_tracebacks_are_redacted():
    try:
        raise ConnectionError("cannot reach http://u:s3cr3t-pass@host:1")
    except ConnectionError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "calling %s",
                                   ("http://u:s3cr3t-pass@host:1",), sys.exc_info())
    RedactingFilter().filter(record)
    text = logging.Formatter().format(record)
    assert "s3cr3t-pass" not in text and "http://***@host:1" in text


# --- storage ------------------------------------------------------------------------------

def test_an_unwritable_directory_names_its_key_and_the_fix(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(StorageError, match=r"cache.dir=.*needs a writable directory.*Fix: "
                                           r"point cache.dir at a directory"):
        writable_dir("cache.dir", str(blocker / "cache"), "cache.dir=data/cache")


def test_an_unknown_tracking_scheme_names_tracking_uri():
    cfg = SimpleNamespace(uri="garbage://x", artifact_location="mlruns/artifacts")
    with pytest.raises(StorageError, match=r"tracking.uri='garbage://x': 'garbage' is not a "
                                           r"tracking store"):
        check_tracking(cfg)


def test_a_closed_port_fails_in_seconds_naming_tracking_uri(unused_port):
    started = time.monotonic()
    with pytest.raises(StorageError, match=r"tracking.uri='http://\*\*\*@127.0.0.1:\d+' is not "
                                           r"reachable"):
        probe_server(f"http://127.0.0.1:{unused_port}", f"http://***@127.0.0.1:{unused_port}")
    assert time.monotonic() - started < 30


@pytest.fixture
def unused_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_fresh_sqlite_store_is_created_whole_or_not_at_all(tmp_path, monkeypatch):
    import tracking.storage as storage

    db = tmp_path / "mlflow.db"

    def disk_full(tmp):
        tmp.write_bytes(b"half a database")
        raise OSError("database or disk is full")

    monkeypatch.setattr(storage.sqlite_store, "create", disk_full)
    with pytest.raises(StorageError, match="could not create the store"):
        prepare_sqlite(db, "sqlite:///x")
    assert list(tmp_path.iterdir()) == []  # no half-built database, no temporary file
    monkeypatch.undo()
    prepare_sqlite(db, "sqlite:///x")
    with closing(sqlite3.connect(db)) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    assert {"alembic_version", "experiments", "runs"} <= tables
    assert [p.name for p in tmp_path.iterdir()] == ["mlflow.db"]


def test_a_store_made_from_the_template_is_the_store_mlflow_makes(tmp_path, monkeypatch):
    """The second store of a machine is a copy of the cached empty store: its default
    experiment is its own (artifact location, time), it is migrated to MLflow's head, and
    both stores write ahead (WAL)."""
    from mlflow import MlflowClient

    from tracking import sqlite_store

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    first, second = tmp_path / "a" / "mlflow.db", tmp_path / "b" / "mlflow.db"
    for db in (first, second):
        db.parent.mkdir()
        prepare_sqlite(db, f"sqlite:///{db}")
    template = sqlite_store.template_path()
    assert template is not None and template.is_file()
    with closing(sqlite3.connect(template)) as con:  # the template holds no experiment
        assert con.execute("SELECT COUNT(*) FROM experiments").fetchone()[0] == 0
    for db in (first, second):
        with closing(sqlite3.connect(db)) as con:
            assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db"]
        default = MlflowClient(f"sqlite:///{db}").get_experiment("0")
        assert default.name == "Default"
        assert default.artifact_location == (db.parent / "0").as_uri()


def test_a_half_built_store_is_detected_with_how_to_recover(tmp_path):
    db = tmp_path / "mlflow.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE experiments (id INTEGER)")
        con.execute("CREATE TABLE _alembic_tmp_experiments (id INTEGER)")
    with pytest.raises(StorageError, match=rf"half-built.*_alembic_tmp_experiments.*rm {db}"):
        prepare_sqlite(db, f"sqlite:///{db}")


def test_a_read_only_store_file_is_refused_before_any_run(tmp_path, monkeypatch):
    """Tests run as root, whom chmod does not stop: the access check is what is simulated."""
    import os

    import tracking.storage as storage

    db = tmp_path / "mlflow.db"
    prepare_sqlite(db, "sqlite:///x")
    monkeypatch.setattr(storage.os, "access", lambda path, mode: Path(path) != db)
    with pytest.raises(StorageError, match=rf"tracking.uri='sqlite:///x': {db} is read-only.*"
                                           r"Fix: make it writable"):
        prepare_sqlite(db, "sqlite:///x")
    assert os.access(tmp_path, os.W_OK)  # only the store file was refused


@pytest.mark.parametrize("failure,expect", [
    (OSError(28, "No space left on device", "{tmp}/runs/ab/predictions.jsonl"),
     "{tmp}/runs/ab/predictions.jsonl: No space left on device. It is under "
     "runner.runs_dir='{tmp}/runs'. Fix: free disk space"),
    (OSError(30, "Read-only file system", "{tmp}/cache/index/k/meta.json"),
     "{tmp}/cache/index/k/meta.json: Read-only file system. It is under cache.dir='{tmp}/cache'"
     ". Fix: make it writable for this user, or point cache.dir elsewhere"),
    (OSError(20, "Not a directory", "{tmp}/artifacts/r1/plots"),
     "It is under tracking.artifact_location='{tmp}/artifacts'. Fix: a file stands where a "
     "directory is expected"),
    (RuntimeError("(sqlite3.OperationalError) database or disk is full"),
     "{tmp}/mlflow.db: No space left on device. It is under tracking.uri="),
    (OSError(28, "No space left on device"),
     "a write failed: No space left on device (OSError: [Errno 28] No space left on device). "
     "The run writes under runner.runs_dir='{tmp}/runs'; cache.dir='{tmp}/cache'"),
])
def test_a_failed_write_names_the_path_its_key_and_the_fix(make_cfg, tmp_path, failure, expect):
    from tests.conftest import store_overrides
    from tracking.storage import storage_errors

    cfg = make_cfg(*store_overrides(tmp_path))
    if isinstance(failure, OSError) and failure.filename:
        failure.filename = failure.filename.format(tmp=tmp_path)
    with pytest.raises(StorageError) as err, storage_errors(cfg):
        raise failure
    assert expect.format(tmp=tmp_path) in str(err.value)
    assert "run the same command again" in str(err.value)


def test_other_errors_pass_through_unexplained(make_cfg):
    from tracking.storage import storage_errors

    with pytest.raises(ConnectionRefusedError), storage_errors(make_cfg()):
        raise ConnectionRefusedError(111, "Connection refused")


# --- input and config ---------------------------------------------------------------------

def test_a_utf8_bom_is_accepted(tmp_path, make_cfg):
    root = write_mini_dataset(tmp_path / "bom")
    for path in [root / "tasks.jsonl", root / "documents.jsonl",
                 *(root / "documents").glob("*.txt")]:
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    ds = load_dataset(make_cfg(f"dataset.root={root}").dataset, ROOT)
    assert [t.id for t in ds.tasks] == ["T0X_q3_2024", "T1X_q3_2024"]
    doc = ds.corpus.documents["T0X_q3_2024"]
    assert doc.lines[0] == "Good morning and welcome to the conference call."


def test_a_key_set_twice_in_a_sweep_is_an_error_with_the_merged_fix():
    with pytest.raises(ConfigError, match=r"system=naive,stuffing and system=arag both set "
                                          r"system.*Fix: system=naive,stuffing,arag"):
        job_overrides(["system=naive,stuffing", "system=arag"])
    with pytest.raises(ConfigError, match="Fix: max_loops=4,2,8"):
        job_overrides(["max_loops=4", "max_loops=2,8"])
    assert len(job_overrides(["system=arag,naive", "max_loops=2,4,8"])) == 6
    assert job_overrides(["max_loops=4", "max_loops=2"]) == [["max_loops=2"]]  # last wins


def test_an_unknown_key_suggests_the_closest_known_key():
    done = forked.run([sys.executable, "run.py", "max_lops=3"], cwd=ROOT, timeout=120)
    assert done.returncode != 0
    assert "max_lops is not a config key. Did you mean max_loops? Fix: max_loops=3" \
        in done.stderr
    assert "+max_lops" not in done.stderr


GROUP_TYPOS = {"sytem": ("system", "naiv", "naive"), "datset": ("dataset", "ectsum", "ectsum"),
               "modle": ("model", "offline", "offline"), "juge": ("judge", "none", "none"),
               "retreival": ("retrieval", "default", "default"),
               "metrcs": ("metrics", "default", "default"),
               "trackng": ("tracking", "default", "default"), "cahce": ("cache", "default", "default")}


@pytest.mark.parametrize("typo", list(GROUP_TYPOS))
def test_a_misspelt_group_gets_the_group_fix_not_a_key_inside_it(typo):
    """`sytem=naive` means the system group: `system.name=naive` would run the default
    system under another name."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import ConfigCompositionException

    from runners.cli import suggest_closest_keys

    suggest_closest_keys()
    group, typed, fixed = GROUP_TYPOS[typo]
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"), \
            pytest.raises(ConfigCompositionException) as caught:
        compose("config", overrides=[f"{typo}={typed}"])
    assert f"{typo} is not a config key. Did you mean the config group {group}? " \
           f"Fix: {group}={fixed}" in str(caught.value)


def test_a_misspelt_group_in_a_sweep_keeps_every_item_of_its_list():
    done = forked.run([sys.executable, "run.py", "-m", "sytem=arag,naiv"], cwd=ROOT, timeout=120)
    assert done.returncode != 0
    assert "Fix: system=arag,naive" in done.stderr, done.stderr[-2000:]
    assert "system.name" not in done.stderr


def test_a_misspelt_option_or_value_in_a_sweep_list_keeps_the_other_values():
    """Hydra reports the one job whose value is wrong (``system=naiv``); the fix is the
    whole list as typed, not that job's value alone (``system=naive`` drops arag)."""
    from runners.cli import unknown_option_message, unknown_value_message

    typed = ["-m", "system=arag,naiv", "dataset=sample", "retrieval.scope=document,corpsu"]
    option = unknown_option_message("system", "naiv", ["arag", "naive", "stuffing"], typed)
    assert option.endswith("Did you mean naive? Fix: system=arag,naive")
    value = unknown_value_message("retrieval.scope=corpsu", "Invalid value 'corpsu', expected "
                                  "one of [document, corpus]", typed)
    assert value is not None and value.endswith("Fix: retrieval.scope=document,corpus")
    alone = unknown_option_message("system", "naiv", ["arag", "naive"], ["system=naiv"])
    assert alone.endswith("Fix: system=naive")


def test_a_finished_run_with_judge_replies_to_ask_again_is_continued_not_reused():
    from runners.resume import nothing_to_do

    runner = SimpleNamespace(rerun=False, retry_errors=True)

    def finished(**metrics):
        return SimpleNamespace(info=SimpleNamespace(status="FINISHED"),
                               data=SimpleNamespace(metrics={"n_errors": 0.0, **metrics}))

    assert nothing_to_do(finished(judge_replies_to_ask_again=0.0), runner)
    assert not nothing_to_do(finished(judge_replies_to_ask_again=2.0), runner)
    assert nothing_to_do(finished(), runner)  # runs logged before the metric existed


def test_the_dry_run_prices_an_unreadable_reply_still_to_be_asked_again(tmp_path):
    from arag.llm.base import call_arguments
    from arag.llm.cache import is_cached

    inner, judge = _judge(tmp_path, ["no idea"], reask_unreadable=1)
    request = judge_request("grade", "summary A", 50)
    judge_calls(judge, {"x": request}, readable=_readable)
    where = (tmp_path, inner.provider, getattr(inner, "model_id", inner.name))
    assert not is_cached(*where, reask_unreadable=1, **call_arguments(request))
    assert is_cached(*where, reask_unreadable=0, **call_arguments(request))  # kept as it is


def test_a_mistyped_key_is_never_fixed_with_a_value_the_right_key_refuses(make_cfg):
    from runners.cli import unknown_key_message

    cfg = make_cfg()
    message = unknown_key_message("model.temperature=nan", cfg)
    assert "Did you mean system.temperature? Fix: system.temperature=" in message
    assert "system.temperature=nan" not in message
    assert "nan is refused there too: it must be a finite number" in message
    for bad in ("inf", "-1"):
        assert f"system.temperature={bad}" not in unknown_key_message(
            f"model.temperature={bad}", cfg)
    # a value the key takes is kept as typed
    assert "Fix: system.temperature=0.7" in unknown_key_message("model.temperature=0.7", cfg)
    assert "Fix: max_loops=3" in unknown_key_message("max_lops=3", cfg)
