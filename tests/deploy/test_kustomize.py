"""Every overlay builds, and every built-in object in it passes the Kubernetes schema."""

from __future__ import annotations

import copy

import pytest
from kubernetes_validate import utils as k8s_schema

from tests.deploy.manifests import CUSTOM_KINDS, OVERLAYS, Manifest, one, render

KUBERNETES_VERSION = "1.37.0"  # the newest schema kubernetes-validate ships


def invalid(obj: Manifest) -> str | None:
    try:
        k8s_schema.validate(obj, KUBERNETES_VERSION, strict=True)
    except k8s_schema.ValidationError as exc:
        return f"{obj['kind']}/{obj['metadata']['name']} at {list(exc.path)}: {exc.message}"
    except k8s_schema.SchemaNotFoundError:
        # Only custom resources may go unchecked, and only those listed on purpose.
        return f"{obj['kind']}: no Kubernetes schema; a typo, or a CRD missing from CUSTOM_KINDS"
    return None


@pytest.mark.parametrize("target", ["base", *OVERLAYS])
def test_every_built_in_object_matches_the_kubernetes_schema(target: str) -> None:
    objects = render(target)
    checked = [o for o in objects if o["kind"] not in CUSTOM_KINDS]
    assert {o["kind"] for o in checked} >= {
        "StatefulSet",
        "Service",
        "ConfigMap",
        "PodDisruptionBudget",
        "CronJob",
    }
    problems = [p for o in checked if (p := invalid(o))]
    assert not problems, "\n".join(problems)


def test_the_schema_check_catches_a_broken_statefulset() -> None:
    broken = copy.deepcopy(one(render("prod"), "StatefulSet"))
    broken["spec"]["replicas"] = "three"
    broken["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = 1
    assert invalid(broken) is not None


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlays_keep_the_custom_resources_apart_by_kind(overlay: str) -> None:
    kinds = {o["kind"] for o in render(overlay)}
    assert kinds & CUSTOM_KINDS >= {"Kafka", "KafkaNodePool", "KafkaTopic", "ServiceMonitor"}
