"""The manifests and Eddy agree: setting names, setting values, topics, ports, probes."""

from __future__ import annotations

import os
import re

import pytest
from pydantic_settings import BaseSettings

from eddy import examples
from eddy.api.routes import health
from eddy.settings import ENV_PREFIX, Settings, load_settings, variables
from eddy.topics import app_topics, changelog_topic
from tests.deploy.manifests import K8S, OVERLAYS, one, render, settings_env, worker_container

EDDY_NAME = re.compile(r"\bEDDY_[A-Z0-9_]+\b")
# The framework's settings and those of the reference app's agents (agents/settings.py).
SETTINGS_CLASSES: list[type[BaseSettings]] = [Settings, *examples.app.settings_classes()]


def test_every_eddy_variable_in_the_manifests_is_a_setting() -> None:
    known = {variable for cls in SETTINGS_CLASSES for variable in variables(cls)}
    used: dict[str, set[str]] = {}
    for path in sorted(K8S.rglob("*")):
        if path.is_file():
            for name in EDDY_NAME.findall(path.read_text()):
                used.setdefault(name, set()).add(str(path.relative_to(K8S)))
    assert used, "no EDDY_* names found: did deploy/k8s move?"
    unknown = {name: sorted(files) for name, files in used.items() if name not in known}
    assert not unknown, f"not in service/settings.py nor agents/settings.py: {unknown}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_pod_s_environment_is_valid_settings(
    overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = settings_env(render(overlay))
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    # ConfigError names any bad variable, the agents' settings included.
    settings = load_settings(examples.app.settings_classes())
    examples.app.build(settings)  # the agents the pods run, with their settings
    assert settings.worker_id == "eddy-worker-0"
    assert settings.api_advertised_url == "http://eddy-worker-0.eddy-workers.eddy.svc:8000"
    assert str(settings.state_dir) == mount_of(overlay, "state")
    if overlay == "prod":
        assert settings.security_protocol == "SASL_SSL"
        assert str(settings.ssl_cafile).startswith(mount_of(overlay, "kafka-ca"))


def mount_of(overlay: str, volume: str) -> str:
    mounts = worker_container(render(overlay))["volumeMounts"]
    return str(next(m["mountPath"] for m in mounts if m["name"] == volume))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_secrets_come_only_from_secret_references(overlay: str) -> None:
    objects = render(overlay)
    assert not [o for o in objects if o["kind"] == "Secret"]
    config = one(objects, "ConfigMap", "eddy-settings")["data"]
    assert not {"EDDY_API_TOKEN", "EDDY_SASL_PASSWORD"} & set(config)
    for entry in worker_container(objects)["env"]:
        if entry["name"] in {"EDDY_API_TOKEN", "EDDY_SASL_PASSWORD"}:
            assert "secretKeyRef" in entry["valueFrom"], entry


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_worker_variables_refer_only_to_earlier_ones(overlay: str) -> None:
    # Kubernetes expands $(VAR) only for variables defined earlier in the list.
    seen: set[str] = set()
    for entry in worker_container(render(overlay))["env"]:
        for ref in re.findall(r"\$\(([A-Z_]+)\)", entry.get("value", "")):
            assert ref in seen, f"{entry['name']} uses $({ref}) before it is defined"
        seen.add(entry["name"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kafka_topics_match_the_topics_eddy_creates(overlay: str) -> None:
    objects = render(overlay)
    config = one(objects, "ConfigMap", "eddy-settings")["data"]
    settings = Settings(app_id=config["EDDY_APP_ID"], partitions=int(config["EDDY_PARTITIONS"]))
    expected: dict[str, tuple[int, bool]] = {}
    # What a worker running the default agents creates: the topics they declare,
    # their repartition topics, the dead-letter topic, a changelog per stage.
    built = examples.app.build(settings)
    for spec in app_topics(built):
        expected[spec.name] = (spec.partitions, spec.config.get("cleanup.policy") == "compact")
    for stage in built.stages:
        expected[changelog_topic(settings, stage.name)] = (settings.partitions, True)
    declared = {
        o["spec"]["topicName"]: (
            o["spec"]["partitions"],
            o["spec"]["config"]["cleanup.policy"] == "compact",
        )
        for o in objects
        if o["kind"] == "KafkaTopic"
    }
    assert declared == expected
    replication = int(config["EDDY_REPLICATION_FACTOR"])
    assert {o["spec"]["replicas"] for o in objects if o["kind"] == "KafkaTopic"} == {replication}
    workers = one(objects, "StatefulSet")["spec"]["replicas"]
    assert workers <= settings.partitions, "a worker beyond the partition count idles"


def test_probes_and_ports_match_the_api() -> None:
    paths = {getattr(route, "path", None) for route in health.router.routes}
    container = worker_container(render("prod"))
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["path"] in paths
    config = one(render("prod"), "ConfigMap", "eddy-settings")["data"]
    assert container["ports"][0]["containerPort"] == int(config["EDDY_API_PORT"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workers_use_the_names_strimzi_gives_the_example_cluster(overlay: str) -> None:
    # Strimzi derives these from the Kafka resource's name; a rename must follow.
    objects = render(overlay)
    cluster = one(objects, "Kafka")["metadata"]["name"]
    config = one(objects, "ConfigMap", "eddy-settings")["data"]
    host, _, port = config["EDDY_BOOTSTRAP_SERVERS"].partition(":")
    assert host == f"{cluster}-kafka-bootstrap"
    listeners = one(objects, "Kafka")["spec"]["kafka"]["listeners"]
    listener = next(item for item in listeners if item["port"] == int(port))
    secured = config.get("EDDY_SECURITY_PROTOCOL", "PLAINTEXT") != "PLAINTEXT"
    assert listener["tls"] is secured
    for obj in objects:
        if obj["kind"] in {"KafkaTopic", "KafkaUser", "KafkaNodePool"}:
            assert obj["metadata"]["labels"]["strimzi.io/cluster"] == cluster
    if overlay == "prod":
        assert listener["authentication"]["type"] == "scram-sha-512"
        assert config["EDDY_SASL_MECHANISM"] == "SCRAM-SHA-512"
        user = one(objects, "KafkaUser")["metadata"]["name"]
        assert config["EDDY_SASL_USERNAME"] == user
        sts = one(objects, "StatefulSet")["spec"]["template"]["spec"]
        env = {e["name"]: e for e in worker_container(objects)["env"]}
        assert env["EDDY_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == user
        secrets = {v["name"]: v.get("secret", {}).get("secretName") for v in sts["volumes"]}
        assert secrets["kafka-ca"] == f"{cluster}-cluster-ca-cert"
