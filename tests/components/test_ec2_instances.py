"""ec2-instances.py, which tells the controller's pool-node watcher which instances are live,
and forget-boot-statuses.py, which deletes the boot statuses of the others: run in a
subprocess over real HTTP on loopback against moto's server with IAM authentication on
(moto checks each request's SigV4 signature and the role's policy), with the role
credentials a fake IMDSv2 hands out. Nothing here leaves 127.0.0.1."""

import http.server
import json
import subprocess
import threading

import pytest

from components.aws.pool_node_cleanup import EC2_INSTANCES, FORGET_BOOT_STATUSES
from components.common.bundle import SCRIPTS_DIR
from components.common.step_text import SSM_READER
from tests.components.aws_fakes import (PYTHON, REGION, SETUP, TIMEOUT_SECONDS, boto3_client,
                                       moto_on_loopback, role_session,
                                       signed_requests_only)
from tests.components.fake_imds import FakeImds, ImdsState

pytestmark = pytest.mark.tools

# moto's stand-in image (moto/ec2/resources/amis.json).
IMAGE = "ami-12c6146b"
STATUSES = "/gpu-cluster/dev/boot-status"


@pytest.fixture(scope="module")
def ec2():
    """moto's server with instances of cluster dev (live, stopped, terminated), of another
    cluster and untagged, then IAM authentication on with a role that may only describe."""
    with moto_on_loopback() as endpoint:
        client = boto3_client("ec2", endpoint, SETUP)

        def launch(count: int, **tags) -> list[dict]:
            specification = [{"ResourceType": "instance", "Tags": [
                {"Key": k, "Value": v} for k, v in tags.items()]}] if tags else []
            return client.run_instances(ImageId=IMAGE, MinCount=count, MaxCount=count,
                                        TagSpecifications=specification)["Instances"]

        live = launch(2, **{"gpu-cluster/cluster": "dev", "gpu-cluster/pool": "a10g"})
        stopped = launch(1, **{"gpu-cluster/cluster": "dev", "gpu-cluster/pool": "cpu"})
        gone = launch(1, **{"gpu-cluster/cluster": "dev", "gpu-cluster/pool": "a10g"})
        other = launch(1, **{"gpu-cluster/cluster": "prod", "gpu-cluster/pool": "a10g"})
        untagged = launch(1)
        client.stop_instances(InstanceIds=[stopped[0]["InstanceId"]])
        client.terminate_instances(InstanceIds=[gone[0]["InstanceId"]])
        reader = role_session(endpoint, "gpu-cluster-controller", ["ec2:DescribeInstances"])
        watcher = role_session(endpoint, "gpu-cluster-watcher", [
            "ec2:DescribeInstances", "ssm:GetParametersByPath", "ssm:DeleteParameter"])
        ids = {key: [i["InstanceId"] for i in group] for key, group in
               (("live", live + stopped), ("gone", gone), ("other", other + untagged))}
        # Boot statuses as the instances write them (run-boot.sh), 23 of them so the
        # listing takes three pages of 10; one parameter that is not an instance's.
        ssm = boto3_client("ssm", endpoint, SETUP)
        statuses = {f"{STATUSES}/a10g/{i['InstanceId']}": i for i in live + gone}
        statuses.update({f"{STATUSES}/cpu/{i['InstanceId']}": i for i in stopped})
        statuses.update({f"{STATUSES}/a10g/i-{n:017x}": None for n in range(19)})
        for name in [*statuses, f"{STATUSES}/a10g/notes", "/gpu-cluster/prod/boot-status/a10g/"
                     + other[0]["InstanceId"]]:
            ssm.put_parameter(Name=name, Value="ready", Type="String")
        with signed_requests_only(endpoint):
            yield endpoint, reader, ids, watcher, statuses


@pytest.fixture
def imds():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeImds)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=TIMEOUT_SECONDS)


# How forget-boot-statuses.py loads it: runpy, beside ssm-parameter.py.
LOAD = """import json, runpy, sys
ec2, ssm = runpy.run_path(sys.argv[1]), runpy.run_path(sys.argv[2])
try:
    print(json.dumps(ec2["live_instance_ids"](ssm, sys.argv[3], sys.argv[4])))
except ssm["HttpError"] as error:
    print(error, file=sys.stderr)
    sys.exit(1)
"""


def run(imds, endpoint: str, credentials: dict, cluster: str = "dev"):
    imds.state = ImdsState(credentials=dict(credentials))
    return subprocess.run(
        [PYTHON, "-c", LOAD, str(SCRIPTS_DIR / EC2_INSTANCES.path),
         str(SCRIPTS_DIR / SSM_READER.path), REGION, cluster],
        capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
        env={"IMDS_ENDPOINT_URL": imds.url, "EC2_ENDPOINT_URL": endpoint,
             "PATH": "/usr/bin:/bin"})


def test_it_lists_the_live_instances_of_the_cluster_only(ec2, imds):
    endpoint, reader, ids, *_ = ec2
    result = run(imds, endpoint, reader)
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    # Running and stopped instances of dev; not the terminated one, another cluster's or
    # an untagged one.
    assert listed == sorted(ids["live"]) and len(listed) == 3
    assert not set(listed) & set(ids["gone"] + ids["other"])


def test_a_refused_call_raises(ec2, imds):
    endpoint, reader, *_ = ec2
    wrong = {**reader, "SecretAccessKey": "not-the-key"}
    result = run(imds, endpoint, wrong)
    assert result.returncode == 1 and result.stdout == ""
    assert "HTTP 401" in result.stderr and "AuthFailure" in result.stderr


def forget(imds, endpoint: str, credentials: dict):
    imds.state = ImdsState(credentials=dict(credentials))
    return subprocess.run(
        [PYTHON, str(SCRIPTS_DIR / FORGET_BOOT_STATUSES.path), str(SCRIPTS_DIR / SSM_READER.path),
         str(SCRIPTS_DIR / EC2_INSTANCES.path), REGION, "dev", STATUSES],
        capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
        env={"IMDS_ENDPOINT_URL": imds.url, "EC2_ENDPOINT_URL": endpoint,
             "SSM_ENDPOINT_URL": endpoint, "PATH": "/usr/bin:/bin"})


def test_the_boot_statuses_of_gone_instances_are_deleted_and_no_other(ec2, imds):
    endpoint, _, _, watcher, statuses = ec2
    # Refused without a valid signature: nothing is deleted.
    refused = forget(imds, endpoint, {**watcher, "SecretAccessKey": "not-the-key"})
    assert refused.returncode == 1 and refused.stdout == ""

    result = forget(imds, endpoint, watcher)

    assert result.returncode == 0, result.stderr
    gone = sorted(name for name, instance in statuses.items()
                  if instance is None or instance["InstanceId"] in ec2[2]["gone"])
    assert sorted(result.stdout.splitlines()) == gone and len(gone) == 20
    ssm = boto3_client("ssm", endpoint, watcher)
    left = {p["Name"] for page in ssm.get_paginator("get_parameters_by_path").paginate(
        Path="/gpu-cluster", Recursive=True) for p in page["Parameters"]}
    kept = set(statuses) - set(gone)
    other_cluster = [n for n in left if n.startswith("/gpu-cluster/prod/boot-status/a10g/i-")]
    assert left == kept | {f"{STATUSES}/a10g/notes", *other_cluster}
    assert len(kept) == 3 and len(other_cluster) == 1
    # A second run finds nothing more to delete.
    again = forget(imds, endpoint, watcher)
    assert again.returncode == 0 and again.stdout == ""
