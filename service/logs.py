"""Logging of every Eddy process (``eddy`` commands and the worker's query process,
its ingest processes, ``python -m tools``): one format, and no secret in it.

Redaction sits in the log record factory rather than in a handler's filter or
formatter: records of every logger pass through it, whichever handler writes
them, including the ones uvicorn installs for itself and any a library adds. A
record's message, its traceback and its stack are redacted once, when the
record is made (after the logger's level check, so a debug record that is not
logged costs nothing). Uncaught exceptions, which Python prints without
logging, get the same treatment through ``sys.excepthook`` and
``threading.excepthook``.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import Any

from eddy.redact import redact

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_TRACEBACKS = logging.Formatter()  # formats exceptions as every standard formatter does
_MARK = "_eddy_redacts"


def configure(fmt: str = FORMAT, level: int = logging.INFO) -> None:
    """``logging.basicConfig`` with ``fmt``, and every record redacted."""
    logging.basicConfig(level=level, format=fmt)
    install_redaction()


def install_redaction() -> None:
    """Redact every log record and uncaught exception of this process (idempotent)."""
    current = logging.getLogRecordFactory()
    if not getattr(current, _MARK, False):
        logging.setLogRecordFactory(_redacting(current))
    # Python's own hooks only: one a host installed (pytest's, a debugger's) is its
    # business, and replacing it would blind it.
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = _print_exception
    if threading.excepthook is threading.__excepthook__:
        threading.excepthook = _print_thread_exception


def scrub(record: logging.LogRecord) -> None:
    """Redact ``record`` in place: its message, traceback and stack."""
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: logging reports it when it formats
        return
    shown = redact(message)
    if shown != message:
        record.msg, record.args = shown, None
    if record.exc_info and not record.exc_text:
        # Formatters use exc_text when it is set: the traceback is shown redacted.
        record.exc_text = redact(_TRACEBACKS.formatException(record.exc_info))
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


def _redacting(base: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = base(*args, **kwargs)
        scrub(record)
        return record

    setattr(factory, _MARK, True)
    return factory


def _print_exception(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    sys.stderr.write(redact("".join(traceback.format_exception(kind, value, tb))))


def _print_thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return  # as Python's own hook: a thread that exits is not an error
    name = args.thread.name if args.thread is not None else "?"
    text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
    sys.stderr.write(redact(f"Exception in thread {name}:\n{text}"))
