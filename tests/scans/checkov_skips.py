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
# The device plugin of the stacks with the static CPU manager.
STATIC_CPU_STACKS = ("prod", "rke2")

KUBERNETES = [
    Skip("CKV_K8S_15", "*", "imagePullPolicy Always: every image is pinned to a release tag "
         "(the policy pack refuses latest and untagged images), so IfNotPresent runs the same "
         "image and still starts pods while the registry is unreachable"),
    Skip("CKV_K8S_43", "*", "images by digest: tags name the upstream releases the project pins "
         "and tests in config/versions.py; the policy pack requires a tag or a digest"),
    Skip("CKV_K8S_11", "*", "CPU limits: CFS quotas throttle the device plugin, the "
         "provisioners and the acceptance jobs' feeders; each container has a CPU request and "
         "a memory limit instead"),
    Skip("CKV_K8S_8", DEVICE_PLUGIN, "liveness probe: the device plugin serves no health "
         "endpoint; it re-registers when the kubelet restarts (upstream has no probe either)"),
    Skip("CKV_K8S_9", DEVICE_PLUGIN, "readiness probe: nothing connects to the device plugin "
         "but the kubelet, through its socket"),
    Skip("CKV_K8S_8", PROVISIONERS, "liveness probe: nfs-subdir-external-provisioner serves "
         "no health endpoint (upstream's chart has no probe)"),
    Skip("CKV_K8S_9", PROVISIONERS, "readiness probe: the provisioner serves nothing"),
    Skip("CKV_K8S_23", DEVICE_PLUGIN, "root: the plugin creates its socket in the kubelet's "
         "root-owned /var/lib/kubelet/device-plugins"),
    Skip("CKV_K8S_40", DEVICE_PLUGIN, "high UID: runs as root, see CKV_K8S_23"),
    Skip("CKV_K8S_23", PROVISIONERS, "root: upstream's image runs as root (its "
         "deploy/deployment.yaml sets no user); on the export that root is squashed to the "
         "anonymous user that owns the export's folder, where it makes every claim's folder"),
    Skip("CKV_K8S_40", PROVISIONERS, "high UID: runs as root, see CKV_K8S_23"),
    Skip("CKV_K8S_23", GPU_SMOKE, "root: the CUDA base and sample images run as root and the "
         "job only runs nvidia-smi and vectorAdd once"),
    Skip("CKV_K8S_40", GPU_SMOKE, "high UID: the CUDA images' user, see CKV_K8S_23"),
    Skip("CKV_K8S_22", DEVICE_PLUGIN, "read-only root filesystem: the NVIDIA runtime's hook "
         "writes the driver's libraries and ld.so.cache into the container's root"),
    Skip("CKV_K8S_22", GPU_SMOKE, "read-only root filesystem: the NVIDIA runtime's hook writes "
         "into the container's root, see the device plugin"),
    *[Skip(check, f"{stack}:DaemonSet.kube-system.nvidia-device-plugin", reason)
      for stack in STATIC_CPU_STACKS for check, reason in (
          ("CKV_K8S_16", "privileged: with the static CPU manager the plugin passes device "
           "specs, which upstream's chart runs privileged; the policy pack allows it for this "
           "component only"),
          ("CKV_K8S_20", "privilege escalation: implied by privileged, see CKV_K8S_16"),
          ("CKV_K8S_28", "NET_RAW: a privileged container has every capability, see "
           "CKV_K8S_16"),
          ("CKV_K8S_37", "capabilities: a privileged container has every capability, see "
           "CKV_K8S_16"))],
    *[Skip(check, f"{stack}:DaemonSet.kube-system.nvidia-device-plugin", reason)
      for stack in ("lab", "dev") for check, reason in (
          ("CKV_K8S_39", "CAP_SYS_ADMIN: with deviceListStrategy volume-mounts the plugin "
           "mounts each allocated device list, as upstream's chart gives it (k8s-device-plugin "
           "v0.20.0 deployments/helm/nvidia-device-plugin/templates/_helpers.tpl "
           "requiresCapSysAdmin)"),
          ("CKV_K8S_25", "an added capability: CAP_SYS_ADMIN, see CKV_K8S_39"),
          ("CKV_K8S_37", "capabilities: CAP_SYS_ADMIN alone, see CKV_K8S_39"),
          ("CKV_K8S_28", "NET_RAW: the runtime's default set, with CAP_SYS_ADMIN added (see "
           "CKV_K8S_39)"),
          ("CKV_K8S_20", "privilege escalation: implied by CAP_SYS_ADMIN, see CKV_K8S_39"))],
    Skip("CKV_K8S_38", PROVISIONERS, "the provisioner watches claims and creates volumes "
         "through the API server with its service account's token"),
    Skip("CKV_K8S_23", DCGM_EXPORTER, "root: the exporter reads the kubelet's root-owned "
         "pod-resources socket to label each GPU with its pod (upstream's chart runs it as "
         "root); it has no capabilities"),
    Skip("CKV_K8S_40", DCGM_EXPORTER, "high UID: runs as root, see CKV_K8S_23"),
    Skip("CKV_K8S_22", DCGM_EXPORTER, "read-only root filesystem: the NVIDIA runtime's hook "
         "writes the driver's libraries into the container's root, see the device plugin"),
    Skip("CKV_K8S_40", GRAFANA, "high UID: 472 is the image's grafana user, which owns its "
         "home (upstream's chart runs it so)"),
    Skip("CKV_K8S_22", GRAFANA, "read-only root filesystem: Grafana writes below its home "
         "(plugins, sessions, its database on the data volume) and has not been run read-only"),
    Skip("CKV_K8S_38", MONITORING_READERS, "Prometheus discovers its targets and "
         "kube-state-metrics lists Nodes through the API server with their service accounts"),
    # Hardening not done yet in the add-ons' manifests (components/addons/gpu_support.py,
    # components/addons/shared_storage.py): accepted until they set it, then these entries go
    # (the test fails on an entry that matches nothing).
    Skip("CKV_K8S_31", DEVICE_PLUGIN, "follow-up: seccompProfile RuntimeDefault on the pod "
         "(upstream's chart sets none)"),
    Skip("CKV_K8S_29", DEVICE_PLUGIN, "follow-up: a pod-level securityContext (seccomp)"),
    Skip("CKV_K8S_38", DEVICE_PLUGIN, "follow-up: automountServiceAccountToken false; the "
         "plugin never calls the API server"),
    Skip("CKV_K8S_31", PROVISIONERS, "follow-up: seccompProfile RuntimeDefault on the pod "
         "(upstream's chart sets none)"),
    Skip("CKV_K8S_29", PROVISIONERS, "follow-up: a pod-level securityContext (seccomp)"),
    Skip("CKV_K8S_28", PROVISIONERS, "follow-up: drop ALL capabilities (it only needs "
         "CHOWN/DAC_OVERRIDE/FOWNER for volume folders)"),
    Skip("CKV_K8S_37", PROVISIONERS, "follow-up: drop ALL capabilities, see CKV_K8S_28"),
    Skip("CKV_K8S_22", PROVISIONERS, "follow-up: read-only root filesystem; it writes only to "
         "the mounted export"),
]

# (check, repository path, SHA-1 of the value as checkov reports it)
SECRETS = [
    (Skip("CKV_SECRET_6", "config/backup.py", "Bech32's alphabet (BIP 173), which age public "
          "keys are written in"), "9a96960baa4d8c0559cf89f72b5f3486736762e9"),
    (Skip("CKV_SECRET_6", "esc/gpu-cluster-prod.yaml", "the name of the AWS Secrets Manager "
          "secret holding carol's Kubeflow password hash, not its value"),
     "12b5bff998e9ee481ed69bfe49e0a16b0c7bc191"),
    (Skip("CKV_SECRET_6", "tests/config/hostile_bases.py", "a test's throwaway Kubeflow "
          "password, for the deprecated shared login's keys"),
     "e46b271d746b89b5fc5b524653935f46ebbbf1fc"),
    (Skip("CKV_SECRET_6", "tests/kubeflow/test_logins.py", "a test's throwaway LDAP bind "
          "password, which the test follows into Dex's environment"),
     "f80cf23b2ca4d72a74dcbf262ff79441edea7200"),
    (Skip("CKV_SECRET_6", "esc/gpu-cluster-prod.yaml", "the name of the AWS Secrets Manager "
          "secret holding the SSH key, not its value"), "d096bf510e13cd822fc592a6722545a2276d9eab"),
    (Skip("CKV_SECRET_6", "components/addons/kubeflow/overlay.py", "the name of the Secret the "
          "Kubeflow gateway reads its certificate from, not a secret value"),
     "c2961a0e0bfd04d83a715ba7c960d5c677a277a2"),
    (Skip("CKV_SECRET_13", "tests/scripts/aws-boot.bats", "a fake OpenSSH key block (only the "
          "format's fixed header) that tests the host key never shows in logs"),
     "28d6abad49ad962899ce2873a14390e6d4d0b6a7"),
    (Skip("CKV_SECRET_6", "components/aws/ssm_paths.py", "the name of the SSM parameter that "
          "holds the image mirror's password, not the password"),
     "14b47470b37447bbdbe9469d422bc807134f01f0"),
    (Skip("CKV_SECRET_6", "config/image_checks.py", "the command that stores the image "
          "mirror's password as a secret, without any value"),
     "4eee173cb1414f4010f41d5cc9dc755536caac30"),
    (Skip("CKV_SECRET_6", "tests/images/test_config.py", "a made-up Kubeflow password of the "
          "mirror tests' stack"), "e46b271d746b89b5fc5b524653935f46ebbbf1fc"),
    (Skip("CKV_SECRET_4", "tests/images/test_downloads.py", "a release URL with made-up "
          "credentials that the config refuses"), "1a91d62f7ca67399625a4368a6ab5d4a3baa6073"),
    (Skip("CKV_SECRET_6", "tests/config/hostile_bases.py", "the made-up image mirror password "
          "the hostile-value tests start from"), "c3ff6057a7e48ddb17d832b6b0de36a8fd9acb35"),
    (Skip("CKV_SECRET_6", "tests/config/test_refusals.py", "a made-up value that tests error "
          "messages never quote secret config"), "13e2e89cbce64ee3cfd6dee16c9732cdb79aab77"),
    (Skip("CKV_SECRET_13", "tests/scripts/envelope.bats", "a fake PEM block (base64 of the word "
          "server-key) that tests how the envelope passes keys"),
     "ae005b81041ab5c2946ff1619f1b118a5b5f4828"),
    (Skip("CKV_SECRET_13", "tests/scripts/envelope.bats", "a fake CA key block the envelope "
          "test passes to install-controller"), "b83c9738d19c0c653be2f3bea24a7e7216c5bfb0"),
    (Skip("CKV_SECRET_6", "tests/scripts/install-controller.bats", "a fake CA key the script "
          "test checks never reaches a log"), "142cf0879103b42c1cc5bf4a33921ffc07aaea1c"),
    (Skip("CKV_SECRET_13", "tests/scripts/install-controller.bats", "a fake PEM block for an "
          "existing CA in the script test"), "595015e253fae5ecfd500a5d315449897567afc8"),
    (Skip("CKV_SECRET_13", "tests/scripts/airgap-bundle.bats", "a fake CA key block the "
          "bundle test passes to install-controller"), "acb6f654adcde8a14689b3aa30765cef56314518"),
    (Skip("CKV_SECRET_6", "tests/scripts/wait-for-api.bats", "a fake admin key the script test "
          "checks never reaches a log"), "546728d81d260fa22dae4d8702533c49e6c09ea0"),
    (Skip("CKV_SECRET_2", "tests/components/aws_fakes.py", "AWS's documented "
          "example access key, in a stubbed credentials answer"),
     "25910f981e85ca04baf359199dd0bd4a3ae738b6"),
    (Skip("CKV_SECRET_6", "components/addons/kubeflow/overlay.py", "the name of a Kubernetes Secret "
          "(oauth2-proxy-credentials), not its value"), "bbd8ac609aefe4addc19754aecda67f07a733dc8"),
    (Skip("CKV_SECRET_6", "components/addons/kubeflow/dex.py", "the name of an environment "
          "variable Dex reads its client secret from (OIDC_CLIENT_SECRET)"),
     "797ca1ab12ee9088580bd97899de59427758a911"),
    (Skip("CKV_SECRET_6", "tests/config/test_config_errors.py", "a made-up Kubeflow password "
          "of a test stack"), "05bd3590733c6111684eb85adbeed0b50799c15e"),
    (Skip("CKV_SECRET_6", "tests/config/test_config_errors.py", "the assignment of a made-up "
          "Kubeflow password in a test stack"), "e46b271d746b89b5fc5b524653935f46ebbbf1fc"),
    (Skip("CKV_SECRET_6", "tests/components/test_default_storage_class.py", "the assignment of "
          "a made-up Kubeflow password in a test stack"), "e46b271d746b89b5fc5b524653935f46ebbbf1fc"),
    (Skip("CKV_SECRET_6", "tests/config/test_input_rules.py", "the assignment of a made-up "
          "Kubeflow password in a test stack"), "e46b271d746b89b5fc5b524653935f46ebbbf1fc"),
    (Skip("CKV_SECRET_6", "config/kubeflow_checks.py", "the command that sets the password, "
          "not a password"), "e46b271d746b89b5fc5b524653935f46ebbbf1fc"),
    (Skip("CKV_SECRET_6", "tests/kubeflow/test_component.py", "the command that sets the "
          "password, not a password"), "e46b271d746b89b5fc5b524653935f46ebbbf1fc"),
    (Skip("CKV_SECRET_6", "tests/scripts/rke2-agent.bats", "a made-up agent secret the "
          "script test checks never reaches a log"), "df5308667a06bc652f1c9625d5ba0225ece53b69"),
    (Skip("CKV_SECRET_6", "tests/scripts/rke2-server.bats", "a made-up agent secret the "
          "script test checks never reaches a log"), "df5308667a06bc652f1c9625d5ba0225ece53b69"),
    (Skip("CKV_SECRET_6", "tests/scripts/rke2-server.bats", "a fake CA key the script test "
          "checks never reaches a log"), "142cf0879103b42c1cc5bf4a33921ffc07aaea1c"),
    (Skip("CKV_SECRET_6", "tests/scripts/rke2-server.bats", "a made-up server token the "
          "script test checks never reaches a log"), "4b073b54ed968a0aac09986837a90ebcfc6aa71d"),
    (Skip("CKV_SECRET_6", "tests/scripts/rke2-server.bats", "a made-up second server token "
          "the script test refuses to apply"), "55ee0bcfba1260bbec3dab425ed4800733a1e3ca"),
    (Skip("CKV_SECRET_6", "tests/scripts/rke2-server.bats", "a made-up renewed agent token "
          "the script test checks never reaches a log"), "0860c23e3b772b77909e9cca53495bac891ff82d"),
    (Skip("CKV_SECRET_6", "tests/stacks/test_credential_rotation.py", "a made-up Kubeflow "
          "password of the rotation plan test"), "e46b271d746b89b5fc5b524653935f46ebbbf1fc"),
    (Skip("CKV_SECRET_6", "vendor/kubeflow-manifests-26.03/common/dex/base/secret_params.env",
          "upstream's published example OIDC client secret in the vendored release (byte for "
          "byte, pinned by sha256); the program never applies it: its own is random per stack"),
     "8005fcba81e8f539d5b7ccf5ce249d0447085c4a"),
    (Skip("CKV_SECRET_6", "vendor/kubeflow-manifests-26.03/common/cert-manager/base/upstream/"
          "cert-manager.yaml", "a base64 string in cert-manager's release manifest, vendored "
          "byte for byte"), "11f0b6aad889e6e3d00a24835dbbd060fcd0ca4d"),
    (Skip("CKV_SECRET_6", "vendor/kubeflow-manifests-26.03/common/cert-manager/base/upstream/"
          "cert-manager.yaml", "a feature-gate name in a CRD description of cert-manager's "
          "release manifest, vendored byte for byte"), "f63a7ab07f42b48cfb61fd7fea0a6589c0b4881c"),
    (Skip("CKV_SECRET_6", "tests/distribute/test_merge.py", "a placeholder token in a made-up "
          "kubeconfig the merge test reads"), "ef05976d5672d9a762350e7cb52ce20cc13326a8"),
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
