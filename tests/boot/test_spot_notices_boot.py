"""A pool machine booted from the program's user data through Debian's real cloud-init
(boot_cases.run_boot: every step on the stubbed host, AWS emulated), which then, as the
booted instance, runs the service the spot-notices step installed while the emulated IMDS
(169.254.169.254, IMDSv2 tokens required) first announces nothing, then a Spot interruption.

No systemd runs in the sandbox (cloud-init's stages run as sandbox.bash's commands), so the
service's ExecStart runs as systemd would start the installed unit: its EnvironmentFile read
as KEY=VALUE lines, its StateDirectory made below /var/lib; the two runs are two polls of
the running service (SPOT_NOTICE_POLLS). The kubelet's kubectl, at the distribution's
node_kubectl path, is tests/scripts/stubs/spot-kubectl, which records its calls and keeps
the node's pods."""

import shlex
from pathlib import Path

import pytest

from components.common.step_text import step_inputs
from tests.boot.boot_cases import BOOTS, TEMPLATE, run_boot
from tests.boot.cloud_init import SYSTEMD_PATH
from tests.builders import PROJECT_DIR

# A k0s GPU pool of the dev example and the RKE2 variant's GPU pool.
CASES = [case for case in BOOTS if case.resource.type == TEMPLATE
         and case.id in ("dev/dev-a10g-template", "cloud-rke2/test-gpu-template")]
NODE = "ip-10-0-1-23"
# The node's pods, as the handler's jsonpath prints them: a DaemonSet's, a static pod's,
# and two the drain evicts.
PODS = ("kube-system|nvidia-device-plugin-x7k2p|DaemonSet||\n"
        f"kube-system|kube-proxy-{NODE}|Node|4b1c9d|\n"
        "team-a|train-llm-0|Job||\n"
        "team-b|notebook-7d9f-abcde|ReplicaSet||\n")
NOTICE = '{"action": "terminate", "time": "2026-11-29T10:02:00Z"}'
UNIT = "/etc/systemd/system/gpu-cluster-spot-notices.service"

AFTER_BOOT = f"""set -euo pipefail
sandbox=$1
root=$GPU_CLUSTER_ROOT
unit=$root{UNIT}
env_file=$(sed -n 's/^EnvironmentFile=//p' "$unit")
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
state_dir=$(sed -n 's/^StateDirectory=//p' "$unit")
# The instance's host name (this UTS namespace's), which names its node.
/usr/bin/hostname {NODE}
# The EnvironmentFile's KEY=VALUE lines, their values unquoted as systemd does.
set -a
source "$root$env_file"
set +a
settings=()
for name in $(sed -n 's/^\\([A-Z_]*\\)=.*/\\1/p' "$root$env_file"); do
  settings+=("$name=${{!name}}")
done
[[ "$SPOT_NOTICE_STATE" == "/var/lib/$state_dir" ]]
mkdir -p "$root$SPOT_NOTICE_STATE"
read -r -a words <<<"$NODE_KUBECTL"
ln -sfn {shlex.quote(str(PROJECT_DIR / "tests/scripts/stubs/spot-kubectl"))} "$root${{words[0]}}"
printf '%s' {shlex.quote(PODS)} >"$STUB_STATE/pods"
# service POLLS: ExecStart in the environment systemd gives the unit: its PATH, the
# EnvironmentFile's settings; then the stub root and the kubectl stub's log.
service() {{
  /usr/bin/env -i PATH={SYSTEMD_PATH} "${{settings[@]}}" \\
    SPOT_NOTICE_STATE="$root$SPOT_NOTICE_STATE" GPU_CLUSTER_ROOT="$root" \\
    STUB_CALLS="$STUB_CALLS" STUB_STATE="$STUB_STATE" SPOT_NOTICE_POLLS=$1 "$root$exec_start"
}}
echo "--- no notice yet"
service 1
items=$sandbox/aws/imds-items/latest/meta-data/spot
mkdir -p "$items"
printf '%s' {shlex.quote(NOTICE)} >"$items/instance-action"
echo "--- the interruption notice, polled twice"
service 2
"""


def test_the_cases_are_there():
    assert len(CASES) == 2


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_an_interruption_after_boot_cordons_then_drains_the_node(case, tmp_path):
    assert case.steps[-2:] == ["join-worker", "spot-notices"]

    run, host, _ = run_boot(case, tmp_path, after_boot=AFTER_BOOT)

    assert run.after_boot_status == 0, run.after_boot_output + run.output
    # The stub logs `k0s kubectl ARGS` and RKE2's `kubectl ARGS` alike, as "kubectl ARGS".
    node_kubectl = step_inputs(case.scripts[-1])["NODE_KUBECTL"].split()
    kubelet = " ".join(["kubectl", *node_kubectl[node_kubectl.index("kubectl") + 1
                                                  if "kubectl" in node_kubectl else 1:],
                        "--request-timeout=10s"])
    assert kubelet.startswith("kubectl --kubeconfig /var/lib/"), node_kubectl
    listing = (f"{kubelet} get pods --all-namespaces --field-selector spec.nodeName={NODE} -o "
               "jsonpath={range .items[*]}")
    evictions = [f"{kubelet} create --raw /api/v1/namespaces/{pod}/eviction -f -"
                 for pod in ("team-a/pods/train-llm-0", "team-b/pods/notebook-7d9f-abcde")]
    kubectl = ["LIST" if call.startswith(listing) else call
               for call in host.calls() if call.startswith("kubectl ")]
    assert kubectl == [f"{kubelet} cordon {NODE}", "LIST", *evictions, "LIST", "LIST"], \
        run.after_boot_output
    # Before the notice nothing was called; the second poll after it changed nothing.
    before, after = run.after_boot_output.split("--- the interruption notice, polled twice")
    assert "cordon" not in before, before
    assert after.count("EC2 interrupts this Spot instance: terminate at 2026-11-29T10:02:00Z") == 1
    assert f"drained node {NODE}: only DaemonSet and static pods are left" in after
    # The DaemonSet's and the static pod stay.
    assert (Path(host.env["STUB_STATE"]) / "pods").read_text().splitlines() == \
        PODS.splitlines()[:2]
    # IMDSv2 as the launch template requires: the items asked for with a valid token.
    handler = [r for r in run.aws.imds_requests
               if r["path"].startswith(("/latest/meta-data/spot/", "/latest/meta-data/events/"))]
    assert {r["token"] for r in handler} == {"valid"}, handler
    assert [r["status"] for r in handler if r["path"].endswith("/instance-action")] == \
        [404, 200, 200]
