"""The Grafana dashboard only charts metrics the worker really exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import generate_latest

from eddy.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "eddy-dashboard.json"


def exported_names() -> set[str]:
    metrics = Metrics()
    names = set()
    for family in metrics.registry.collect():
        names.add(family.name)
        for suffix in ("_total", "_bucket", "_count", "_sum", "_created"):
            names.add(family.name + suffix)
    assert generate_latest(metrics.registry)  # the registry renders
    return names


def test_every_panel_queries_an_exported_metric() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exported = exported_names()
    assert len(panels) >= 12
    for panel in panels:
        for target in panel["targets"]:
            used = set(re.findall(r"\beddy_[a-z_]+", target["expr"]))
            assert used, panel["title"]
            assert used <= exported, (panel["title"], used - exported)


def label_names() -> dict[str, set[str]]:
    """Each exported sample name -> the labels it carries (one child per metric)."""
    metrics = Metrics()
    for collector in vars(metrics).values():
        names = getattr(collector, "_labelnames", None)
        if names:
            collector.labels(*("x" for _ in names))
    labels: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    return labels


def test_every_panel_groups_by_labels_its_metrics_carry() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    labels = label_names()
    for panel in panels:
        for target in panel["targets"]:
            for grouped, metric in re.findall(
                r"by \(([a-z_, ]+)\)[^a-z_]*(?:rate\()?(eddy_[a-z_]+)", target["expr"]
            ):
                wanted = {g.strip() for g in grouped.split(",")}
                assert wanted <= labels[metric], (panel["title"], metric, wanted)
    assert "stage" in labels["eddy_records_in_total"]
