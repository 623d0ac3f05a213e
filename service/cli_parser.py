"""What every Eddy command line shares: errors in one line, JSON on stdout.

argparse prints its usage and then ``prog: error: ...`` (two lines, the second
named after the script's file when no ``prog`` is given). Eddy's command lines
(``eddy``, ``python -m tools``, ``python -m eddy.spark_jobs``) print every error as
one line that starts with the tool's name, so a script or a person reads one
thing; ``--help`` still shows the usage. Argparse only: ``eddy --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn

from eddy.redact import redact


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line: ``eddy: <what>
    (see eddy topics --help)``, exit code 2. Subcommands' parsers are of the same
    class (argparse makes them of the parent's class), so they say the same."""

    error_name = "eddy"

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.error_name}: {one_line(message)} (see {self.prog} --help)\n")


def one_line(message: str) -> str:
    """A message of several lines (a list of invalid settings, say) as one line."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else ""
    head, rest = lines[0], "; ".join(lines[1:])
    return f"{head} {rest}" if head.endswith(":") else f"{head}; {rest}"


def print_error(name: str, error: BaseException) -> int:
    """Print ``error`` as the one line ``<name>: <message>`` on stderr, without
    credentials (a message may quote a URL with a password); returns the exit code
    of a usage or operating error (2)."""
    print(f"{name}: {redact(one_line(str(error))) or type(error).__name__}", file=sys.stderr)
    return 2


def print_json(value: Any) -> None:
    """``--json``: one document on stdout, indented, keys in the order given
    (every command builds its dictionaries in a fixed order)."""
    print(json.dumps(value, indent=2, default=str))
