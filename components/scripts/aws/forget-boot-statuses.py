"""usage: forget-boot-statuses.py SSM_CLIENT EC2_CLIENT REGION CLUSTER STATUS_PATH

Deletes the boot statuses below STATUS_PATH (one SSM parameter per instance id, written by
each instance's boot: scripts/boot/run-boot.sh) of the instances of cluster CLUSTER that
EC2 no longer lists as live, and prints the names it deleted, one a line. Run by the
controller's pool-node watcher, with the controller's own role.

Every status is listed (GetParametersByPath, every page) and every live instance read
before anything is deleted, so an error there exits 1 having deleted nothing; a failed
delete stops the run (the timer runs it again). A parameter whose last part is not an
instance id is never touched. SSM_CLIENT (ssm-parameter.py) signs and
sends, EC2_CLIENT (ec2-instances.py) lists the instances; both are kept beside this file.
"""

import re
import runpy
import sys

# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Instance.html: i- and 8 or 17
# hexadecimal digits.
INSTANCE_ID = re.compile(r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})")


def statuses(ssm, region, path):
    """The names of every parameter below `path` (GetParametersByPath: at most 10 a page)."""
    names, token = [], None
    while True:
        request = {"Path": path, "Recursive": True, "MaxResults": 10}
        if token:
            request["NextToken"] = token
        answer = ssm["call_ssm"](region, "GetParametersByPath", request)
        names.extend(parameter["Name"] for parameter in answer.get("Parameters", []))
        token = answer.get("NextToken")
        if not token:
            return names


def gone(names, live_ids):
    """The statuses of instances that are not live, in their order."""
    return [name for name in names
            if INSTANCE_ID.fullmatch(name.rsplit("/", 1)[-1])
            and name.rsplit("/", 1)[-1] not in live_ids]


def main(argv):
    if len(argv) != 6:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    ssm, ec2 = runpy.run_path(argv[1]), runpy.run_path(argv[2])
    region, cluster, path = argv[3:]
    try:
        live_ids = set(ec2["live_instance_ids"](ssm, region, cluster))
        for name in gone(statuses(ssm, region, path), live_ids):
            ssm["delete"](region, name)
            print(name)
    except ssm["HttpError"] as error:
        print(error, file=sys.stderr)
        return 1
    # SyntaxError: EC2's XML unreadable (xml.etree.ElementTree.ParseError is one).
    except (OSError, ValueError, KeyError, SyntaxError) as error:
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
