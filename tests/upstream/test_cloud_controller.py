"""The AWS cloud controller manager against its pinned release (kubernetes/cloud-provider-aws
v1.35.2, config/versions.py CLOUD_PROVIDER_AWS): the vendored chart through the official
`helm template` with the program's values, then kubernetes-validate --strict; every flag the
program passes against the flags the release's command registers; its cloud config through
git, the reader of the syntax gcfg takes."""

import functools
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from components.aws import cloud_controller
from components.distributions.rke2 import SERVER_ONLY_TAINT, Rke2
from config import versions
from tests.builders import PROJECT_DIR
from tests.components.test_gpu_isolation import Taint, tolerated
from tests.k8s_tools import validate_strict
from tests.upstream.test_pinned_upstream import by_kind, helm

CHART = PROJECT_DIR / versions.CLOUD_PROVIDER_AWS_CHART
# The flags `aws-cloud-controller-manager` registers, where the program's come from: its
# command is k8s.io/cloud-provider's (cmd/aws-cloud-controller-manager/main.go:81,
# app.NewCloudControllerManagerCommand) at the versions its go.mod pins (v1.35.2 go.mod:27-30:
# cloud-provider, component-base and controller-manager v0.35.0).
REGISTERED = {
    # k8s.io/cloud-provider v0.35.0 options/cloudprovider.go:36-42, added to the "generic"
    # set by options/kubecloudshared.go:55 (options/options.go:149).
    "cloud-provider": ("kubernetes/cloud-provider", "v0.35.0", "options/cloudprovider.go"),
    "cloud-config": ("kubernetes/cloud-provider", "v0.35.0", "options/cloudprovider.go"),
    # k8s.io/controller-manager v0.35.0 options/generic.go:65 (options/options.go:148).
    "controllers": ("kubernetes/controller-manager", "v0.35.0", "options/generic.go"),
    # k8s.io/component-base v0.35.0 logs/api/v1/options.go:370, added to the "global" set
    # by app/controllermanager.go:129 (logsapi.AddFlags).
    "v": ("kubernetes/component-base", "v0.35.0", "logs/api/v1/options.go"),
}
# The controller names `--controllers` accepts: the keys of DefaultInitFuncConstructors
# (k8s.io/cloud-provider v0.35.0 app/controllermanager.go:433-449, names/controller_names.go:
# 49-54) and their aliases (:60-67).
CONTROLLER_NAMES = {"cloud-node-controller", "service-lb-controller", "node-route-controller",
                    "cloud-node-lifecycle-controller", "cloud-node", "service", "route",
                    "cloud-node-lifecycle", "tagging"}
MIRRORS = Path("/work/.mirror")
# The taints the controllers carry until it initialised them: an external cloud provider's
# (k8s.io/cloud-provider api/well_known_taints.go TaintExternalCloudProvider), the RKE2
# servers' that run no workloads, and the usual control-plane one.
CONTROLLER_TAINTS = [
    Taint(key="node.cloudprovider.kubernetes.io/uninitialized", value="true", effect="NoSchedule"),
    Taint(**dict(zip(("key", "value", "effect"), SERVER_ONLY_TAINT.replace("=", ":").split(":")))),
    Taint(key="node-role.kubernetes.io/control-plane", value="", effect="NoSchedule")]


@functools.cache
def rendered() -> tuple:
    with tempfile.TemporaryDirectory() as folder:
        values = Path(folder) / "values.yaml"
        values.write_text(yaml.safe_dump(cloud_controller.chart_values(
            Rke2.controller_node_labels)))
        out = subprocess.run([str(helm()), "template", "aws-cloud-controller-manager",
                              str(CHART), "-n", cloud_controller.NAMESPACE, "-f", str(values)],
                             capture_output=True, text=True, check=True).stdout
    return tuple(o for o in yaml.safe_load_all(out) if o)


def pod_spec() -> dict:
    [daemonset] = by_kind(list(rendered()), "DaemonSet")
    return daemonset["spec"]["template"]["spec"]


def test_the_chart_is_the_pinned_release():
    # Upstream's Chart.yaml ends in a second, empty document.
    [chart] = [d for d in yaml.safe_load_all((CHART / "Chart.yaml").read_text()) if d]
    assert chart["version"] == versions.CLOUD_PROVIDER_AWS_CHART_VERSION
    upstream = yaml.safe_load((CHART / "values.yaml").read_text())
    assert upstream["image"]["repository"] == versions.CLOUD_PROVIDER_AWS_IMAGE_REPOSITORY
    assert versions.CLOUD_PROVIDER_AWS_IMAGE == (
        f"{versions.CLOUD_PROVIDER_AWS_IMAGE_REPOSITORY}:{versions.CLOUD_PROVIDER_AWS}@"
        + versions.IMAGE_DIGESTS[f"{versions.CLOUD_PROVIDER_AWS_IMAGE_REPOSITORY}:"
                                 f"{versions.CLOUD_PROVIDER_AWS}"])


def test_the_rendered_chart_is_valid_for_the_pinned_kubernetes(tmp_path):
    validate_strict(list(rendered()), tmp_path / "ccm.yaml")


def test_it_runs_the_pinned_image_on_the_hosts_network_on_the_controllers_alone():
    spec = pod_spec()
    [container] = spec["containers"]
    assert container["image"] == versions.CLOUD_PROVIDER_AWS_IMAGE
    assert container["args"] == cloud_controller.args()
    # IMDS answers one hop away only (http_put_response_hop_limit=1).
    assert spec["hostNetwork"] is True
    assert spec["nodeSelector"] == {"node-role.kubernetes.io/control-plane": "true"}
    for taint in CONTROLLER_TAINTS:
        assert tolerated(taint, spec["tolerations"]), taint
    [mount] = container["volumeMounts"]
    assert container["args"][2] == (f"--cloud-config={mount['mountPath']}/"
                                     f"{cloud_controller.CLOUD_CONFIG_FILE}")
    [volume] = spec["volumes"]
    assert volume["configMap"]["name"] == cloud_controller.CLOUD_CONFIG_MAP
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert spec["serviceAccountName"] == cloud_controller.SERVICE_ACCOUNT


def test_its_identity_is_the_chart_s_service_account_and_cluster_role():
    objects = list(rendered())
    [binding] = by_kind(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == cloud_controller.CLUSTER_ROLE
    assert binding["subjects"] == [{"apiGroup": "", "kind": "ServiceAccount",
                                    "name": cloud_controller.SERVICE_ACCOUNT,
                                    "namespace": cloud_controller.NAMESPACE}]
    [role] = by_kind(objects, "ClusterRole")
    # Node deletion is its lifecycle controller's work (nodes: '*').
    assert {"apiGroups": [""], "resources": ["nodes"], "verbs": ["*"]} in role["rules"]


def test_every_flag_it_passes_is_registered_by_the_pinned_release():
    for flag in cloud_controller.args():
        name = re.fullmatch(r"--([a-z][a-z0-9-]*)=.+", flag).group(1)
        assert name in REGISTERED, flag
    [controllers] = [f for f in cloud_controller.args() if f.startswith("--controllers=")]
    assert set(controllers.split("=", 1)[1].split(",")) <= CONTROLLER_NAMES
    # The node controllers only: no load balancer for a user's Service.
    assert set(cloud_controller.CONTROLLERS) == {"cloud-node-controller",
                                                 "cloud-node-lifecycle-controller"}


@pytest.mark.parametrize("flag", sorted(REGISTERED))
def test_the_registered_flags_are_the_sources(flag):
    """REGISTERED against the sources, where a mirror of the repositories is at hand (git
    show TAG:FILE); elsewhere skipped."""
    repository, tag, path = REGISTERED[flag]
    git_dir = MIRRORS / repository.replace("/", "+") / "repo"
    if not git_dir.is_dir():
        pytest.skip(f"no mirror of {repository} at {git_dir}")
    source = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{tag}:{path}"],
                            capture_output=True, text=True, check=True).stdout
    assert re.search(r'fs\.\w+(?:P)?\([^,]+,\s*"%s"' % re.escape(flag), source), (flag, path)


@pytest.mark.parametrize("cluster", ["dev", "prod", "a", "gpu-cluster-0", "x" * 49])
def test_git_reads_the_cloud_config_as_one_global_variable_the_release_has(cluster, tmp_path):
    """The cloud config is read by gcfg (gopkg.in/gcfg.v1 v1.2.3, cloud-provider-aws v1.35.2
    go.mod:23), whose syntax "is based on that used by git config" (its doc.go); with no Go
    here, git, that syntax's own reader, reads the file: one section, one variable, the
    cluster's name verbatim (any name config/model.py's cluster_name takes: a DNS label of
    at most 49 characters). The release's CloudConfig has that variable in its Global
    section (pkg/providers/v1/config/config.go:42-70), where a mirror is at hand."""
    path = tmp_path / cloud_controller.CLOUD_CONFIG_FILE
    path.write_text(cloud_controller.cloud_config(cluster))
    listed = subprocess.run(["git", "config", "--file", str(path), "--list"],
                            capture_output=True, text=True, check=True).stdout
    # git lower-cases section and variable names; gcfg matches them to fields case-blind.
    assert listed == f"global.kubernetesclusterid={cluster}\n"
    git_dir = MIRRORS / "kubernetes+cloud-provider-aws" / "repo"
    if not git_dir.is_dir():
        pytest.skip(f"no mirror of kubernetes/cloud-provider-aws at {git_dir}")
    source = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show",
         f"{versions.CLOUD_PROVIDER_AWS}:pkg/providers/v1/config/config.go"],
        capture_output=True, text=True, check=True).stdout
    global_section = re.search(r"\tGlobal struct \{(.*?)\n\t\}", source, re.S).group(1)
    assert re.search(r"^\t\tKubernetesClusterID\s+string$", global_section, re.M)
