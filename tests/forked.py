"""The end-to-end tests' command runner: `python run.py ...` (and `python -m report ...`)
started from a process that has already imported the libraries every run imports.

A run's imports (torch, transformers, sentence-transformers, scikit-learn, scipy, MLflow,
bert-score, FAISS, ...) are most of a small sweep's time on a 2-core machine, and the
end-to-end tests start about a hundred runs. Here
each run is a fresh process forked from one Python process that imported those libraries
once (`multiprocessing`'s forkserver with a preload list): the command's own code runs from
its first line (`runpy`, as `python run.py` does), with its argv, working directory,
environment, stdin from /dev/null, stdout and stderr to files, and the exit handlers a
finishing interpreter runs. Nothing of the project is imported before the command starts.

A command falls back to a real `subprocess.run` when forking could change what it sees:
- it is not this interpreter running a script or a module;
- its environment differs from the fork server's in a variable a library reads when it is
  imported (the Hugging Face, torch, OpenMP/BLAS, matplotlib and cache-location ones);
- it starts other interpreters of its own (a joblib, submitit or Ray launcher);
- `ARAG_TESTS_FORK=0` is set (every command then runs as a real process).
`ARAG_TESTS_FORK_LOG=<file>` appends a line a command: forked, or why not.
Tests whose promise is a fresh shell (tests/test_front_door.py) run real processes anyway.
"""

from __future__ import annotations

import atexit
import io
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

PRELOAD = ["numpy", "scipy.stats", "torch", "transformers", "sentence_transformers",
           "sklearn.metrics", "mlflow", "mlflow.store.tracking.sqlalchemy_store", "matplotlib",
           "bert_score", "hydra", "omegaconf", "faiss", "anthropic", "openai", "httpx",
           "rouge_score.rouge_scorer", "sqlalchemy", "alembic", "pandas", "jinja2", "tqdm"]
# read by a preloaded library when it is imported: a command that sets them differently
# gets a real process
IMPORT_TIME_ENV = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TORCH", "PYTORCH", "OMP_", "MKL_",
                   "OPENBLAS_", "MPL", "XDG_", "HOME", "PYTHON", "LD_", "CUDA", "TOKENIZERS_",
                   "SENTENCE_TRANSFORMERS", "TQDM_")
# under a prefix above, but set by torch itself in the test process (its compile cache) and
# read when used, never when imported; or read at import into a constant the child sets again
# from the command's environment (``_reread``): the harness's quiet console sets the last one
NOT_IMPORT_TIME = ("TORCHINDUCTOR_", "HF_HUB_DISABLE_PROGRESS_BARS")
SPAWNING = ("hydra/launcher=",)

_context: Any = None
_server_env: dict[str, str] = {}


def _import_time_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items()
            if k.startswith(IMPORT_TIME_ENV) and not k.startswith(NOT_IMPORT_TIME)}


def _forkable(cmd: list[str], env: dict[str, str]) -> bool:
    why = _why_not(cmd, env)
    if os.environ.get("ARAG_TESTS_FORK_LOG"):  # which commands ran how, and why
        with open(os.environ["ARAG_TESTS_FORK_LOG"], "a") as log:
            log.write(f"{why or 'forked'}\t{' '.join(cmd[1:4])}\n")
    return why is None


def _why_not(cmd: list[str], env: dict[str, str]) -> str | None:
    if os.environ.get("ARAG_TESTS_FORK", "1") == "0" or sys.platform != "linux":
        return "off"
    if len(cmd) < 2 or cmd[0] != sys.executable:
        return "not this interpreter"
    if not (cmd[1].endswith(".py") or (cmd[1] == "-m" and len(cmd) > 2)):
        return "not a script or module"
    if any(arg.startswith(SPAWNING) for arg in cmd):
        return "a launcher"
    snapshot()
    changed = sorted(k for k in set(_import_time_env(env)) | set(_import_time_env(_server_env))
                     if env.get(k) != _server_env.get(k))
    return f"import-time variables changed: {', '.join(changed)}" if changed else None


def snapshot() -> None:
    """Keep this environment as the fork server's (conftest calls it when the test session
    starts, before a test changes a variable): the server starts with it, at the first
    command, whatever the test that asks first has set."""
    global _server_env
    if not _server_env:
        _server_env = dict(os.environ)


def _server() -> Any:
    global _context
    if _context is None:
        snapshot()
        from multiprocessing import forkserver

        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        current = dict(os.environ)
        os.environ.clear()
        os.environ.update(_server_env)
        try:
            forkserver.ensure_running()
        finally:
            os.environ.clear()
            os.environ.update(current)
        _context = context
    return _context


def _child(cmd: list[str], cwd: str, env: dict[str, str], out: str, err: str,
           new_session: bool = False) -> None:
    """In the forked process: become `cmd` and exit as the interpreter would."""
    code: Any = 0
    try:
        if new_session:
            os.setsid()
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        _reread()
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                                (1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            opened = os.open(path, flags, 0o644)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = sys.__stdin__ = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = sys.__stdout__ = io.TextIOWrapper(open(1, "wb", closefd=False),  # noqa: SIM115
                                                       encoding="utf-8")
        sys.stderr = sys.__stderr__ = io.TextIOWrapper(open(2, "wb", closefd=False),  # noqa: SIM115
                                                       encoding="utf-8", errors="backslashreplace",
                                                       line_buffering=True)
        if cmd[1] == "-m":
            sys.argv = [cmd[2], *cmd[3:]]
            sys.path[0] = cwd
            runpy.run_module(cmd[2], run_name="__main__", alter_sys=True)
        else:
            script = str(Path(cwd, cmd[1]).resolve())
            sys.argv = [cmd[1], *cmd[2:]]
            sys.path[0] = str(Path(script).parent)
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - the interpreter prints it and exits 1
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001, S110 - a closed stream has nothing to flush
                pass
        os._exit(code)


def _reread() -> None:
    """In the child: the import-time constants ``NOT_IMPORT_TIME`` exempts, read again from
    the command's environment. huggingface_hub reads its progress-bar switch once, when
    imported, into its constants and into its tqdm module (which its bars check)."""
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is None:
        return
    value = os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS")
    read = None if value is None else constants._is_true(value)  # as the hub reads it
    for name in ("huggingface_hub.constants", "huggingface_hub.utils.tqdm"):
        if (module := sys.modules.get(name)) is not None:
            module.HF_HUB_DISABLE_PROGRESS_BARS = read  # type: ignore[attr-defined]


def _read(path: str) -> str:
    """What a command wrote to ``path`` ("" for /dev/null or nothing written)."""
    if path == os.devnull or not Path(path).exists():
        return ""
    return Path(path).read_text(encoding="utf-8", errors="replace")


def run(cmd: list[str], *, cwd: Path | str, env: dict[str, str] | None = None,
        timeout: float = 900, **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, cwd=..., env=..., capture_output=True, text=True,
    stdin=DEVNULL, timeout=...)``, forked from the preloaded server where that is the same."""
    env = dict(os.environ if env is None else env)
    cmd = [str(c) for c in cmd]
    if not _forkable(cmd, env):
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout, **kwargs)
    server = _server()
    with tempfile.TemporaryDirectory(prefix="forked-") as tmp:
        out, err = f"{tmp}/stdout", f"{tmp}/stderr"
        proc = server.Process(target=_child, args=(cmd, str(cwd), env, out, err))
        proc.start()
        proc.join(timeout)
        if proc.is_alive():
            proc.kill()
            proc.join()
            raise subprocess.TimeoutExpired(cmd, timeout)
        code = proc.exitcode if proc.exitcode is not None else -9
        return subprocess.CompletedProcess(cmd, code, _read(out), _read(err))


class Popen:
    """``subprocess.Popen(cmd, cwd=..., env=..., stdin=DEVNULL, stdout=..., stderr=...,
    start_new_session=...)`` for the commands `run` forks: the end-to-end tests that kill a
    run mid-way (``pid``, ``poll``, ``wait``, ``kill``, ``communicate``; stdout and stderr
    DEVNULL or PIPE). A new session makes the run its own process group (``os.killpg``)."""

    def __init__(self, cmd: list[str], *, cwd: Path | str, env: dict[str, str] | None = None,
                 stdout: Any = None, stderr: Any = None, start_new_session: bool = False,
                 **kwargs: Any) -> None:
        env = dict(os.environ if env is None else env)
        kwargs.pop("stdin", None)  # always /dev/null, as the tests ask
        self.args = [str(c) for c in cmd]
        self._real: subprocess.Popen | None = None
        self._returncode: int | None = None
        streams_ok = all(s in (None, subprocess.DEVNULL, subprocess.PIPE) for s in (stdout, stderr))
        if not (streams_ok and _forkable(self.args, env)):
            self._real = subprocess.Popen(self.args, cwd=cwd, env=env, stdout=stdout, stderr=stderr,
                                          stdin=subprocess.DEVNULL,
                                          start_new_session=start_new_session, **kwargs)
            self.pid = self._real.pid
            return
        server = _server()
        self._tmp = tempfile.TemporaryDirectory(prefix="forked-")
        self._out = f"{self._tmp.name}/stdout" if stdout == subprocess.PIPE else os.devnull
        self._err = f"{self._tmp.name}/stderr" if stderr == subprocess.PIPE else os.devnull
        self._proc = server.Process(target=_child, args=(self.args, str(cwd), env, self._out,
                                                         self._err, start_new_session))
        self._proc.start()
        self.pid = self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._real.returncode if self._real is not None else self._returncode

    def poll(self) -> int | None:
        if self._real is not None:
            return self._real.poll()
        if not self._proc.is_alive():
            self._returncode = self._proc.exitcode
        return self._returncode

    def wait(self, timeout: float | None = None) -> int:
        if self._real is not None:
            return self._real.wait(timeout)
        self._proc.join(timeout)
        if self._proc.is_alive():
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self._returncode = self._proc.exitcode if self._proc.exitcode is not None else -9
        return self._returncode

    def kill(self) -> None:
        if self._real is not None:
            self._real.kill()
        elif self._proc.is_alive():
            self._proc.kill()

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        if self._real is not None:
            return self._real.communicate(timeout=timeout)
        self.wait(timeout)
        return _read(self._out), _read(self._err)
