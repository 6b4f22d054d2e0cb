"""gpu-cluster:monitoring: values checked at the boundary, and the access rules that span
the layout, each problem named by its key and reported at once."""

import pytest

from tests.builders import bare_metal_config, cloud_config
from tests.config.loading import loads, problems_of


def test_on_by_default_with_its_defaults():
    monitoring = loads(bare_metal_config()).monitoring
    assert monitoring.enabled and monitoring.namespace == "monitoring"
    assert (monitoring.scrape_interval, monitoring.retention, monitoring.storage_size) == (
        "30s", "15d", "20Gi")
    assert monitoring.grafana.access.mode == "portForward"


@pytest.mark.parametrize("key, value", [
    ("scrapeInterval", "30"), ("scrapeInterval", "0s"), ("scrapeInterval", "30s\n- x"),
    ("retention", "15"), ("retention", "1y; rm"), ("storageSize", "20GB"),
    ("namespace", "Monitoring"), ("storageClass", "../nfs"),
])
def test_values_are_refused_by_key(key, value):
    values = bare_metal_config()
    values["monitoring"] = {key: value}
    [(path, _)] = problems_of(values)
    assert path == f"monitoring.{key}"


def test_access_rules_across_the_layout_are_reported_together():
    values = bare_metal_config()
    values["monitoring"] = {"storageClass": "efs", "grafana": {"access": {
        "mode": "loadBalancer"}}}
    assert sorted(problems_of(values)) == [
        ("monitoring.grafana.access.hostname", "is required with loadBalancer: the DNS name "
         "users open, pointing at the load balancer"),
        ("monitoring.grafana.access.mode", "loadBalancer needs an AWS layout (hybrid or cloud), "
         "not bare-metal; use nodePort or portForward"),
        ("monitoring.storageClass", "'efs' is not a StorageClass of this stack (storage: nfs)"),
    ]


def test_node_port_on_cloud_needs_a_hostname_and_source_ranges_need_a_load_balancer():
    values = cloud_config()
    values["monitoring"] = {"grafana": {"access": {"mode": "nodePort",
                                                   "sourceRanges": ["203.0.113.0/28"]}}}
    assert sorted(path for path, _ in problems_of(values)) == [
        "monitoring.grafana.access.hostname", "monitoring.grafana.access.sourceRanges"]


def test_turned_off_nothing_of_it_is_checked():
    values = bare_metal_config()
    values["monitoring"] = {"enabled": False, "grafana": {"access": {"mode": "loadBalancer"}}}
    assert not loads(values).monitoring.enabled


def test_its_namespace_is_neither_a_team_s_nor_a_reserved_one():
    values = bare_metal_config()
    values["access"] = {"teams": [{"name": "vision"}, {"name": "monitoring"}]}
    assert any(path == "monitoring.namespace" and message.startswith(
        "'monitoring' is also the namespace of team access.teams[1]")
        for path, message in problems_of(values))
    values["access"] = {"teams": [{"name": "vision"}]}
    values["monitoring"] = {"namespace": "kube-monitoring"}
    assert any(path == "monitoring.namespace" and message.startswith(
        "'kube-monitoring' is a namespace of Kubernetes")
        for path, message in problems_of(values))
