"""usage: ec2-instances.py SSM_CLIENT REGION CLUSTER

Prints the node names of the instances of cluster CLUSTER (tag gpu-cluster/cluster) that
EC2 lists as pending, running, stopping or stopped, one a line: the first label of each
private DNS name, lower-cased, as the kubelet names its node after the host name
(k8s.io/component-helpers/node/util GetHostname). Terminated instances lose their private
address, so the live ones are what can be named.

EC2 DescribeInstances with the instance's own role, standard library only; the signing,
IMDSv2 and HTTP come from SSM_CLIENT (ssm-parameter.py, kept on the controller beside this
file). Every page is read; any error exits 1 with nothing on stdout, so the caller never
takes a partial answer for the whole. EC2_ENDPOINT_URL overrides the endpoint (tests).
"""
# Optional inputs: EC2_ENDPOINT_URL

import datetime
import os
import runpy
import sys
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


def live_instances(client, region, cluster):
    """(node name, instance id) of each live instance of `cluster`, by name."""
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
            state = item.findtext("{*}instanceState/{*}name", "")
            dns = item.findtext("{*}privateDnsName", "")
            if state in LIVE_STATES and dns:
                instances.add((dns.split(".", 1)[0].lower(), item.findtext("{*}instanceId", "")))
        next_token = answer.findtext("{*}nextToken", "")
        if not next_token:
            return sorted(instances)


def main(argv):
    if len(argv) != 4:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    client = runpy.run_path(argv[1])
    try:
        names = sorted({name for name, _ in live_instances(client, argv[2], argv[3])})
    except client["HttpError"] as error:
        print(error, file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError, ElementTree.ParseError) as error:
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 1
    sys.stdout.write("".join(f"{name}\n" for name in names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
