"""Hydra callback: one MLflow parent run per multirun, opened before any job starts.

Every job of the sweep is checked first (``runners.preflight``: overrides, values,
credentials, storage, data), so a sweep that fails validation leaves no run. Opening the
parent first also creates the sqlite schema, so parallel jobs (joblib launcher) never race
to migrate a fresh store. Jobs find the parent through ``mlflow_parent.json`` in the sweep
directory (works across processes). The sweep holds a lock on its folder and on each job's
predictions (``runners.sweeplock``): a second identical sweep stops at once, naming the
first. When the sweep ends the parent gets the comparison of its children and is closed:
FAILED if any job failed (and the command then exits non-zero), FINISHED otherwise. A
crash of the sweep itself closes it as FAILED; a parent whose process was killed is
closed KILLED by the next sweep on the same machine.

A re-run of a sweep whose every job FINISHED opens no parent when a finished parent holds
the report of exactly those runs (tag ``report_runs``) written with the same report options
(tag ``report_options``: ``report.decide_on``, the labels file's content, ...): it prints
that report's verdict again. Otherwise (the sweep that ran them was killed while writing it,
or the command gives other report options) it opens one and writes a new report of those
runs, never overwriting another sweep run's; jobs whose parent never finished move under it.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import signal
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hydra.errors import ConfigCompositionException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from arag.datasets import DatasetError
from arag.llm.base import MissingCredentials
from arag.memory import settle_imports
from arag.redact import keys_with_credentials, redact, redact_logs
from report import console, overview
from report.baseline import claims, run_comparison
from report.baseline_report import compare_and_publish, options_from
from report.report import (
    REPORT_OPTIONS_TAG,
    options_key,
    write_sweep_report,
)
from runners import dryrun, pairwise
from runners.cli import INTERRUPTED
from runners.cores import share_cores
from runners.endpoints import check_endpoints
from runners.errors import show_trace
from runners.job import load_tasks
from runners.naming import experiment_name, sweep_labels, sweep_run_name
from runners.preflight import (
    all_finished,
    check_jobs,
    check_labels,
    credentials_message,
    job_configs,
    prediction_folders,
)
from runners.scoring import DATASET_DIGEST_PARAM
from runners.settings import Settings
from runners.sweeplock import FolderLocks, SweepBusy, hold
from runners.validation import ConfigError
from tracking import runs as track
from tracking.human_labels import LabelsError, read_labels_file
from tracking.logs import quiet
from tracking.paths import resolve
from tracking.storage import explain_write_failure, server_gone
from tracking.sweeps import PARENT_ROLE, find_sweep, set_description_section

log = logging.getLogger(__name__)
REPORT_RUNS_TAG = "report_runs"  # which job runs the parent's report covers (runs_key)
# what the sweep is (its jobs' config hashes and its report options): a killed parent with
# the same key is continued by the next run of the same command
SWEEP_KEY_TAG = "sweep_key"


def swept_keys(overrides: list[str]) -> list[str]:
    """The keys a sweep varies (``system=a,b``, ``max_loops=3,6``): they name the child runs."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    return [o.key_or_group for o in parsed if o.is_sweep_override()]


class MLflowSweepCallback(Callback):
    def __init__(self) -> None:
        self.parent: dict[str, Any] | None = None
        self.client: Any = None
        self.sweep_dir: Path | None = None
        self.result: Any = None  # the sweep report's findings, for the console's verdict
        self.earlier: list[Any] = []  # parents holding a finished sweep's verdict (re-run)
        self.locks = FolderLocks()
        self.report_cfg: Any = None  # the ``report`` node: the baseline to compare with
        self.storage_cfg: Any = None  # the sweep's config: where its files are written
        self.baseline_exit = 0  # the baseline comparison's exit status (report.baseline_report)
        self.baseline_text = ""  # what it decided, for the console
        self.jobs: list[Settings] = []  # every job's settings, checked before the parent opens
        self.decide_on: list[str] = []  # report.decide_on: what the verdict decides on
        self.human_labels: str | None = None  # report.human_labels: people's labels file
        self.file_labels: dict[str, str] = {}  # prediction file -> its run's name (naming.py)
        self.configs: list[DictConfig] = []  # every job's config, as the task function gets it
        self.interrupted = False  # Ctrl-C: the parent ends KILLED, and is continued

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A single run: URL credentials in a config file stop it before Hydra writes the
        config to its output directory."""
        redact_logs()
        leaked = keys_with_credentials(OmegaConf.to_container(config, resolve=False))
        if leaked:
            log.error("%s", credentials_message(leaked))
            raise SystemExit(2)
        if config.report.baseline:
            log.error("report.baseline=%s compares a sweep with a sweep. Fix: run with -m "
                      "(python run.py -m ...)", config.report.baseline)
            raise SystemExit(2)
        if config.runner.get("sequential"):
            log.error("runner.sequential=true compares the systems of a sweep. Fix: run with "
                      "-m and two or more systems (python run.py -m system=arag,naive ...)")
            raise SystemExit(2)
        if config.report.get("human_labels"):
            log.error("report.human_labels=%s holds a sweep's judge against people's labels. "
                      "Fix: run with -m (python run.py -m ...)", config.report.human_labels)
            raise SystemExit(2)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # Hydra turns a callback's exception into a warning and runs the jobs anyway (with
        # no parent run and no lock): every failure here stops the sweep before any job
        try:
            self._start(config)
        except SystemExit:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever it is, no job may run after it
            self.locks.release()
            log.debug("the sweep could not start", exc_info=True)
            log.error("the sweep could not start, no job ran: %s", one_line(exc))
            raise SystemExit(2) from None

    def _start(self, config: DictConfig) -> None:
        quiet(config.runner.verbose, tracking=not config.runner.dry_run)
        redact_logs()
        settle_imports()  # MLflow and the harness imported, the sweep composed
        share_cores(config.hydra.get("launcher"))  # before the launcher starts any job
        sweep_dir = Path(config.hydra.sweep.dir)
        self.sweep_dir = sweep_dir
        self.decide_on = list(config.report.decide_on)
        self.human_labels = config.report.get("human_labels")
        try:  # every check before the parent run opens: a sweep that fails leaves no run
            labels = read_labels_file(self.human_labels) if self.human_labels else []
            configs = job_configs(config)
            # no two runs share a name (and so parent metrics); prediction files whose
            # stems collide are named after their folders
            self.file_labels = sweep_labels(configs, swept_keys(list(
                OmegaConf.select(config, "hydra.overrides.task", default=[]))))
            self.configs = configs
            jobs = check_jobs(configs, dry_run=bool(config.runner.dry_run))
            if self.human_labels:  # labels of what this sweep's judge will score, or none
                check_labels(self.human_labels, labels, jobs)
            if config.runner.get("sequential") and len(jobs) < 2:
                raise ConfigError("runner.sequential=true stops when the comparisons between "
                                  "systems are settled, and this sweep has one job. Fix: sweep "
                                  "two or more, e.g. system=arag,naive")
        except (ConfigError, DatasetError, MissingCredentials, LabelsError) as exc:
            log.error("%s", exc, exc_info=show_trace())
            # Hydra turns callback exceptions into warnings; SystemExit sets the exit code
            raise SystemExit(2) from None
        except ConfigCompositionException as exc:
            log.error("a job of the sweep cannot be composed: %s", exc)
            raise SystemExit(2) from None
        sweep_dir.mkdir(parents=True, exist_ok=True)
        self.jobs = jobs
        if config.runner.dry_run:
            dryrun.start_sweep(sweep_dir)
            return  # a dry run calls no model and records nothing
        try:  # no other sweep writes these predictions or into this folder meanwhile
            self.locks = hold({**prediction_folders(jobs), sweep_dir: "the sweep folder"})
        except SweepBusy as exc:
            log.error("%s", exc)
            raise SystemExit(1) from None
        clear_sweep_files(sweep_dir)
        try:
            self._open_parent(config, sweep_dir, jobs)
        except (track.TrackingError, ConfigError) as exc:  # SweepNotFound among them
            log.error("%s", exc)
            raise SystemExit(2) from None
        signal.signal(signal.SIGINT, self._on_interrupt)  # Ctrl-C: the parent ends KILLED

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        self.interrupted = True
        raise KeyboardInterrupt

    def _open_parent(self, config: DictConfig, sweep_dir: Path, jobs: list[Settings]) -> None:
        self.client = track.connect(config.tracking)
        self.report_cfg = config.report
        self.storage_cfg = config  # the keys a failed write of the report is named by
        name = experiment_name(self.configs or [config])
        experiment_id = track.ensure_experiment(self.client, name, config.tracking)
        overrides = list(config.hydra.overrides.task)
        swept = swept_keys(overrides)
        sweep_id = f"{sweep_dir.parent.name}_{sweep_dir.name or 'sweep'}"
        info = {"run_id": None, "experiment_id": experiment_id, "sweep_id": sweep_id,
                "sweep_dir": str(sweep_dir), "swept_keys": swept, "file_labels": self.file_labels,
                "n_jobs": len(jobs)}  # for the progress bars' "job 2/3"
        finished = all_finished(self.client, experiment_id, jobs)
        options = options_key(self._report_options(), self.decide_on, self.human_labels)
        reported = finished and reporting_parent(self.client, experiment_id, finished, options)
        key = runs_key([*(job.config_hash for job in jobs), options])
        if config.report.baseline:  # a baseline that is not another finished sweep: refused
            check_baseline(self.client, str(config.report.baseline),
                           runs_key(r.info.run_id for r in finished) if finished else None,
                           reported.info.run_id if reported else None)
        if not (finished and reported) and config.runner.check_endpoints:
            check_endpoints(jobs)  # an endpoint that does not answer stops it before any job
        if finished and reported:  # a re-run of a finished sweep opens no empty parent
            close_dead_parents(self.client, experiment_id, None)
            self.earlier = [reported]
            log.info("every job of this sweep already FINISHED (runs %s); nothing to do, no "
                     "new parent run. runner.rerun=true runs them again",
                     ", ".join(r.info.run_id for r in finished))
            (sweep_dir / track.PARENT_FILE).write_text(json.dumps(info))
            return
        other = finished and reporting_parent(self.client, experiment_id, finished)
        if other:
            log.info("every job of this sweep already FINISHED; sweep run %s holds their report "
                     "with other report options (report.decide_on, report.human_labels, ...): "
                     "a new report of those runs, with this command's, under a new sweep run",
                     other.info.run_id)
        elif finished:
            log.info("every job of this sweep already FINISHED, but no sweep run holds their "
                     "report (the sweep was stopped while writing it): writing it now")
        tags = {"sweep_id": sweep_id, "sweep_overrides": redact(" ".join(overrides)),
                "sweep_command": redact(" ".join(["python run.py -m", *overrides])),
                "sweep_dir": str(sweep_dir.resolve()), "sweep_host": socket.gethostname(),
                "sweep_pid": str(os.getpid()), SWEEP_KEY_TAG: key,
                "git_commit": track.git_commit(), "role": PARENT_ROLE}
        run_id = continued_parent(self.client, experiment_id, key, tags)
        if run_id is None:
            run_id = self.client.create_run(
                experiment_id, tags=tags,
                run_name=sweep_run_name(self.configs or [config], swept, self.file_labels),
            ).info.run_id
            self.client.log_param(run_id, DATASET_DIGEST_PARAM, sweep_digest(jobs))
            log_sweep_datasets(self.client, run_id, experiment_id, jobs)
        close_dead_parents(self.client, experiment_id, run_id)
        self.parent = {**info, "run_id": run_id}
        (sweep_dir / track.PARENT_FILE).write_text(json.dumps(self.parent))
        atexit.register(self._close_if_open)
        log.info("MLflow parent run %s (experiment %r, sweep %s)", run_id, name, sweep_id)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        # as at the start: a failure while closing the sweep must not exit 0 as a warning
        try:
            self._end(config)
        except SystemExit:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever it is, the command must fail
            log.debug("the sweep could not be closed", exc_info=True)
            gone = server_gone(exc, str(config.tracking.uri))
            log.error("the sweep could not be closed: %s", gone or one_line(exc))
            raise SystemExit(1) from None
        finally:
            self.locks.release()

    def _end(self, config: DictConfig) -> None:
        failures = _read_failures(self.sweep_dir) if self.sweep_dir else []
        report_error = None
        if self.parent and self.client is not None:
            report_error = self._close_parent(failures)
        self.locks.release()
        if self.result is not None:
            print(console.verdict(self.result, str(config.tracking.uri)), flush=True)
        for run in self.earlier:  # nothing ran: the verdict the sweep already has, again
            print("\n".join(["", f"Nothing new to compare: the verdict of these runs is on "
                              f"sweep run {run.info.run_id} ({run.info.run_name}):", "",
                              *console.stored_verdict(run),
                              *console.where_to_look(f"{run.info.artifact_uri}/report.html",
                                                     str(config.tracking.uri),
                                                     run.info.experiment_id, run.info.run_id)]),
                  flush=True)
            self._compare_with_baseline(run.info.run_id)  # a CI re-run is gated all the same
        if config.runner.dry_run and self.sweep_dir:
            pairwise.estimate_pairs(self.sweep_dir, self.jobs)
            print(dryrun.sweep_total(self.sweep_dir, config.runner), flush=True)
        if self.baseline_text:
            print(self.baseline_text, flush=True)
        if failures:
            lines = "\n".join(f"  [{f['job']}] {f['error']}" for f in failures)
            log.error("%d job(s) of the sweep failed:\n%s", len(failures), lines)
            # Hydra turns callback exceptions into warnings; SystemExit sets the exit code
            raise SystemExit(1)
        if report_error:
            log.error("%s", report_error)
            raise SystemExit(1)
        if self.baseline_exit:  # a regression (3), inconclusive (4) or refused (2)
            raise SystemExit(self.baseline_exit)

    def _close_parent(self, failures: list[dict[str, str]]) -> str | None:
        """Report, then close the parent; what went wrong with the report (None: nothing)."""
        assert self.parent is not None
        try:  # judged across runs, so before the report that shows it
            pairwise.judge_pairs(self.client, self.parent, self.jobs)
        except Exception as exc:  # noqa: BLE001 - the report and the runs stand without it
            log.exception("could not judge the sweep's pairs")
            self.client.set_tag(self.parent["run_id"], "pairwise_error",
                                f"{type(exc).__name__}: {exc}"[:5000])
        report_error = None
        # compared first, so the report's answer states a regression against the baseline
        comparison = None if failures else self._baseline_comparison(self.parent["run_id"])
        try:
            self.result = write_sweep_report(
                self.client, self.parent, self.decide_on, self.human_labels,
                self._report_options(), claims(comparison) if isinstance(comparison, dict) else [])
            self.client.set_tag(self.parent["run_id"], REPORT_RUNS_TAG,
                                runs_key(row["run_id"] for row in self.result.rows))
            overview.publish(self.client, self.result)  # the verdict, first thing in the UI
        except Exception as exc:  # noqa: BLE001 - a report problem must not hide the result
            # a full disk names the path and the key that chose it; anything else its trace
            explained = explain_write_failure(exc, self.storage_cfg) \
                if self.storage_cfg is not None else None
            if explained is None:
                log.exception("could not build the sweep comparison")
            # visible on the parent: rebuild with python -m report <parent run id>
            self.client.set_tag(self.parent["run_id"], "report_error",
                                str(explained or f"{type(exc).__name__}: {exc}")[:5000])
            report_error = (f"the sweep report could not be written ("
                            f"{explained or one_line(exc)}); the jobs' runs are kept. Fix the "
                            f"cause, then rebuild it: python -m report {self.parent['run_id']}")
            set_description_section(self.client, self.parent["run_id"], REPORT_FAILED, (
                f"The sweep report could not be written: `{explained or one_line(exc)}`. The "
                "jobs' runs are kept. Fix the cause, then finish it with "
                f"`python -m report {self.parent['run_id']}`."))
        if failures:
            self.client.set_tag(self.parent["run_id"], "failed_jobs",
                                json.dumps(failures)[:5000])
        else:
            self._compare_with_baseline(self.parent["run_id"], comparison)
        # FAILED until its report is written: python -m report <parent> ends it FINISHED
        self.client.set_terminated(self.parent["run_id"],
                                   "FAILED" if failures or report_error else "FINISHED")
        self.parent = None
        return report_error

    def _report_options(self) -> dict[str, Any]:
        """The sweep's ``report`` node as plain data, for the report's analyses."""
        if self.report_cfg is None:
            return {}
        return dict(OmegaConf.to_container(self.report_cfg, resolve=True))  # type: ignore[arg-type]

    def _baseline_comparison(self, run_id: str) -> dict[str, Any] | Exception | None:
        """The sweep held against ``report.baseline``, not yet logged; None without a
        baseline; where it is refused or fails, why (``_compare_with_baseline`` says it,
        without loading the two sweeps again)."""
        if self.report_cfg is None or not self.report_cfg.baseline:
            return None
        try:
            return run_comparison(self.client, str(self.report_cfg.baseline), run_id,
                                  options_from(self.report_cfg))
        except Exception as exc:  # noqa: BLE001 - refused or failed: said when it is logged
            return exc

    def _compare_with_baseline(self, run_id: str,
                               comparison: dict[str, Any] | Exception | None = None) -> None:
        """Hold the sweep (its parent ``run_id``) against ``report.baseline`` (``comparison``:
        already made) and log it; the exit status is the decision's."""
        if self.report_cfg is None or not self.report_cfg.baseline:
            return
        try:
            self.baseline_exit, self.baseline_text = compare_and_publish(
                self.client, str(self.report_cfg.baseline), run_id, options_from(self.report_cfg),
                comparison=comparison)
        except Exception as exc:  # noqa: BLE001 - the sweep's own results stand; exit 1
            log.exception("could not compare the sweep with its baseline")
            self.client.set_tag(run_id, "baseline_error",
                                f"{type(exc).__name__}: {exc}"[:5000])
            self.baseline_exit = 1

    def _close_if_open(self) -> None:
        """At exit with the parent still open: KILLED when interrupted (the same command
        continues in it), FAILED otherwise."""
        if self.parent and self.client is not None:
            run_id = self.parent["run_id"]
            try:
                if self.interrupted:
                    set_description_section(self.client, run_id, STOPPED,
                                            f"{INTERRUPTED} (it continues in this run).")
                self.client.set_terminated(run_id, "KILLED" if self.interrupted else "FAILED")
            except Exception:  # noqa: BLE001 - best effort at interpreter exit
                pass


REPORT_FAILED = "### The report failed"
STOPPED = "### Stopped"


def check_baseline(client: Any, ref: str, runs: str | None, reported: str | None) -> None:
    """``report.baseline`` names another finished sweep: not this one (the parent holding
    this sweep's report, or one reporting the very runs it reuses, ``runs``: compared with
    itself a sweep passes and would write onto its baseline), nor a parent that never
    finished; else ConfigError with the fix, before any job."""
    base = find_sweep(client, ref)
    run_id, status = base.info.run_id, base.info.status
    if run_id == reported or (runs and base.data.tags.get(REPORT_RUNS_TAG) == runs):
        raise ConfigError(f"report.baseline={ref!r} is this sweep itself (run {run_id}): a "
                          "sweep compared with itself finds no regression. Fix: "
                          "report.baseline=<the parent run id of an earlier sweep>")
    if status != "FINISHED":
        raise ConfigError(f"report.baseline={ref!r} is sweep run {run_id}, which is {status}, "
                          "not a finished sweep. Fix: finish it (run its command again) or "
                          "name a finished sweep (MLflow UI: a FINISHED parent's Run ID)")


def continued_parent(client: Any, experiment_id: str, key: str, tags: dict[str, str]
                     ) -> str | None:
    """The parent a killed run of this same sweep left (KILLED, or RUNNING with its process
    gone), reopened with this process's tags; None when there is none."""
    host = socket.gethostname()
    for run in client.search_runs(
            [experiment_id], filter_string=f"tags.role = '{PARENT_ROLE}' and "
            f"tags.{SWEEP_KEY_TAG} = '{key}'", order_by=["attributes.start_time DESC"],
            max_results=20):
        status, run_tags = run.info.status, run.data.tags
        dead = status == "RUNNING" and run_tags.get("sweep_host") == host and not _alive(
            int(run_tags.get("sweep_pid") or 0))
        if status == "KILLED" or dead:
            client.update_run(run.info.run_id, status="RUNNING")
            for name, value in {**tags, "continued": str(int(run_tags.get("continued", "0"))
                                                         + 1)}.items():
                client.set_tag(run.info.run_id, name, value)
            if "superseded_by" in run_tags:
                client.delete_tag(run.info.run_id, "superseded_by")
            set_description_section(client, run.info.run_id, STOPPED, "Continued by the same "
                                    "command after it was stopped.")
            log.info("continuing sweep run %s, stopped before it finished", run.info.run_id)
            return str(run.info.run_id)
        if status == "FINISHED":
            return None  # a later run finished: a killed one before it stays as it was
    return None


def log_sweep_datasets(client: Any, run_id: str, experiment_id: str, jobs: list[Settings]
                       ) -> None:
    """Each dataset of the sweep as the parent's MLflow dataset input (the run list's
    Dataset column), with the digest and counts its jobs read."""
    tracker = track.RunTracker(client, run_id, experiment_id)
    seen: set[str] = set()
    for job in jobs:
        cfg = job.config
        if job.dataset_digest in seen:
            continue
        seen.add(job.dataset_digest or "")
        data = load_tasks(cfg, call_models=False)  # read once per process: this is a look-up
        tracker.log_dataset(data.name, data.digest, resolve(cfg.dataset.root),
                            {"n_documents": len(data.corpus.documents),
                             "n_tasks": len(data.tasks)})


def sweep_digest(jobs: list[Settings]) -> str:
    """The dataset digest of the sweep's jobs: one when they read the same data, else every
    distinct one, comma-separated (a sweep over ``dataset=a,b``)."""
    return ",".join(sorted({job.dataset_digest or "" for job in jobs}))


def one_line(exc: BaseException) -> str:
    """An exception as one line of the log, credentials in URLs redacted."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return redact(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)[:500]


def runs_key(run_ids: Iterable[str]) -> str:
    """One value for a set of job runs: what a sweep parent's report covers."""
    return hashlib.sha256(" ".join(sorted(set(run_ids))).encode()).hexdigest()[:32]


def reporting_parent(client: Any, experiment_id: str, runs: list[Any],
                     options: str | None = None) -> Any | None:
    """The latest FINISHED sweep parent whose report covers exactly these runs, written
    with the report options ``options`` (``report.report.options_key``; None: any), or None
    (its sweep was stopped before the report was written, or no report has those options).
    A parent written before reports recorded their options counts as one with none set."""
    key = runs_key(r.info.run_id for r in runs)
    found = client.search_runs(
        [experiment_id], filter_string=f"tags.role = 'sweep_parent' and tags.{REPORT_RUNS_TAG}"
        f" = '{key}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"], max_results=100)
    unset = options_key(None, [], None)
    return next((r for r in found if options is None
                 or r.data.tags.get(REPORT_OPTIONS_TAG, unset) == options), None)


def close_dead_parents(client: Any, experiment_id: str, successor: str | None) -> None:
    """Parents left RUNNING by a sweep process of this machine that no longer exists (killed
    before any job ran, or while it closed) are closed KILLED, so no run stays RUNNING
    forever. ``successor`` is the new parent, None when the re-run had nothing to do."""
    host = socket.gethostname()
    for run in client.search_runs([experiment_id], filter_string="tags.role = 'sweep_parent' "
                                  "and attributes.status = 'RUNNING'", max_results=1000):
        tags = run.data.tags
        if run.info.run_id == successor or tags.get("sweep_host") != host:
            continue
        if not _alive(int(tags.get("sweep_pid") or 0)):
            client.set_tag(run.info.run_id, "superseded_by",
                           successor or "a re-run with every job already FINISHED")
            client.set_terminated(run.info.run_id, "KILLED")


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def clear_sweep_files(sweep_dir: Path) -> None:
    """A sweep folder used again (a fixed ``hydra.sweep.dir``) starts with no failures or
    reused runs of the sweep that used it before."""
    for name in (track.FAILED_JOBS_FILE, track.REUSED_RUNS_FILE, track.PARENT_FILE):
        (sweep_dir / name).unlink(missing_ok=True)


def _read_failures(sweep_dir: Path) -> list[dict[str, str]]:
    path = sweep_dir / track.FAILED_JOBS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
