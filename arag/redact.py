"""Credentials in URLs never reach a file or a log: ``http://user:pass@host`` is written as
``http://***@host`` everywhere (configs, params, tags, artifacts, logs).

A URL with credentials given on the command line is redacted before Hydra reads the
command line (``stash_credentials``), so Hydra's own files (``.hydra/*.yaml``,
``multirun.yaml``) and every config built from it hold only the redacted form; the real
URL stays in this process's environment (``ARAG_URL_CREDENTIALS``, inherited by a
launcher's worker processes) and is put back only where a connection is made
(``reveal``). API keys belong in their environment variable, not in a URL.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable
from typing import Any

MASK = "***"
ENV_VAR = "ARAG_URL_CREDENTIALS"
# scheme://userinfo@ : the userinfo (user, user:password) is what is hidden
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://)([^/\s@'\"]+)@")


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``."""
    return _USERINFO.sub(rf"\g<1>{MASK}@", text) if "@" in text else text


def redact_data(data: Any) -> Any:
    """A copy of nested dicts/lists/strings with every URL's credentials redacted."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {k: redact_data(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [redact_data(v) for v in data]
    return data


def has_credentials(text: str) -> bool:
    """Whether ``text`` holds a URL with credentials that are not yet redacted."""
    return any(m.group(2) != MASK for m in _USERINFO.finditer(text))


def stash_credentials(args: Iterable[str]) -> list[str]:
    """The command line with URL credentials redacted; the real URLs are kept in the
    environment for ``reveal``."""
    stash = _stash()
    out = []
    for arg in args:
        for match in _USERINFO.finditer(arg):
            if match.group(2) == MASK:
                continue
            url = re.split(r"[\s'\",]", arg[match.start():], maxsplit=1)[0]
            stash[redact(url)] = url
        out.append(redact(arg))
    if stash:
        os.environ[ENV_VAR] = json.dumps(stash)
    return out


def reveal(url: str) -> str:
    """The real URL behind a redacted one given on the command line (else ``url``)."""
    return _stash().get(url, url) if MASK in url else url


def _stash() -> dict[str, str]:
    try:
        data = json.loads(os.environ.get(ENV_VAR, "{}"))
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def keys_with_credentials(data: Any, prefix: str = "") -> list[str]:
    """Dotted keys of the string values in nested dicts/lists that hold URL credentials."""
    if isinstance(data, str):
        return [prefix.rstrip(".")] if has_credentials(data) else []
    items = data.items() if isinstance(data, dict) else enumerate(data) \
        if isinstance(data, list) else ()
    return [k for key, value in items for k in keys_with_credentials(value, f"{prefix}{key}.")]


class RedactingFilter(logging.Filter):
    """Rewrites a log record's message with URL credentials redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "@" in message and has_credentials(message):
            record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            # a traceback's text is cached on the record and used by every formatter
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True


def redact_logs(logger: logging.Logger | None = None) -> None:
    """Put a RedactingFilter on every handler of ``logger`` (default: the root logger)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
