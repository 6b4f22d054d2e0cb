"""The preview's warnings about what the program will not do that a user might expect:
each names the key that changes it, and reaches `pulumi preview` (pulumi.log.warn) and the
offline preview's "Warnings:" block."""

import copy

import pytest

from config.warnings import preview_warnings
from tests.config.loading import loads
from tests.builders import bare_metal_config, cloud_config, hybrid_config
from tests.kubeflow.test_component import kubeflow_values


def warnings_of(values: dict) -> list[str]:
    return [w for w in preview_warnings(loads(values)) if "pinned by tag only" not in w]


@pytest.mark.parametrize("change", [
    lambda v: v["backup"].update(enabled=False),
    lambda v: v["backup"].update(path="/mnt/backups"),
    lambda v: v["storage"]["nfs"].update(host=None, server="192.168.2.200"),
], ids=["backups off on purpose", "backup.path", "another NFS server"])
def test_no_backup_warning_where_they_run_or_are_off_on_purpose(change):
    values = bare_metal_config(workers=1)
    change(values)
    values["storage"]["nfs"] = {k: v for k, v in values["storage"]["nfs"].items() if v}
    assert not [w for w in warnings_of(values) if "backup" in w]


def test_no_nfs_export_and_no_backup_path_is_warned():
    values = bare_metal_config(workers=1)
    values["storage"] = {"localPath": {}}
    [warning] = [w for w in warnings_of(values) if "backup" in w]
    assert "there is no NFS export (gpu-cluster:storage.nfs)" in warning


def test_the_cloud_layout_has_no_backup_warning():
    # But the pools' autoscaling warning (tests/config/test_autoscaling.py).
    assert [w for w in warnings_of(cloud_config()) if "do not autoscale" not in w] == []


@pytest.mark.parametrize("option", ["soft"])
def test_soft_nfs_mounts_are_warned(option):
    values = bare_metal_config(workers=1)
    values["backup"]["enabled"] = False
    values["storage"]["nfs"]["mountOptions"] = ["nfsvers=4.1", option, "timeo=10"]
    assert warnings_of(values) == [
        f"gpu-cluster:storage.nfs.mountOptions has {option}: when the server does not answer "
        "in time, reads and writes fail half done, which \"can cause silent data corruption\" "
        "(nfs(5)), e.g. in Katib's and Pipelines' MySQL on this storage; use hard (the "
        "default options)"]


def test_soft_efs_mounts_are_warned():
    values = cloud_config()
    values["storage"]["efs"]["mountOptions"] = ["nfsvers=4.1", "soft"]
    [warning] = [w for w in warnings_of(values) if "do not autoscale" not in w]
    assert warning.startswith("gpu-cluster:storage.efs.mountOptions has soft:")


def test_a_repository_beside_a_local_copy_is_warned():
    [warning] = [w for w in warnings_of(kubeflow_values(
        repository="https://git.example.com/mirror/manifests", path="/opt/manifests"))
        if "kubeflow.source" in w]
    assert "gpu-cluster:kubeflow.source.path (/opt/manifests) replaces it" in warning


def test_a_repository_read_for_another_ref_is_not_warned():
    assert not [w for w in warnings_of(kubeflow_values(
        repository="https://git.example.com/mirror/manifests", ref="v1.10.0"))
        if "kubeflow.source" in w]


def test_every_warning_names_a_key():
    values = copy.deepcopy(kubeflow_values(repository="https://git.example.com/m/manifests"))
    values["backup"].pop("enabled")
    values["storage"]["nfs"]["mountOptions"] = ["soft"]
    warnings = warnings_of(values)
    assert len(warnings) == 3
    assert all("gpu-cluster:" in warning for warning in warnings), warnings


def test_gpu_taints_gpu_pods_do_not_tolerate_are_warned_by_key():
    values = bare_metal_config(workers=2)
    values["hosts"][1]["taints"] = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
                                    {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
                                    {"key": "soft", "effect": "PreferNoSchedule"}]
    values["hosts"][2].update(gpus=0)
    del values["hosts"][2]["gpuModel"]
    values["hosts"][2]["taints"] = [{"key": "cpu-only", "effect": "NoExecute"}]
    cloud = cloud_config()
    cloud["pools"][0]["taints"] = [{"key": "spot", "effect": "NoExecute"}]
    found = [w for w in warnings_of(values) + warnings_of(cloud) if "taints[" in w]
    # gpu001 has no GPUs: its taints keep GPU pods off where they do not run anyway.
    assert [w.split(": ", 1)[0] for w in found] == [
        "hosts[1] (gpu000).taints[0] (dedicated=ml:NoSchedule)",
        "pools[0] (gpu).taints[0] (spot:NoExecute)"]
    assert found[0].endswith("Taint GPU nodes nvidia.com/gpu=<value>:NoSchedule")


def test_several_ec2_controllers_on_hybrid_say_what_stays_on_the_first():
    values = hybrid_config()
    assert not [w for w in warnings_of(values) if "controlPlane" in w]
    values["aws"]["vpc"] = {"availabilityZones": 3}
    values["kubernetes"] = {"controlPlane": {"replicas": 3}}
    [warning] = [w for w in warnings_of(values) if "controlPlane" in w]
    assert warning.startswith("gpu-cluster:kubernetes.controlPlane.replicas is 3:")
    assert "the VPN runs on the first controller's instance only" in warning


def test_several_ec2_controllers_on_cloud_say_what_stays_on_the_first():
    values = cloud_config()
    assert not [w for w in warnings_of(values) if "controlPlane" in w]
    values["aws"]["vpc"] = {"availabilityZones": 3}
    values["kubernetes"] = {"controlPlane": {"replicas": 3}}
    [warning] = [w for w in warnings_of(values) if "controlPlane" in w]
    assert warning.startswith("gpu-cluster:kubernetes.controlPlane.replicas is 3:")
    assert "the pools' join-token rotation runs on the first controller's instance only" \
        in warning


@pytest.mark.parametrize("replicas, egress, warned", [(3, None, False), (5, None, True),
                                                      (3, "nat", False), (5, "nat", True)])
def test_a_stack_that_takes_the_regions_elastic_ips_is_warned(replicas, egress, warned):
    values = cloud_config()
    values["aws"]["vpc"] = {"availabilityZones": replicas, **({"egress": egress} if egress else {})}
    values["kubernetes"] = {"controlPlane": {"replicas": replicas}}
    found = [w for w in warnings_of(values) if "Elastic IPs" in w]
    assert bool(found) is warned
    if warned:
        count = replicas + (egress == "nat")
        assert found[0].startswith(f"gpu-cluster:aws.controlPlane.elasticIp: the stack takes "
                                   f"{count} Elastic IPs")
    values["aws"]["controlPlane"] = {"elasticIp": False}
    assert not [w for w in warnings_of(values) if "Elastic IPs" in w]


def test_spot_and_reserved_pools_say_what_the_program_does_not_do():
    values = cloud_config()
    values["pools"] = [
        {"name": "spot", "instanceType": "g5.12xlarge", "count": 1, "gpus": 4,
         "capacity": "mixed"},
        {"name": "block", "instanceType": "p5.48xlarge", "count": 0, "max": 2, "gpus": 8,
         "capacityReservation": "cr-0123456789abcdef0", "capacityBlock": True}]
    spot, reservation, block = [w for w in warnings_of(values)
                                if w.startswith("gpu-cluster:pools[")]
    assert spot.startswith("gpu-cluster:pools[0] (spot).capacity is mixed: EC2 reclaims spot")
    assert "gpu-cluster/capacity=spot" in spot
    assert reservation.startswith("gpu-cluster:pools[1] (block).capacityReservation: the "
                                  "program does not read cr-0123456789abcdef0: its instance "
                                  "type must be p5.48xlarge")
    assert "(max 2)" in reservation
    assert "30 minutes before it ends" in block
