"""A PostgreSQL server on 127.0.0.1:5433, run from the distribution's binaries.

One cluster lives under ``$EDDY_HOME/postgres`` (data directory, unix socket,
log), made by ``initdb -U eddy --auth=trust`` with a database ``eddy``. initdb and
postgres refuse to run as root, so as root every server command runs through
``runuser -u postgres`` and the directories belong to that user. Every step is
idempotent and runs under a file lock, because ``make test``, test fixtures and
``make run`` all call it and may race.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from eddy.errors import EddyError
from eddy.paths import eddy_home

HOST = "127.0.0.1"
PORT = 5433  # 5432 may belong to a system server
USER = "eddy"
DATABASE = "eddy"
DSN = f"postgresql://{USER}@{HOST}:{PORT}/{DATABASE}"
SERVER_USER = "postgres"  # who runs the server when we are root
READY_TIMEOUT_S = 60
STOP_TIMEOUT_S = 60
INSTALL_HINT = "run `make postgres` (or `apt-get install postgresql`)"
_DEBIAN_ROOT = Path("/usr/lib/postgresql")


class LocalPostgresError(EddyError):
    """The local PostgreSQL could not be found, initialised or started; the message
    says what to install or names the log under ``$EDDY_HOME/postgres`` that says why."""


@dataclass(frozen=True)
class Layout:
    home: Path
    data: Path
    socket_dir: Path
    log: Path

    @classmethod
    def at(cls, home: Path) -> Layout:
        return cls(home, home / "data", home / "run", home / "postgres.log")


def layout() -> Layout:
    """Under ``$EDDY_HOME/postgres`` (service/paths.py), so every command and test given
    one EDDY_HOME (make exports it) shares one server."""
    return Layout.at(eddy_home() / "postgres")


def bin_dir() -> Path:
    """The newest installed major's binaries (Debian), else those on PATH."""
    majors = [p for p in _DEBIAN_ROOT.glob("*/bin") if (p / "initdb").is_file()]
    majors.sort(key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else -1)
    if majors:
        return majors[-1]
    on_path = shutil.which("initdb")
    if on_path and (Path(on_path).parent / "pg_ctl").exists():
        return Path(on_path).resolve().parent
    raise LocalPostgresError(
        f"PostgreSQL's server programs (initdb, pg_ctl) are missing: {INSTALL_HINT}"
    )


def major_version(bins: Path) -> str:
    output = _run([str(bins / "pg_ctl"), "--version"]).stdout  # "pg_ctl (PostgreSQL) 15.8 ..."
    return output.split()[-1].split(".")[0] if output.strip() else "?"


def _run(
    command: list[str], *, as_server: bool = False, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    if as_server and os.geteuid() == 0:
        command = ["runuser", "-u", SERVER_USER, "--", *command]
    try:
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in a terminal must not reach the server
        )
    except FileNotFoundError as exc:
        raise LocalPostgresError(f"{exc.filename} is missing: {INSTALL_HINT}") from None


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:]) or "(no output)"


def prepare_dirs(lay: Layout) -> None:
    """Directories the server can use: owned by the postgres user when we are root."""
    for directory in (lay.home, lay.socket_dir):
        directory.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return
    try:
        server = pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise LocalPostgresError(
            f"there is no '{SERVER_USER}' user to run PostgreSQL as: {INSTALL_HINT}"
        ) from None
    for parent in lay.home.parents:
        _check_traversable(parent, server)
    for path in (lay.home, lay.socket_dir, *([lay.data] if lay.data.exists() else [])):
        os.chown(path, server.pw_uid, server.pw_gid)
    if lay.log.exists():
        os.chown(lay.log, server.pw_uid, server.pw_gid)


def _check_traversable(directory: Path, user: pwd.struct_passwd) -> None:
    info = directory.stat()
    if info.st_uid == user.pw_uid:
        allowed = info.st_mode & 0o100
    elif info.st_gid == user.pw_gid or user.pw_name in _group_members(info.st_gid):
        allowed = info.st_mode & 0o010
    else:
        allowed = info.st_mode & 0o001
    if not allowed:
        raise LocalPostgresError(
            f"PostgreSQL runs as the '{user.pw_name}' user, who cannot enter {directory} "
            f"(mode {info.st_mode & 0o777:o}): `chmod o+x {directory}`, or clone the repository "
            "somewhere that user can reach"
        )


def _group_members(gid: int) -> list[str]:
    import grp

    try:
        return list(grp.getgrgid(gid).gr_mem)
    except KeyError:
        return []


def initialised(lay: Layout) -> str | None:
    """The major version that wrote the data directory, if there is one."""
    try:
        return (lay.data / "PG_VERSION").read_text().strip()
    except OSError:
        return None


def init_unlocked(lay: Layout, bins: Path) -> None:
    """initdb into a scratch directory renamed into place, so an interrupted initdb
    never leaves a half data directory that a later start would trust."""
    scratch = lay.home / f"data.tmp-{os.getpid()}"
    for leftover in lay.home.glob("data.tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    command = [str(bins / "initdb"), "-D", str(scratch), "-U", USER, "--auth=trust"]
    command += ["-E", "UTF8", "--no-locale"]
    result = _run(command, as_server=True)
    if result.returncode != 0:
        shutil.rmtree(scratch, ignore_errors=True)
        raise LocalPostgresError(
            f"initdb failed (exit {result.returncode}):\n{_tail(result.stdout + result.stderr)}"
        )
    scratch.rename(lay.data)


def running_pid(lay: Layout) -> int | None:
    """The postmaster of our data directory, if alive (its pid file alone could be stale)."""
    try:
        pid = int((lay.data / "postmaster.pid").read_text().split("\n", 1)[0])
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    ours = (
        any(part.endswith(b"postgres") for part in command[:1])
        and str(lay.data).encode() in command
    )
    return pid if ours else None


def port_in_use(port: int = PORT) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((HOST, port)) == 0


def accepts_connections(bins: Path) -> bool:
    probe = [str(bins / "pg_isready"), "-q", "-h", HOST, "-p", str(PORT), "-t", "3"]
    # As eddy on the database that always exists: other names only add FATALs to the log.
    result = _run([*probe, "-U", USER, "-d", "postgres"])
    return result.returncode == 0


def start_unlocked(lay: Layout, bins: Path) -> int:
    """Starts the server, waits until it accepts connections, creates the database."""
    # pg_ctl hands the options to a shell: quote the path.
    options = f"-c listen_addresses={HOST} -p {PORT} -k {shlex.quote(str(lay.socket_dir))}"
    command = [str(bins / "pg_ctl"), "start", "-D", str(lay.data), "-l", str(lay.log)]
    command += ["-w", "-t", str(READY_TIMEOUT_S), "-o", options]
    result = _run(command, as_server=True, timeout_s=READY_TIMEOUT_S + 30)
    pid = running_pid(lay)
    if result.returncode != 0 or pid is None or not accepts_connections(bins):
        said = _tail(result.stdout + result.stderr, lines=5)
        log = lay.log.read_text(errors="replace") if lay.log.exists() else ""
        raise LocalPostgresError(
            f"PostgreSQL did not start accepting connections on {HOST}:{PORT} (waited up to "
            f"{READY_TIMEOUT_S} s; pg_ctl exit {result.returncode}: {said}). Its log is "
            f"{lay.log}; last lines:\n{_tail(log)}"
        )
    _create_database(bins)
    return pid


def _create_database(bins: Path) -> None:
    query = f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"
    psql = [str(bins / "psql"), "-h", HOST, "-p", str(PORT), "-U", USER, "-d", "postgres"]
    found = _run([*psql, "-tAc", query])
    if found.returncode == 0 and found.stdout.strip() == "1":
        return
    created = _run([str(bins / "createdb"), "-h", HOST, "-p", str(PORT), "-U", USER, DATABASE])
    if created.returncode != 0:
        raise LocalPostgresError(f"createdb {DATABASE} failed: {_tail(created.stderr)}")


def stop_unlocked(lay: Layout, bins: Path) -> int | None:
    """Fast shutdown (open transactions roll back); the stopped pid, or None."""
    pid = running_pid(lay)
    if pid is None:
        return None
    for mode in ("fast", "immediate"):
        command = [str(bins / "pg_ctl"), "stop", "-D", str(lay.data), "-m", mode]
        command += ["-w", "-t", str(STOP_TIMEOUT_S)]
        if _run(command, as_server=True, timeout_s=STOP_TIMEOUT_S + 30).returncode == 0:
            break
    return pid
