"""The instance ids of cluster CLUSTER's instances (tag gpu-cluster/cluster) that EC2 lists
as pending, running, stopping or stopped: live_instance_ids(SSM_CLIENT, REGION, CLUSTER), for
forget-boot-statuses.py, which loads this file with runpy (no command line of its own).

EC2 DescribeInstances with the instance's own role, standard library only; the signing,
IMDSv2 and HTTP come from SSM_CLIENT (ssm-parameter.py, kept on the controller beside this
file). Every page is read; any error raises, so the caller never takes a partial answer for
the whole. EC2_ENDPOINT_URL overrides the endpoint (tests).
"""
# Optional inputs: EC2_ENDPOINT_URL

import datetime
import os
import urllib.parse
import xml.etree.ElementTree as ElementTree

CLUSTER_TAG = "gpu-cluster/cluster"
LIVE_STATES = ("pending", "running", "stopping", "stopped")
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstances.html
API_VERSION = "2016-11-15"


def request_body(cluster, next_token):
    fields = {"Action": "DescribeInstances", "Version": API_VERSION, "MaxResults": "1000",
              "Filter.1.Name": f"tag:{CLUSTER_TAG}", "Filter.1.Value.1": cluster,
              "Filter.2.Name": "instance-state-name"}
    for index, state in enumerate(LIVE_STATES, 1):
        fields[f"Filter.2.Value.{index}"] = state
    if next_token:
        fields["NextToken"] = next_token
    return urllib.parse.urlencode(fields).encode()


def live_instance_ids(client, region, cluster):
    """The ids of the live instances of `cluster`, sorted."""
    endpoint = os.environ.get("EC2_ENDPOINT_URL", f"https://ec2.{region}.amazonaws.com")
    host = urllib.parse.urlsplit(endpoint).netloc
    credentials = client["instance_credentials"]()
    instances, next_token = set(), None
    while True:
        body = request_body(cluster, next_token)
        headers = client["sigv4"](
            credentials, region, "ec2", host,
            {"content-type": "application/x-www-form-urlencoded; charset=utf-8"}, body,
            datetime.datetime.now(datetime.timezone.utc))
        answer = ElementTree.fromstring(client["http"]("POST", endpoint + "/", headers, body))
        # Any namespace ({*}, Python 3.8+): the answer's is that of the API version.
        for item in answer.iterfind("{*}reservationSet/{*}item/{*}instancesSet/{*}item"):
            if item.findtext("{*}instanceState/{*}name", "") in LIVE_STATES:
                instances.add(item.findtext("{*}instanceId", ""))
        next_token = answer.findtext("{*}nextToken", "")
        if not next_token:
            return sorted(instances - {""})
