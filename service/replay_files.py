"""The replay's files: input lines read with bounded memory, an output that
appears whole or not at all.

A replay reads files it did not write (an export, a capture, a pipe), so one line
of the input may be of any length: ``/dev/zero`` is a line that never ends. The
reader takes at most ``max_line_bytes`` of a line before it refuses it, so memory
stays bounded whatever the input holds. The output file is written under a
temporary name next to the target and renamed over it only when the replay
succeeds: a replay that stops on a bad line, or is interrupted, leaves the target
as it was.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from eddy.errors import ConfigError, EddyError

#: The longest input line accepted by default, in bytes (not counting its newline):
#: room for a Kafka record at the broker's default ``message.max.bytes`` (1 MB)
#: written as JSON text, escapes and all.
DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024


class ReplayInputError(EddyError):
    """A line of the input is too long, not JSON, or not a line the replay knows
    (a record, a watermark, a processing time). The message names the line; fix it
    or remove it, or raise ``--max-line-bytes`` for a line that is too long."""


#: One non-blank line of the input: its 1-based number (blank lines counted) and
#: its JSON value. A plain tuple: a NamedTuple would double the reader's cost.
InputLine = tuple[int, Any]


def read_records(stream: IO[bytes], *, max_line_bytes: int) -> Iterator[InputLine]:
    """The JSON value of each non-blank line of ``stream``, with its line number.

    Each line is read with ``readline(limit)``, so no more than
    ``max_line_bytes + 1`` bytes of a line are ever held: a line without an end
    costs the same as one that is one byte too long. Whatever the bytes, this
    yields ``(number, value)`` pairs or raises :class:`ReplayInputError`: the
    invariant a fuzz target checks.

    Raises:
        ReplayInputError: a line longer than ``max_line_bytes`` (not counting its
            newline), or one that is not JSON (orjson also refuses NaN, numbers
            beyond a double and nesting deeper than 1024).
    """
    if max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be at least 1, got {max_line_bytes}")
    lines = iter(functools.partial(stream.readline, max_line_bytes + 1), b"")
    for number, line in enumerate(lines, start=1):
        if len(line) > max_line_bytes and not line.endswith(b"\n"):
            raise ReplayInputError(
                f"line {number}: longer than {max_line_bytes} bytes, the limit; "
                "raise it with --max-line-bytes, or split the record"
            )
        if line.isspace():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ReplayInputError(f"line {number}: not JSON ({exc})") from None
        yield number, value


@contextlib.contextmanager
def output_file(target: str) -> Iterator[IO[bytes]]:
    """A file to write the replay's output to, that becomes ``target`` only if the
    block ends without an exception.

    The data goes to a hidden temporary file in the target's directory (a rename
    is atomic only within one file system) and is synced before the rename, so
    ``target`` holds either its old content or the whole new output. The temporary
    file is removed on any error, on Ctrl-C and on SIGTERM. A target that exists
    and is not a regular file (``/dev/null``, a FIFO) is written in place: there is
    nothing to replace.

    Raises:
        ConfigError: the target's directory cannot be written.
    """
    path = Path(os.path.realpath(target))  # a symbolic link keeps pointing at the output
    if path.exists() and not path.is_file():
        with _opened(path, target) as out:
            yield out
        return
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise ConfigError(f"cannot write {target}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as out, _terminated_as_exit():
            yield out
            out.flush()
            os.fsync(out.fileno())
        _keep_mode(path, temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _opened(path: Path, target: str) -> Iterator[IO[bytes]]:
    try:
        out = path.open("wb")
    except OSError as exc:
        raise ConfigError(f"cannot write {target}: {exc.strerror}") from None
    with out:
        yield out


def _keep_mode(path: Path, temporary: Path) -> None:
    """Replacing a file must not change who may read it: the new one takes the
    old one's permission bits (a new file gets the umask's, as ``open`` gives)."""
    with contextlib.suppress(FileNotFoundError):
        os.chmod(temporary, stat.S_IMODE(path.stat().st_mode))


@contextlib.contextmanager
def _terminated_as_exit() -> Iterator[None]:
    """SIGTERM (``timeout``, a process manager) unwinds like Ctrl-C, so the
    temporary file is removed; the exit code is the usual 128 + 15. Signal
    handlers can only be set from the main thread: elsewhere SIGTERM keeps its
    default."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
