"""Quiet logs (``runner.verbose``: 0 our own INFO lines and one progress bar per job, 1 the
libraries' INFO lines, 2 DEBUG), and each warning printed once per command."""

from __future__ import annotations

import logging
import os
import sys
from typing import ClassVar

# libraries whose INFO lines are noise at verbosity 0 (httpx: one line per HTTP request)
# (anthropic 2.x sends through httpx2, which logs one INFO line per request)
NOISY = ("httpx", "httpx2", "httpcore", "anthropic", "openai", "absl", "mlflow", "alembic",
         "sentence_transformers", "transformers", "huggingface_hub", "urllib3", "filelock",
         "matplotlib", "faiss")


def quiet(verbose: int = 0, tracking: bool = True) -> None:
    """Set the libraries' log levels and progress bars for ``runner.verbose``; ``tracking``
    false (a dry run, which never reaches MLflow) spares importing MLflow (~2.5 s)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if verbose < 1:
        os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        if "transformers" in sys.modules:  # read once at import: switch it off directly
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
    if tracking:
        import mlflow  # noqa: F401 - it sets its own logger's level on import: import it first

    level = logging.DEBUG if verbose >= 2 else logging.INFO if verbose == 1 else logging.WARNING
    for name in NOISY:
        logging.getLogger(name).setLevel(level)
    if verbose >= 2:
        logging.getLogger().setLevel(logging.DEBUG)
    for handler in logging.getLogger().handlers:  # Hydra sets them up anew for each job
        if _to_terminal(handler) and not any(isinstance(f, OncePerCommand)
                                             for f in handler.filters):
            handler.addFilter(OncePerCommand())


class OncePerCommand(logging.Filter):
    """A warning the command already printed is not printed again: the sweep's preflight
    and then each of its jobs check the same data (the context-budget warning came six
    times for three systems). Shared by every handler of the process, so one per command
    (a job in a process of its own, joblib's, prints its own once)."""

    printed: ClassVar[set[str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        text = record.getMessage()
        if text in self.printed:
            return False
        self.printed.add(text)
        return True


def _to_terminal(handler: logging.Handler) -> bool:
    """The console's handler (not a log file's, which keeps every line)."""
    return isinstance(handler, logging.StreamHandler) and \
        getattr(handler, "stream", None) in (sys.stderr, sys.stdout, sys.__stderr__)
