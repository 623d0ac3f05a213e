"""The layering users and maintainers rely on, checked on the source: the
framework knows no agent, agents use only the public surface, production code
imports no tool, and no two packages import each other."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The repository's folders and the modules they are in the installed package.
PACKAGES = {
    "service": "eddy",
    "tables": "eddy.tables",
    "api": "eddy.api",
    "agents": "eddy.examples",
    "spark_jobs": "eddy.spark_jobs",
}
PRODUCT = tuple(PACKAGES)
REFERENCE_AGENTS = (
    "sensor_averages",
    "sensor_minmax",
    "sensor_counts",
    "sensor_alerts",
    "sensor_rooms",
    "vehicle_speed",
    "hashtag_counts",
    "team_powerups",
    "postgres_sink",
    "eos_checker",
)


def _modules(*folders: str) -> Iterator[tuple[str, Path, ast.Module]]:
    """Each module of these folders (their links not followed: service/'s links to
    the other folders), by its name in the installed package."""
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = ".".join(
                (PACKAGES[folder], *path.relative_to(ROOT / folder).with_suffix("").parts)
            )
            yield name.removesuffix(".__init__"), path, ast.parse(path.read_text())


def _imports(tree: ast.Module, *, typing_too: bool = False) -> Iterator[str]:
    """Every module a module imports (at any depth: lazy imports count), except
    under ``if TYPE_CHECKING`` unless asked."""
    skipped: set[int] = set()
    if not typing_too:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped |= {id(n) for n in ast.walk(node)}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "eddy":  # `from eddy import settings`: a module
                for alias in node.names:
                    as_module = ROOT / "service" / alias.name
                    found = as_module.is_dir() or as_module.with_suffix(".py").exists()
                    yield f"eddy.{alias.name}" if found else "eddy"
            else:
                yield node.module


def _unit(module: str) -> str:
    """The node of the dependency graph: a top-level package, or a module or
    subpackage directly under ``eddy`` (the framework's own packages)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "eddy" and len(parts) > 1 else parts[0]


def test_no_two_packages_import_each_other() -> None:
    graph: dict[str, set[str]] = {}
    for name, _, tree in _modules(*PRODUCT):
        for imported in _imports(tree):
            if imported.split(".")[0] == "eddy" and _unit(imported) != _unit(name):
                graph.setdefault(_unit(name), set()).add(_unit(imported))
    cycles = [(a, b) for a, targets in graph.items() for b in targets if a in _reachable(graph, b)]
    assert cycles == []


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        for nxt in graph.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_production_code_imports_no_tool() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {imported}"
        for name, path, tree in _modules(*PRODUCT)
        for imported in _imports(tree, typing_too=True)
        if imported.split(".")[0] in ("tools", "bench", "tests")
    ]
    assert offenders == []


@pytest.mark.parametrize("package", ["service", "tables", "api"])
def test_the_framework_names_no_reference_agent(package: str) -> None:
    pattern = re.compile(r"\b(" + "|".join(REFERENCE_AGENTS) + r")\b")
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if pattern.search(line)
    ]
    assert found == []


def test_agents_import_only_the_public_surface() -> None:
    """An agent module uses ``from eddy import ...`` and other agent modules,
    never Eddy's internals (nor the dependencies Eddy builds on)."""
    allowed_third_party = {"pydantic", "aiohttp"}
    offenders = []
    for _, path, tree in _modules("agents"):
        for imported in _imports(tree, typing_too=True):
            top = imported.split(".")[0]
            own = imported == "eddy" or imported.startswith("eddy.examples")
            internal = top == "eddy" and not own
            if internal or (top not in ("eddy", *allowed_third_party) and not _stdlib(top)):
                offenders.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert offenders == []


def _stdlib(module: str) -> bool:
    import sys

    return module in sys.stdlib_module_names or module == "__future__"


def test_every_public_name_loads_and_the_cli_help_loads_none_of_them() -> None:
    import subprocess
    import sys

    import eddy

    for name in eddy.__all__:
        assert getattr(eddy, name) is not None, name
    probe = (
        "import sys, eddy.cli; eddy.cli.build_parser(); "
        "print(sorted(m for m in ('fastapi', 'aiokafka', 'rocksdict', 'pydantic_settings', "
        "'pyarrow') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert loaded.stdout.strip() == "[]", loaded.stderr


def test_a_worker_loads_pyarrow_and_asyncpg_only_when_it_uses_them() -> None:
    """Together about 65 MB of every worker process's memory: pyarrow is for
    snapshots and savepoints, asyncpg for PostgreSQL sinks."""
    import subprocess
    import sys

    probe = (
        "import sys, eddy.plane.ingest, eddy.plane.front, eddy.examples.app; "
        # A worker opens its snapshot and savepoint roots when it starts.
        "from eddy.snapshot.layout import SnapshotRoot; SnapshotRoot.open('snapshots'); "
        "print(sorted(m for m in ('pyarrow', 'numpy', 'asyncpg') if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr
