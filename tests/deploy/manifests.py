"""The rendered manifests of deploy/k8s, built once per overlay with `kubectl kustomize`."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ("dev", "prod")
# Custom resources: kubernetes-validate knows only the built-in kinds, so these are
# checked by the tests below (topics) and by their operators at apply time.
CUSTOM_KINDS = {"Kafka", "KafkaNodePool", "KafkaTopic", "KafkaUser", "ServiceMonitor"}

Manifest = dict[str, Any]


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        raise AssertionError(
            "kubectl is not on PATH: install it (it carries kustomize) to check deploy/k8s"
        )
    return path


@functools.cache
def render(target: str) -> tuple[Manifest, ...]:
    """`target` is "base" or an overlay name."""
    directory = K8S / target if target == "base" else K8S / "overlays" / target
    result = subprocess.run(
        [kubectl(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"kubectl kustomize {directory} failed:\n{result.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def one(objects: tuple[Manifest, ...], kind: str, name_prefix: str = "") -> Manifest:
    found = [
        o for o in objects if o["kind"] == kind and o["metadata"]["name"].startswith(name_prefix)
    ]
    assert len(found) == 1, f"expected one {kind} {name_prefix!r}, got {len(found)}"
    return found[0]


def worker_container(objects: tuple[Manifest, ...]) -> Manifest:
    sts = one(objects, "StatefulSet", "eddy-worker")
    containers: list[Manifest] = sts["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "worker")


def settings_env(objects: tuple[Manifest, ...]) -> dict[str, str]:
    """The EDDY_* environment a worker pod gets: the ConfigMap, then env entries.
    Values from Secrets or the downward API get placeholders of the right shape."""
    env = dict(one(objects, "ConfigMap", "eddy-settings")["data"])
    for entry in worker_container(objects).get("env", []):
        if not entry["name"].startswith("EDDY_"):
            continue
        value = entry.get("value")
        if value is None:
            value = "from-a-secret"
        env[entry["name"]] = value.replace("$(POD_NAME)", "eddy-worker-0").replace(
            "$(POD_NAMESPACE)", "eddy"
        )
    return env
