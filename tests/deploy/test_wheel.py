"""Eddy in a team's own service, as docs/own-service.md (and the README's "Use
Eddy in your own service") shows it: the wheel installed with its dependencies
into a new virtualenv, a project in a folder of its own whose modules are named
``service``, ``api``, ``tables`` and ``agents`` (the names of Eddy's folders in
this repository), and the page's commands run there: the project's tests
(pytest, in the test driver), ``mypy --strict``, ``eddy replay --app`` and, on
the real broker, ``eddy topics create``, ``eddy worker --app agents:app`` and
the page's own ``eddy send`` lines, the window read back over REST and from the
output topic. The page's Python blocks are excerpts of the files below.

The dependencies come from the project's lock, offline: the new virtualenv gets
a path line to this checkout's site-packages (not its editable install), so no
download and no resolver run. ``make pythons`` runs the same module under other
Pythons (``EDDY_TEST_PYTHON``), with the dependencies from PyPI instead.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
import sysconfig
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from eddy.settings import Settings, build
from tests.support.kafka import read_all
from tests.support.team_apps import app_env
from tools import localkafka

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PRODUCT = {"eddy"}
# The Python the project runs on: this one, or another one's (make pythons).
TARGET = os.environ.get("EDDY_TEST_PYTHON", "")

# The project's files, shown as they are in docs/own-service.md.
API = """\
from pydantic import BaseModel


class Click(BaseModel):
    user: str
    page: str
    ts_ms: int
"""

TABLES = """\
SHOP_PAGES = frozenset({"/cart", "/checkout"})
"""

SERVICE = """\
from api import Click
from tables import SHOP_PAGES


def in_shop(click: Click) -> bool:
    return click.page in SHOP_PAGES
"""

AGENTS = """\
from eddy import App, BoundedOutOfOrderness, Context, Count, Topic, Tumbling, ValueState

from api import Click
from service import in_shop

app = App("shop")
clicks = Topic("clicks", Click, key="user", timestamp="ts_ms")
shop_minutes = Topic("shop-clicks-per-minute")
newcomers = Topic("newcomers")
FIRST_SEEN = ValueState("first_seen_ms", int)

(
    app.stream(clicks, name="shop_clicks", watermark=BoundedOutOfOrderness(bound_ms=1_000))
    .filter(in_shop)
    .window(Tumbling(size_ms=60_000))
    .aggregate(Count())
    .to(shop_minutes)
    .queryable()
)


@app.agent(
    clicks,
    name="newcomers",
    outputs=[newcomers],
    states=[FIRST_SEEN],
    watermark=BoundedOutOfOrderness(bound_ms=1_000),
)
async def first_click(click: Click, ctx: Context) -> None:
    seen = ctx.state(FIRST_SEEN)
    if seen.get() is None:
        seen.set(click.ts_ms)
        ctx.timer_service.register_event_time_timer(click.ts_ms + 60_000)


@first_click.on_timer
async def a_minute_later(timestamp_ms: int, ctx: Context) -> None:
    ctx.send(newcomers, {"user": ctx.key, "first_seen_ms": ctx.state(FIRST_SEEN).get()})
"""

TESTS = """\
from eddy import TestDriver

from agents import app, clicks, newcomers, shop_minutes
from api import Click


def test_shop_clicks_are_counted_per_user_and_minute() -> None:
    with TestDriver(app, agents=["shop_clicks"]) as driver:
        for page, ts_ms in [("/cart", 1_000), ("/", 2_000), ("/checkout", 30_000), ("/", 61_500)]:
            driver.send(clicks, Click(user="ann", page=page, ts_ms=ts_ms))
        assert [r.value["value"] for r in driver.read(shop_minutes)] == [2]


def test_a_newcomer_is_announced_a_minute_after_the_first_click() -> None:
    with TestDriver(app, agents=["newcomers"]) as driver:
        driver.send(clicks, Click(user="bob", page="/", ts_ms=5_000))
        driver.send(clicks, Click(user="bob", page="/cart", ts_ms=70_000))
        assert [r.value for r in driver.read(newcomers)] == [
            {"user": "bob", "first_seen_ms": 5_000}
        ]
"""

# What mypy must refuse: Eddy's types are seen, not taken as Any.
WRONG = """\
from eddy import Context, Tumbling

from agents import a_minute_later

Tumbling(size_ms="1m")


async def soon(ctx: Context) -> None:
    await a_minute_later("1m", None)
"""

PROJECT = {
    "api.py": API,
    "tables.py": TABLES,
    "service.py": SERVICE,
    "agents.py": AGENTS,
    "test_agents.py": TESTS,
}


@dataclass(frozen=True)
class Venv:
    root: Path
    offline: bool  # the dependencies from this checkout's lock, not PyPI

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def eddy(self) -> Path:
        return self.root / "bin" / "eddy"


def run(args: list[Any], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``args`` run to the end; a failure shows its output in the test's report."""
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # From the sdist, as a package index would: no stale build/ of this checkout in it.
    subprocess.run([BIN / "uv", "build", "-q", "-o", str(out), str(ROOT)], check=True)
    (built,) = out.glob("eddy-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A new virtualenv with the wheel and its dependencies, and pytest for the
    project's tests."""
    made = Venv(tmp_path_factory.mktemp("venv"), offline=not TARGET)
    subprocess.run([TARGET or sys.executable, "-m", "venv", str(made.root)], check=True)
    if made.offline:
        subprocess.run(
            [made.python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
            check=True,
        )
        # The locked dependencies (and pytest), but not the project: a path line does
        # not run the editable install's .pth that would put the repository back.
        where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        site = Path(subprocess.check_output([made.python, "-c", where], text=True).strip())
        (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    else:
        install = ["pip", "install", "-q", "--python", str(made.python), str(wheel), "pytest"]
        subprocess.run([BIN / "uv", *install], check=True)
    return made


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shop")
    for name, text in PROJECT.items():
        (root / name).write_text(text)
    return root


@pytest.fixture
def env(venv: Venv, tmp_path: Path) -> dict[str, str]:
    """What a shell in the project has: the venv activated, no EDDY_* of this suite;
    the suite's own pytest plugins (on the offline path) stay out."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("EDDY_", "PYTHON"))}
    path = f"{venv.root / 'bin'}:{os.environ['PATH']}"
    return {**clean, "PATH": path, "HOME": str(tmp_path), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def test_the_wheel_holds_the_product_and_no_tool(wheel: Path) -> None:
    import eddy

    assert wheel.name.startswith(f"eddy-{eddy.__version__}-")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {name.split("/")[0] for name in names if name.endswith(".py")}
    assert packages == PRODUCT
    assert "eddy/py.typed" in names
    assert "eddy/api/static/dashboard.js" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "eddy = eddy.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_pip_show_lists_no_top_level_module_but_eddy(venv: Venv, tmp_path: Path) -> None:
    shown = run([venv.python, "-m", "pip", "show", "-f", "eddy"], tmp_path, dict(os.environ))
    files = shown.stdout.split("Files:\n", 1)[1].split()
    modules = [f for f in files if f.endswith(".py")]
    assert len(modules) > 100
    assert [f for f in modules if not f.startswith("eddy/")] == []


def test_the_projects_own_modules_and_tests_run_beside_eddy(
    venv: Venv, project: Path, env: dict[str, str]
) -> None:
    probe = "import eddy, service, tables; print(eddy.__file__, service.__file__, tables.__file__)"
    eddy_file, service_file, tables_file = run(
        [venv.python, "-c", probe], project, env
    ).stdout.split()
    assert eddy_file.startswith(str(venv.root))
    assert (service_file, tables_file) == (str(project / "service.py"), str(project / "tables.py"))
    tested = run([venv.python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project, env)
    assert "2 passed" in tested.stdout


def test_the_project_type_checks_with_mypy_strict(
    venv: Venv, project: Path, tmp_path: Path
) -> None:
    # This suite's mypy, reading what is installed in the project's virtualenv.
    checked = run(
        [BIN / "mypy", "--strict", "--python-executable", venv.python,
         "--cache-dir", tmp_path / "cache", *PROJECT],
        project, dict(os.environ),
    )  # fmt: skip
    assert checked.stdout.startswith("Success: no issues found in 5 source files")
    # A wrong type is an error, and a decorated timer handler keeps its signature.
    (tmp_path / "wrong.py").write_text(WRONG)
    checked_wrong = subprocess.run(
        [BIN / "mypy", "--strict", "--python-executable", venv.python,
         "--cache-dir", tmp_path / "cache", tmp_path / "wrong.py"],
        cwd=project, capture_output=True, text=True, check=False,
    )  # fmt: skip
    errors = [line.split(": error: ")[-1] for line in checked_wrong.stdout.splitlines()]
    assert [error.split(";")[0] for error in errors[:3]] == [
        'Argument "size_ms" to "Tumbling" has incompatible type "str"',
        'Argument 1 to "a_minute_later" has incompatible type "str"',
        'Argument 2 to "a_minute_later" has incompatible type "None"',
    ], checked_wrong.stdout


def test_replay_runs_the_projects_app_over_a_file(
    venv: Venv, project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    clicks = tmp_path / "clicks.jsonl"
    rows = [("ann", "/cart", 5_000), ("ann", "/", 6_000), ("ann", "/checkout", 7_000)]
    rows += [("bob", "/", 65_000)]
    clicks.write_bytes(
        b"".join(
            orjson.dumps({"topic": "clicks", "record": {"user": u, "page": p, "ts_ms": ts}}) + b"\n"
            for u, p, ts in rows
        )
    )
    replayed = run(
        [venv.eddy, "replay", "--app", "agents:app", "--agent", "shop_clicks", "--input", clicks],
        project, env,
    )  # fmt: skip
    windows = [orjson.loads(line) for line in replayed.stdout.splitlines()]
    assert [(w["topic"], w["value"]["user"], w["value"]["value"]) for w in windows] == [
        ("shop-clicks-per-minute", "ann", 2)
    ]


@pytest.fixture
def broker() -> Iterator[None]:
    started = localkafka.ensure_running()
    yield
    if started:
        localkafka.stop()


@pytest.mark.e2e
@pytest.mark.usefixtures("broker")
def test_a_worker_runs_the_projects_app_on_the_broker(
    venv: Venv, project: Path, env: dict[str, str], tmp_path: Path
) -> None:
    own = app_env(tmp_path, uuid.uuid4().hex[:8])  # topics, group and state of its own
    worker_env = {**env, **{k: v for k, v in own.items() if k.startswith("EDDY_")}}
    prefix = worker_env["EDDY_TOPIC_PREFIX"]
    run([venv.eddy, "topics", "create", "--app", "agents:app"], project, worker_env)
    url = f"http://127.0.0.1:{worker_env['EDDY_API_PORT']}"
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [venv.eddy, "worker", "--app", "agents:app"],
        cwd=project, env=worker_env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        for line in the_docs_sends():
            sent = run([venv.eddy, *shlex.split(line)[1:]], project, worker_env)
            assert set(orjson.loads(sent.stdout)) == {"topic", "partition", "offset"}
        windows = windows_of(url, "ann", worker)
    finally:
        worker.terminate()
        code = worker.wait(60)
        log.close()
    # ann's first minute, closed by her second click: what the page says the query shows.
    assert [(w["user"], w["window_start_ms"], w["value"]) for w in windows] == [("ann", 0, 1)]
    settings = build(Settings, {"topic_prefix": prefix})
    out = asyncio.run(read_all(settings, f"{prefix}shop-clicks-per-minute", min_records=1))
    assert [orjson.loads(r.value) for r in out] == windows  # the topic and REST agree
    assert code == 0, (tmp_path / "worker.log").read_text()


def the_docs_sends() -> list[str]:
    """The ``eddy send`` lines of docs/own-service.md, as a user would copy them."""
    text = (ROOT / "docs" / "own-service.md").read_text()
    sends = [line for line in text.splitlines() if line.startswith("eddy send --app agents:app")]
    assert len(sends) == 2, sends
    return sends


def windows_of(url: str, key: str, worker: subprocess.Popen[bytes]) -> list[Any]:
    """``GET /agents/shop_clicks/windows/{key}`` once it has a window (60 s at most)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and worker.poll() is None:
        try:
            answer = httpx.get(f"{url}/agents/shop_clicks/windows/{key}", timeout=2)
        except httpx.HTTPError:
            answer = None
        if answer is not None and answer.status_code == 200 and answer.json()["windows"]:
            windows: list[Any] = answer.json()["windows"]
            return windows
        time.sleep(0.2)
    raise AssertionError(f"no window of {key} at {url} within 60 s (worker: {worker.poll()})")
