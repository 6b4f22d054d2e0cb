"""Every checkov finding the project accepts, in one place, each with its reason.

Kubernetes findings are matched by check and `<stack>:<Kind>.<namespace>.<name>` (globs);
secret findings by check, repository path and the SHA-1 checkov reports of the value, so a
new secret in the same file is still a failure. An entry that matches nothing fails the
test too: the table never hides more than it says."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Skip:
    check: str
    where: str
    reason: str


DEVICE_PLUGIN = "*:DaemonSet.kube-system.nvidia-device-plugin"
PROVISIONERS = "*:Deployment.*-provisioner.*-provisioner"
GPU_SMOKE = "*:Job.gpu-acceptance.gpu-smoke-*"
DCGM_EXPORTER = "*:DaemonSet.kube-system.dcgm-exporter"
GRAFANA = "*:Deployment.monitoring.grafana"
MONITORING_READERS = "*:Deployment.monitoring.[pk]*"
CLUSTER_AUTOSCALER_README = tuple(
    f"vendor/cluster-autoscaler-chart-9.59.0/cluster-autoscaler/charts/cluster-autoscaler/{name}"
    for name in ("README.md", "README.md.gotmpl"))
CERT_MANAGER = "vendor/kubeflow-manifests-26.03/common/cert-manager/base/upstream/cert-manager.yaml"
# The device plugin of the stacks with the static CPU manager.
STATIC_CPU_STACKS = ("prod", "rke2")



def _on(where: str, *accepted: tuple[str, str]) -> list[Skip]:
    """The findings accepted on the workloads `where` names: (check, reason) pairs."""
    return [Skip(check, where, reason) for check, reason in accepted]


KUBERNETES = [
    *_on("*", (
        "CKV_K8S_15", "imagePullPolicy Always: every image is pinned to a release tag (the "
        "policy pack refuses latest and untagged images), so IfNotPresent runs the same image "
        "and still starts pods while the registry is unreachable"), (
        "CKV_K8S_43", "images by digest: tags name the upstream releases the project pins and "
        "tests in config/versions.py; the policy pack requires a tag or a digest"), (
        "CKV_K8S_11", "CPU limits: CFS quotas throttle the device plugin, the provisioners and "
        "the acceptance jobs' feeders; each container has a CPU request and a memory limit "
        "instead")),
    *_on(DEVICE_PLUGIN, (
        "CKV_K8S_8", "liveness probe: the device plugin serves no health endpoint; it "
        "re-registers when the kubelet restarts (upstream has no probe either)"), (
        "CKV_K8S_9", "readiness probe: nothing connects to the device plugin but the kubelet, "
        "through its socket"), (
        "CKV_K8S_23", "root: the plugin creates its socket in the kubelet's root-owned "
        "/var/lib/kubelet/device-plugins"), (
        "CKV_K8S_40", "high UID: runs as root, see CKV_K8S_23"), (
        "CKV_K8S_22", "read-only root filesystem: the NVIDIA runtime's hook writes the "
        "driver's libraries and ld.so.cache into the container's root")),
    *_on(PROVISIONERS, (
        "CKV_K8S_8", "liveness probe: nfs-subdir-external-provisioner serves no health "
        "endpoint (upstream's chart has no probe)"), (
        "CKV_K8S_9", "readiness probe: the provisioner serves nothing"), (
        "CKV_K8S_23", "root: upstream's image runs as root (its deploy/deployment.yaml sets no "
        "user); on the export that root is squashed to the anonymous user that owns the "
        "export's folder, where it makes every claim's folder"), (
        "CKV_K8S_40", "high UID: runs as root, see CKV_K8S_23"), (
        "CKV_K8S_38", "the provisioner watches claims and creates volumes through the API "
        "server with its service account's token")),
    *_on(GPU_SMOKE, (
        "CKV_K8S_23", "root: the CUDA base and sample images run as root and the job only runs "
        "nvidia-smi and vectorAdd once"), (
        "CKV_K8S_40", "high UID: the CUDA images' user, see CKV_K8S_23"), (
        "CKV_K8S_22", "read-only root filesystem: the NVIDIA runtime's hook writes into the "
        "container's root, see the device plugin")),
    *[skip for stack in STATIC_CPU_STACKS for skip in _on(
        f"{stack}:DaemonSet.kube-system.nvidia-device-plugin", (
            "CKV_K8S_16", "privileged: with the static CPU manager the plugin passes device "
            "specs, which upstream's chart runs privileged; the policy pack allows it for this "
            "component only"), (
            "CKV_K8S_20", "privilege escalation: implied by privileged, see CKV_K8S_16"), (
            "CKV_K8S_28", "NET_RAW: a privileged container has every capability, see "
            "CKV_K8S_16"), (
            "CKV_K8S_37", "capabilities: a privileged container has every capability, see "
            "CKV_K8S_16"))],
    *[skip for stack in ("lab", "dev") for skip in _on(
        f"{stack}:DaemonSet.kube-system.nvidia-device-plugin", (
            "CKV_K8S_39", "CAP_SYS_ADMIN: with deviceListStrategy volume-mounts the plugin "
            "mounts each allocated device list, as upstream's chart gives it (k8s-device-plugin "
            "v0.20.0 deployments/helm/nvidia-device-plugin/templates/_helpers.tpl "
            "requiresCapSysAdmin)"), (
            "CKV_K8S_25", "an added capability: CAP_SYS_ADMIN, see CKV_K8S_39"), (
            "CKV_K8S_37", "capabilities: CAP_SYS_ADMIN alone, see CKV_K8S_39"), (
            "CKV_K8S_28", "NET_RAW: the runtime's default set, with CAP_SYS_ADMIN added (see "
            "CKV_K8S_39)"), (
            "CKV_K8S_20", "privilege escalation: implied by CAP_SYS_ADMIN, see CKV_K8S_39"))],
    *_on(DCGM_EXPORTER, (
        "CKV_K8S_23", "root: the exporter reads the kubelet's root-owned pod-resources socket "
        "to label each GPU with its pod (upstream's chart runs it as root); it has no "
        "capabilities"), (
        "CKV_K8S_40", "high UID: runs as root, see CKV_K8S_23"), (
        "CKV_K8S_22", "read-only root filesystem: the NVIDIA runtime's hook writes the "
        "driver's libraries into the container's root, see the device plugin")),
    *_on(GRAFANA, (
        "CKV_K8S_40", "high UID: 472 is the image's grafana user, which owns its home "
        "(upstream's chart runs it so)"), (
        "CKV_K8S_22", "read-only root filesystem: Grafana writes below its home (plugins, "
        "sessions, its database on the data volume) and has not been run read-only")),
    *_on(MONITORING_READERS, (
        "CKV_K8S_38", "Prometheus discovers its targets and kube-state-metrics lists Nodes "
        "through the API server with their service accounts")),
    # Hardening not done yet in the add-ons' manifests (components/addons/gpu_support.py,
    # components/addons/shared_storage.py): accepted until they set it, then these entries go
    # (the test fails on an entry that matches nothing).
    *_on(DEVICE_PLUGIN, (
        "CKV_K8S_31", "follow-up: seccompProfile RuntimeDefault on the pod (upstream's chart "
        "sets none)"), (
        "CKV_K8S_29", "follow-up: a pod-level securityContext (seccomp)"), (
        "CKV_K8S_38", "follow-up: automountServiceAccountToken false; the plugin never calls "
        "the API server")),
    *_on(PROVISIONERS, (
        "CKV_K8S_31", "follow-up: seccompProfile RuntimeDefault on the pod (upstream's chart "
        "sets none)"), (
        "CKV_K8S_29", "follow-up: a pod-level securityContext (seccomp)"), (
        "CKV_K8S_28", "follow-up: drop ALL capabilities (it only needs CHOWN/DAC_OVERRIDE/"
        "FOWNER for volume folders)"), (
        "CKV_K8S_37", "follow-up: drop ALL capabilities, see CKV_K8S_28"), (
        "CKV_K8S_22", "follow-up: read-only root filesystem; it writes only to the mounted "
        "export")),
]


def _value(check: str, sha1: str, reason: str, *paths: str) -> list[tuple[Skip, str]]:
    """A value (the SHA-1 checkov reports of it) accepted in each of `paths`, for one
    reason."""
    return [(Skip(check, path, reason), sha1) for path in paths]


# (Skip: check, repository path, reason; SHA-1 of the value as checkov reports it)
SECRETS = [
    *_value("CKV_SECRET_6", "9a96960baa4d8c0559cf89f72b5f3486736762e9", "Bech32's alphabet "
            "(BIP 173), which age public keys are written in", "config/backup.py"),
    *_value("CKV_SECRET_6", "12b5bff998e9ee481ed69bfe49e0a16b0c7bc191", "the name of the AWS "
            "Secrets Manager secret holding carol's Kubeflow password hash, not its value",
            "esc/gpu-cluster-prod.yaml"),
    *_value("CKV_SECRET_6", "d096bf510e13cd822fc592a6722545a2276d9eab", "the name of the AWS "
            "Secrets Manager secret holding the SSH key, not its value",
            "esc/gpu-cluster-prod.yaml"),
    *_value("CKV_SECRET_6", "c2961a0e0bfd04d83a715ba7c960d5c677a277a2", "the name of the "
            "Secret the Kubeflow gateway reads its certificate from, not a secret value",
            "components/addons/kubeflow/overlay.py"),
    *_value("CKV_SECRET_6", "bbd8ac609aefe4addc19754aecda67f07a733dc8", "the name of a "
            "Kubernetes Secret (oauth2-proxy-credentials), not its value",
            "components/addons/kubeflow/overlay.py"),
    *_value("CKV_SECRET_6", "797ca1ab12ee9088580bd97899de59427758a911", "the name of an "
            "environment variable Dex reads its client secret from (OIDC_CLIENT_SECRET)",
            "components/addons/kubeflow/dex.py"),
    *_value("CKV_SECRET_6", "14b47470b37447bbdbe9469d422bc807134f01f0", "the name of the SSM "
            "parameter that holds the image mirror's password, not the password",
            "components/aws/ssm_paths.py"),
    *_value("CKV_SECRET_6", "4eee173cb1414f4010f41d5cc9dc755536caac30", "the command that "
            "stores the image mirror's password as a secret, without any value",
            "config/image_checks.py"),
    # The made-up Kubeflow password of the test stacks, and the command that sets one.
    *_value("CKV_SECRET_6", "e46b271d746b89b5fc5b524653935f46ebbbf1fc", "a test's throwaway "
            "Kubeflow password, for the deprecated shared login's keys",
            "tests/config/hostile_bases.py"),
    *_value("CKV_SECRET_6", "e46b271d746b89b5fc5b524653935f46ebbbf1fc", "a made-up Kubeflow "
            "password of the mirror tests' stack", "tests/images/test_config.py"),
    *_value("CKV_SECRET_6", "e46b271d746b89b5fc5b524653935f46ebbbf1fc", "the assignment of a "
            "made-up Kubeflow password in a test stack", "tests/config/test_config_errors.py",
            "tests/components/test_default_storage_class.py", "tests/config/test_input_rules.py"),
    *_value("CKV_SECRET_6", "e46b271d746b89b5fc5b524653935f46ebbbf1fc", "the command that sets "
            "the password, not a password", "config/kubeflow_checks.py",
            "tests/kubeflow/test_component.py"),
    *_value("CKV_SECRET_6", "e46b271d746b89b5fc5b524653935f46ebbbf1fc", "a made-up Kubeflow "
            "password of the rotation plan test", "tests/stacks/test_credential_rotation.py"),
    *_value("CKV_SECRET_6", "05bd3590733c6111684eb85adbeed0b50799c15e", "a made-up Kubeflow "
            "password of a test stack", "tests/config/test_config_errors.py"),
    *_value("CKV_SECRET_6", "f80cf23b2ca4d72a74dcbf262ff79441edea7200", "a test's throwaway "
            "LDAP bind password, which the test follows into Dex's environment",
            "tests/kubeflow/test_logins.py"),
    *_value("CKV_SECRET_6", "c3ff6057a7e48ddb17d832b6b0de36a8fd9acb35", "the made-up image "
            "mirror password the hostile-value tests start from", "tests/config/hostile_bases.py"),
    *_value("CKV_SECRET_6", "13e2e89cbce64ee3cfd6dee16c9732cdb79aab77", "a made-up value that "
            "tests error messages never quote secret config", "tests/config/test_refusals.py"),
    *_value("CKV_SECRET_4", "1a91d62f7ca67399625a4368a6ab5d4a3baa6073", "a release URL with "
            "made-up credentials that the config refuses", "tests/images/test_downloads.py"),
    *_value("CKV_SECRET_2", "25910f981e85ca04baf359199dd0bd4a3ae738b6", "AWS's documented "
            "example access key, in a stubbed credentials answer", "tests/components/aws_fakes.py"),
    *_value("CKV_SECRET_6", "ef05976d5672d9a762350e7cb52ce20cc13326a8", "a placeholder token in "
            "a made-up kubeconfig the merge test reads", "tests/distribute/test_merge.py"),
    # The script tests' fake keys and tokens, which they check never reach a log.
    *_value("CKV_SECRET_13", "28d6abad49ad962899ce2873a14390e6d4d0b6a7", "a fake OpenSSH key "
            "block (only the format's fixed header) that tests the host key never shows in "
            "logs", "tests/scripts/aws-boot.bats"),
    *_value("CKV_SECRET_13", "ae005b81041ab5c2946ff1619f1b118a5b5f4828", "a fake PEM block "
            "(base64 of the word server-key) that tests how the envelope passes keys",
            "tests/scripts/envelope.bats"),
    *_value("CKV_SECRET_13", "b83c9738d19c0c653be2f3bea24a7e7216c5bfb0", "a fake CA key block "
            "the envelope test passes to install-controller", "tests/scripts/envelope.bats"),
    *_value("CKV_SECRET_13", "acb6f654adcde8a14689b3aa30765cef56314518", "a fake CA key block "
            "the bundle test passes to install-controller", "tests/scripts/airgap-bundle.bats"),
    *_value("CKV_SECRET_13", "595015e253fae5ecfd500a5d315449897567afc8", "a fake PEM block for "
            "an existing CA in the script test", "tests/scripts/install-controller.bats"),
    *_value("CKV_SECRET_6", "142cf0879103b42c1cc5bf4a33921ffc07aaea1c", "a fake CA key the "
            "controller tests check never reaches a log", "tests/scripts/helpers/controller.bash"),
    *_value("CKV_SECRET_6", "546728d81d260fa22dae4d8702533c49e6c09ea0", "a fake admin key the "
            "script test checks never reaches a log", "tests/scripts/wait-for-api.bats"),
    *_value("CKV_SECRET_6", "df5308667a06bc652f1c9625d5ba0225ece53b69", "a made-up agent "
            "secret the script test checks never reaches a log", "tests/scripts/rke2-agent.bats",
            "tests/scripts/rke2-server.bats"),
    *_value("CKV_SECRET_6", "4b073b54ed968a0aac09986837a90ebcfc6aa71d", "a made-up server "
            "token the script test checks never reaches a log", "tests/scripts/rke2-server.bats"),
    *_value("CKV_SECRET_6", "55ee0bcfba1260bbec3dab425ed4800733a1e3ca", "a made-up second "
            "server token the script test refuses to apply", "tests/scripts/rke2-server.bats"),
    *_value("CKV_SECRET_6", "9c410dbf39eed2d59ab5c95f9545bf0276eeeb09", "a made-up value "
            "that is no controller token, which the join test refuses without showing it",
            "tests/scripts/install-controller.bats"),
    *_value("CKV_SECRET_6", "b6700e08fea7be1d7256865f54cedeb25496d217", "a made-up controller "
            "token standing in for the first controller's output in a rendered join step",
            "tests/scripts/ha-controllers.bats"),
    *_value("CKV_SECRET_6", "0860c23e3b772b77909e9cca53495bac891ff82d", "a made-up renewed "
            "agent token the script test checks never reaches a log",
            "tests/scripts/rke2-server.bats"),
    # Upstream's files, vendored byte for byte and pinned by sha256.
    *_value("CKV_SECRET_6", "8005fcba81e8f539d5b7ccf5ce249d0447085c4a", "upstream's published "
            "example OIDC client secret in the vendored release; the program never applies "
            "it: its own is random per stack",
            "vendor/kubeflow-manifests-26.03/common/dex/base/secret_params.env"),
    *_value("CKV_SECRET_6", "11f0b6aad889e6e3d00a24835dbbd060fcd0ca4d", "a base64 string in "
            "cert-manager's release manifest", CERT_MANAGER),
    *_value("CKV_SECRET_6", "f63a7ab07f42b48cfb61fd7fea0a6589c0b4881c", "a feature-gate name in "
            "a CRD description of cert-manager's release manifest", CERT_MANAGER),
    *_value("CKV_SECRET_6", "6b4e698f5d2f05443c5c09fdbc84b408b169cb14", "the placeholder "
            "'your-service-principal-client-secret' of the Azure example in cluster-autoscaler's "
            "chart README", *CLUSTER_AUTOSCALER_README),
    *_value("CKV_SECRET_6", "7a649c7b3e7266593f0aaf10d034787bdd598372", "the placeholder "
            "API key 'EXOxxx...' of the Exoscale example in cluster-autoscaler's chart README",
            *CLUSTER_AUTOSCALER_README),
    *_value("CKV_SECRET_6", "b7b08c827231feb6b3ec8698435e97629ea5e40a", "the placeholder "
            "API secret 'xxx-xxx...' of the Exoscale example in cluster-autoscaler's chart README",
            *CLUSTER_AUTOSCALER_README),
]

# AWS policies the example stacks' previews render (tests/scans/test_checkov_aws_policies.py),
# matched by check and `<stack>:<logical id>`.
AWS = [
    Skip("CKV_AWS_61", "*:RestoreRole", "the restore role trusts the account (its root) while "
         "backup.restorePrincipals is unset: only principals whose own policies allow "
         "sts:AssumeRole on it, the account's administrators, who manage the key anyway; "
         "the stacks that name principals pass"),
    Skip("CKV_AWS_33", "*:BackupKey", "the statement that lets Parameter Store decrypt the "
         "cluster's SecureStrings for the cluster's roles names any principal, limited by "
         "kms:CallerAccount (this account), kms:ViaService (SSM), the parameters' ARN prefix "
         "and aws:PrincipalTag (the cluster tag the program's roles carry): the pattern of "
         "AWS's own managed keys, whose roles are made after the key"),
]
