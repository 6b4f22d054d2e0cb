"""The boot test cases: each EC2 instance and launch template with user data of the example
stacks and the variants below, what each step must do on the stubbed host, and a boot
of one through cloud-init with AWS emulated (tests/boot/test_boot_user_data.py)."""

import base64
import dataclasses
import email
import functools
import gzip
import json
import re
import subprocess
from base64 import b64decode
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from components.aws.boot import boot_scripts, plan_steps
from components.distributions import rke2
from components.common.step_text import step_inputs
from config import load as load_config, versions
from preview.plan import Plan, ResourceRecord
from preview.engine import run_program
from preview.stack_file import EXAMPLE_STACKS, StackConfigFile, read_stack
from tests.boot.aws_emulation import AwsEmulation
from tests.boot.cloud_init import CloudInitRun, boot_again, run_user_data
from tests.boot.stub_host import StubHost, stub_host
from tests.builders import PROJECT_DIR, as_cli_config, cloud_config

INSTANCE = "aws:ec2/instance:Instance"
OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
STACKS = list(EXAMPLE_STACKS)
# Stacks beyond the examples: (name, config values).
VARIANTS = {"cloud-rke2": {**cloud_config(), "kubernetes": {"distribution": "rke2"}}}
# Stacks booted by tests/boot/test_ha_cloud_boot.py alone: three controllers each.
HA_VARIANTS = {f"cloud-ha-{distribution}": {
    **cloud_config(), "aws": {**cloud_config()["aws"], "vpc": {"availabilityZones": 3}},
    "kubernetes": {"distribution": distribution, "controlPlane": {"replicas": 3}}}
    for distribution in ("k0s", "rke2")}


def stack_file_of(stack: str) -> StackConfigFile:
    variant = VARIANTS.get(stack) or HA_VARIANTS.get(stack)
    return with_fake_release_pins(as_cli_config(variant) if variant is not None
                                  else read_stack(PROJECT_DIR, stack))



def k0s_join_token(api_endpoint: str, ca_cert_pem: str, bootstrap_token: str) -> str:
    """A worker join token as `k0s token create --role=worker` prints it (k0s
    pkg/token/kubeconfig.go): a kubeconfig with the API address, the CA and a bootstrap
    token for the user k0s's bootstrap RBAC expects, gzipped, base64."""
    user = "kubelet-bootstrap"
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "k0s", "cluster": {
            "server": api_endpoint,
            "certificate-authority-data": base64.b64encode(ca_cert_pem.encode()).decode()}}],
        "contexts": [{"name": "k0s", "context": {"cluster": "k0s", "user": user}}],
        "current-context": "k0s",
        "users": [{"name": user, "user": {"token": bootstrap_token}}],
    }
    data = yaml.safe_dump(kubeconfig, sort_keys=False).encode()
    return base64.b64encode(gzip.compress(data, mtime=0)).decode()


# A join token in k0s's format, which join-worker checks with the API (the stub plays it).
JOIN_TOKEN = k0s_join_token("https://10.0.1.10:6443",
                            "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n",
                            "abcdef.0123456789abcdef")
# A throwaway cluster CA key made for this run.
CA_KEY = ec.generate_private_key(ec.SECP256R1()).private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
    serialization.NoEncryption()).decode()
# A throwaway SSH host key made for this run.
HOST_KEY = ed25519.Ed25519PrivateKey.generate().private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
    serialization.NoEncryption()).decode()
# An RKE2 agent token (its format is checked: K10<CA hash>::node:<secret>); the server
# takes the same form as its agent token.
RKE2_AGENT_TOKEN = rke2.join_token(
    "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n", "0" * 64)
# What the stubbed SSM reader returns for the parameter an input names, and where on the
# host the step puts the value.
SSM_VALUES = {"K0S_JOIN_TOKEN_SSM_PARAMETER": JOIN_TOKEN, "K0S_CA_KEY_SSM_PARAMETER": CA_KEY,
              "SSH_HOST_KEY_SSM_PARAMETER": HOST_KEY,
              "RKE2_CA_KEY_SSM_PARAMETER": CA_KEY, "RKE2_TOKEN_SSM_PARAMETER": "1" * 64,
              "RKE2_AGENT_TOKEN_SSM_PARAMETER": RKE2_AGENT_TOKEN}
SSM_TARGETS = {"K0S_JOIN_TOKEN_SSM_PARAMETER": "/etc/k0s/worker-token",
               "K0S_CA_KEY_SSM_PARAMETER": "/var/lib/k0s/pki/ca.key",
               "SSH_HOST_KEY_SSM_PARAMETER": "/etc/ssh/ssh_host_ed25519_key",
               "RKE2_CA_KEY_SSM_PARAMETER": "/var/lib/rancher/rke2/server/tls/server-ca.key",
               "RKE2_TOKEN_SSM_PARAMETER": "/etc/rancher/rke2/server-token",
               "RKE2_AGENT_TOKEN_SSM_PARAMETER": "/etc/rancher/rke2/agent-token"}
# The instance id the stubbed IMDS gives (tests/scripts/stubs/stub).
INSTANCE_ID = "i-0123456789abcdef0"
# Stub calls (regular expressions) that show a step did its work.
WORK = {
    "install-ssh-host-key": (r"^systemctl try-restart ssh\.service$",),
    "prepare-host": (r"^modprobe br_netfilter$", r"^sysctl --system$"),
    "install-nvidia": (r"^apt-get .* install .*nvidia-container-toolkit=",
                       r"^apt-mark hold .*nvidia-container-toolkit"),
    "reboot-if-needed": (r"^systemd-run --unit=gpu-cluster-reboot --on-active=2s systemctl reboot$",),
    "verify-boot": (),  # on GPU machines: r"^nvidia-smi -L$" (see work())
    "refuse-second-cluster": (r"^curl .* https://\S+/livez$",),
    "join-worker": (r"^k0s install worker ", r"^k0s start$"),
    "install-controller": (r"^k0s install controller ", r"^k0s start$",
                           r"^k0s kubectl get --raw=/readyz$"),
    # From the bundle, as every boot step: the backups' timer.
    "install-backup": (r"^systemctl enable gpu-cluster-backup\.timer$",
                       r"^systemctl start gpu-cluster-backup\.timer$"),
    "spot-notices": (r"^systemctl enable gpu-cluster-spot-notices\.service$",
                     r"^systemctl restart gpu-cluster-spot-notices\.service$"),
}
# What each step logs last when it completes.
DONE = {
    "install-ssh-host-key": "SSH host key installed: ssh-ed25519",
    "refuse-second-cluster": "nothing answers at",
    "prepare-host": "host prepared",
    "install-nvidia": "NVIDIA driver, container toolkit and containerd runtime configured",
    "join-worker": "ready: the k0sworker service to be active",
    "install-controller": "ready: the Kubernetes API",
    "reboot-if-needed": "changed: rebooting in 2s for what the earlier steps installed",
    "verify-boot": "boot verified: kernel arguments active",
    "install-backup": "gpu-cluster-backup.timer starts a snapshot at",
    "spot-notices": "Spot interruption notices cordon and drain this node",
}
# What differs with RKE2: its steps' work, last words and a call only they make.
RKE2_WORK = {
    "join-worker": (r"^systemctl enable rke2-agent", r"^systemctl start --no-block rke2-agent$"),
    "install-controller": (r"^systemctl enable rke2-server",
                           r"^systemctl start --no-block rke2-server$",
                           r"^kubectl --kubeconfig \S+/etc/rancher/rke2/rke2\.yaml get --raw=/readyz$"),
}
RKE2_DONE = {"join-worker": "ready: the rke2-agent service to be active",
             "install-controller": "ready: the Kubernetes API"}
RKE2_FAIL = {"join-worker": r"^systemctl enable rke2-agent",
             "install-controller": r"^systemctl enable rke2-server"}
# A stub call (STUB_FAIL_CALL) only that step makes.
FAIL = {"install-ssh-host-key": r"^systemctl try-restart ssh", "prepare-host":
        r"^modprobe overlay$", "install-nvidia": r"^gpg ",
        "reboot-if-needed": r"^systemd-run --unit=gpu-cluster-reboot-fallback ",
        "verify-boot": r"^nvidia-smi -L$", "join-worker": r"^k0s install worker",
        "install-controller": r"^k0s install controller",
        "spot-notices": r"^systemctl restart gpu-cluster-spot-notices"}


def fake_release_sha256(distribution: str, version: str) -> str:
    """The sha256 of the fake release file the stubbed curl serves for `version`."""
    return subprocess.run([str(PROJECT_DIR / "tests/scripts/stubs/stub"), "fake-sha256",
                           distribution, version], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "GPU_CLUSTER_ROOT": "/nonexistent",
                               "STUB_STATE": "/nonexistent"}).stdout.strip()


def with_fake_release_pins(stack_file: StackConfigFile) -> StackConfigFile:
    """The stack with `versions.releaseSha256` set to the stub's fake release (the stub host
    cannot serve the real file that config/versions.py pins), the only change."""
    settings = load_config(stack_file.config, stack_file.secret_keys, stack_file.stack)
    kubernetes = settings.kubernetes
    sha256 = fake_release_sha256(kubernetes.distribution, kubernetes.version)
    config = {**stack_file.config, "gpu-cluster:versions": json.dumps(
        {"releaseSha256": {arch: sha256 for arch in versions.RELEASE_ARCHITECTURES}})}
    return dataclasses.replace(stack_file, config=config)


@functools.cache
def plan(stack: str) -> Plan:
    return run_program(PROJECT_DIR, stack_file_of(stack))


@dataclass
class Boot:
    """One resource's boot user data (base64, as EC2 takes it)."""

    stack: str
    resource: ResourceRecord
    user_data: str

    @property
    def id(self) -> str:
        return f"{self.stack}/{self.resource.name}"

    @property
    def bootstrap(self) -> str:
        """The user data's one shell part."""
        [part] = boot_scripts(self.user_data)
        return part

    @property
    def inputs(self) -> dict[str, str]:
        return step_inputs(self.bootstrap)

    @property
    def plan_text(self) -> str:
        [stored] = [r for r in plan(self.stack).of_type(OBJECT)
                    if r.inputs["key"] == self.inputs["BOOT_PLAN_KEY"]]
        return stored.inputs["content"]

    @property
    def scripts(self) -> list[str]:
        """Each step's stdin, as the plan holds it."""
        return [stdin for _, stdin in plan_steps(self.plan_text)]

    @property
    def steps(self) -> list[str]:
        return [name for name, _ in plan_steps(self.plan_text)]

    @property
    def host(self) -> str:
        """The name the steps' messages give the host (a pool's name for its instances)."""
        return self.inputs["GPU_CLUSTER_HOST"]

    def objects(self) -> dict[str, bytes]:
        """What the boot bucket holds for it: the bundle, from the tarball the program
        uploads, and its plan."""
        [bundle] = [r for r in plan(self.stack).of_type(OBJECT)
                    if r.inputs["key"] == self.inputs["BOOT_BUNDLE_KEY"]]
        return {self.inputs["BOOT_BUNDLE_KEY"]: Path(bundle.inputs["source"]["path"]).read_bytes(),
                self.inputs["BOOT_PLAN_KEY"]: self.plan_text.encode()}

    def policy(self) -> str:
        """What the program lets the machine's role do with S3: its statement as the
        program renders it (moto checks it against each object's ARN)."""
        fetch = [s for s in self.statements() if s.get("Sid") == "FetchItsBoot"]
        return json.dumps({"Version": "2012-10-17", "Statement": fetch})

    def statements(self) -> list[dict]:
        """Every statement of the machine's role policy, as the program renders it."""
        for policy in plan(self.stack).of_type("aws:iam/rolePolicy:RolePolicy"):
            statements = json.loads(policy.inputs["policy"])["Statement"]
            fetch = [s for s in statements if s.get("Sid") == "FetchItsBoot"]
            if fetch and any(arn.endswith("/" + self.inputs["BOOT_PLAN_KEY"])
                             for arn in fetch[0]["Resource"]):
                return statements
        raise AssertionError(f"{self.id}: no role may fetch its plan")


def machines(stack: str) -> list[Boot]:
    """Each EC2 instance and launch template with user data of `stack`, by name: in a
    fixed order, since resources register concurrently and every xdist worker must collect
    the same tests."""
    found = [Boot(stack, r, r.inputs["userDataBase64"])
             for r in plan(stack).of_type(INSTANCE) if r.inputs.get("userDataBase64")]
    found += [Boot(stack, r, r.inputs["userData"])
              for r in plan(stack).of_type(TEMPLATE) if r.inputs.get("userData")]
    return sorted(found, key=lambda boot: boot.id)


def boots() -> list[Boot]:
    return sorted((boot for stack in [*STACKS, *VARIANTS] for boot in machines(stack)),
                  key=lambda boot: boot.id)


BOOTS = boots()


@functools.cache
def _settings(stack: str):
    stack_file = stack_file_of(stack)
    return load_config(stack_file.config, stack_file.secret_keys, stack_file.stack)


def settings_of(case: Boot):
    return _settings(case.stack)


def is_rke2(case: Boot) -> bool:
    return settings_of(case).kubernetes.distribution == "rke2"


def gpus(case: Boot) -> int:
    """GPUs the machine has (a pool's; the control plane has none)."""
    if case.resource.type == INSTANCE:
        return 0
    [pool] = [p for p in settings_of(case).pools
              if p.name == case.resource.inputs["tags"]["gpu-cluster/pool"]]
    return pool.gpus


def expected_steps(case: Boot) -> list[str]:
    settings = settings_of(case)
    reboot = ["reboot-if-needed", "verify-boot"]
    if case.resource.type == INSTANCE:
        # Only the cloud layout's control plane installs itself; every one installs the
        # SSH host key the program verifies. The first of several asks first whether a
        # control plane runs already.
        first_of_several = (settings.control_plane_endpoint.replicas > 1
                            and case.host == settings.aws.control_plane.name)
        return ["install-ssh-host-key", *(["prepare-host", *reboot, *(
            ["refuse-second-cluster"] if first_of_several else []), "install-controller",
            "install-backup"] if settings.layout == "cloud" else [])]
    return ["prepare-host", *(["install-nvidia"] if gpus(case) else []), *reboot,
            "join-worker", "spot-notices"]


def work(case: Boot, step: str) -> tuple[str, ...]:
    """Stub calls that show `step` did its work on this machine."""
    if step == "verify-boot" and gpus(case):
        return (r"^nvidia-smi -L$",)
    return RKE2_WORK.get(step, WORK[step]) if is_rke2(case) else WORK[step]


def done(case: Boot, step: str) -> str:
    return RKE2_DONE.get(step, DONE[step]) if is_rke2(case) else DONE[step]


def fail_call(case: Boot, step: str) -> str:
    return RKE2_FAIL.get(step, FAIL[step]) if is_rke2(case) else FAIL[step]


def boot_status(case: Boot, host: StubHost) -> str:
    """What the instance last wrote as its boot status (to the stubbed SSM)."""
    inputs = case.inputs
    name = f"{inputs['BOOT_STATUS_PARAMETER']}/{INSTANCE_ID}".replace("/", "%2F")
    return (Path(host.env["STUB_STATE"]) / "ssm" / inputs["AWS_REGION"] / name).read_text().strip()


def cloud_config(user_data: str) -> dict:
    """The #cloud-config part of boot user data ({} without one)."""
    message = email.message_from_bytes(gzip.decompress(b64decode(user_data)))
    parts = [yaml.safe_load(part.get_payload(decode=True)) for part in message.get_payload()
             if part.get_content_type() == "text/cloud-config"]
    return parts[0] if parts else {}


def ssm_reads(case: Boot) -> list[tuple[str, str, str]]:
    """(input, region, parameter name) of every SSM parameter the steps read."""
    return [(name, case.inputs["AWS_REGION"], value) for inputs in map(step_inputs, case.scripts)
            for name, value in inputs.items() if name.endswith("_SSM_PARAMETER") and value]


def node_of_its_own(case: Boot) -> dict[str, str]:
    """The stub's controls for a controller that labels its own node (install-controller's
    NODE_NAME, k0s's EC2 controllers): `hostname` the name cloud-init gave the sandbox's
    host, which the step holds NODE_NAME to, and that node registered."""
    if "install-controller" not in case.steps:
        return {}
    name = step_inputs(case.scripts[case.steps.index("install-controller")]).get("NODE_NAME")
    return {"STUB_REAL_HOSTNAME": "1", "STUB_NODES": name} if name else {}


def run_boot(case: Boot, tmp_path: Path, objects: Optional[dict[str, bytes]] = None,
             after_boot: str = "", **stub_controls: str
             ) -> tuple[CloudInitRun, StubHost, list[CloudInitRun]]:
    """Boots the machine on a stubbed host that serves the SSM parameters it names, its
    bucket holding `objects` (by default what the program uploads); when a step reboots
    it, boots it again as the reboot would (AWS emulated again when `after_boot` is
    given: cloud_init.run_user_data's script, run after the last boot). Returns the last
    boot's run, the host, and every boot's run."""
    ssm = {(region, parameter): SSM_VALUES[name] for name, region, parameter in ssm_reads(case)}
    host = stub_host(tmp_path / "host", ssm)
    if is_rke2(case):
        # RKE2 puts its kubectl in its data dir when it starts (the stub answers for it).
        kubectl = host.root / "var/lib/rancher/rke2/bin/kubectl"
        kubectl.parent.mkdir(parents=True, exist_ok=True)
        kubectl.symlink_to(PROJECT_DIR / "tests/scripts/stubs/stub")
    env = {**host.env, "STUB_GPU_COUNT": str(gpus(case)), "S3_GET_RETRY_SECONDS": "0",
           **node_of_its_own(case), **stub_controls}
    aws = AwsEmulation(policy=case.policy(), region=case.inputs["AWS_REGION"],
                       bucket=case.inputs["BOOT_BUCKET"],
                       objects=case.objects() if objects is None else objects)
    reboots = "reboot-if-needed" in case.steps
    runs = [run_user_data(case.user_data, tmp_path / "sandbox", env, aws=aws,
                          after_boot="" if reboots else after_boot)]
    if "rebooting in" in runs[0].output:
        host.reboot()
        runs.append(boot_again(tmp_path / "sandbox", env, aws=aws if after_boot else None,
                               after_boot=after_boot))
    return runs[-1], host, runs


def first_call(calls: list[str], pattern: str) -> Optional[int]:
    return next((index for index, call in enumerate(calls) if re.search(pattern, call)), None)


def report(run: CloudInitRun, steps: list[str]) -> str:
    """The parts as cloud-init ran them, and its output, for a failed assertion."""
    lines = [f"{part.name} ({step}): exit code {part.exit_code} {part.error}"
             for part, step in zip(run.parts, steps)]
    return "\n".join([*lines, "cloud-init output:", run.output])
