"""What `pulumi up` will do to each machine, in a few lines: read back from the steps the
preview rendered (their inputs, in the order they run), so it says what the scripts will be
given, not what the config meant. build/<stack>/summary.md holds it; the screen shows it
short."""

from dataclasses import dataclass, field
from typing import Optional

import yaml

from components.common.step_text import step_inputs
from preview.host_files import host_scripts
from preview.plan import Plan

# The steps that upload and unpack the scripts: every machine has them, nobody asks.
_PLUMBING = {"install-bundle", "bundle-upload", "boot"}


@dataclass
class HostSummary:
    name: str
    steps: list = field(default_factory=list)
    inputs: dict = field(default_factory=dict)  # step -> its inputs

    def value(self, key: str, *steps: str) -> Optional[str]:
        for step in steps or self.inputs:
            if key in self.inputs.get(step, {}):
                return self.inputs[step][key]
        return None

    def kernel_args(self) -> list:
        """As prepare-host.sh's configure_kernel_args appends them to GRUB's defaults."""
        if "prepare-host" not in self.inputs:
            return []
        args = []
        if self.value("DISABLE_IOMMU", "prepare-host") == "true":
            args += ["intel_iommu=off", "amd_iommu=off"]
        if self.value("DISABLE_CPU_MITIGATIONS", "prepare-host") == "true":
            args.append("mitigations=off")
        return args + (self.value("EXTRA_KERNEL_ARGS", "prepare-host") or "").split()

    def packages(self) -> list:
        found = []
        nvidia = self.inputs.get("install-nvidia")
        if nvidia:
            branch = nvidia.get("NVIDIA_DRIVER_BRANCH", "")
            if nvidia.get("INSTALL_DRIVER") == "true":
                found.append(f"NVIDIA driver {branch} (nvidia-headless-{branch}-server)")
            else:
                found.append("no NVIDIA driver: the one on the machine is kept")
            found.append(f"NVIDIA container toolkit {nvidia.get('NVIDIA_CONTAINER_TOOLKIT_VERSION')}")
            fabric = {"true": f"Fabric Manager and NSCQ {branch}",
                      "auto": f"Fabric Manager {branch} if NVSwitches are found"}
            if nvidia.get("NVSWITCH") in fabric:
                found.append(fabric[nvidia["NVSWITCH"]])
        for key, name in (("K0S_VERSION", "k0s"), ("RKE2_VERSION", "RKE2")):
            version = self.value(key)
            if version:
                found.append(f"{name} {version}")
        return found

    def reboot(self) -> str:
        why = []
        if self.kernel_args():
            why.append("kernel arguments")
        if self.value("INSTALL_DRIVER", "install-nvidia") == "true":
            why.append("the NVIDIA driver")
        if not why:
            return "not expected"
        if "reboot-if-needed" in self.inputs:
            return f"on the first `up` ({' and '.join(why)}), by reboot-if-needed"
        return (f"needed for {' and '.join(why)}, and not done by the program "
                "(tuning.rebootWhenNeeded is false): reboot it yourself")

    def labels_and_taints(self) -> tuple:
        labels = self.value("NODE_LABELS")
        taints = self.value("NODE_TAINTS")
        rke2 = self.value("RKE2_CONFIG", "join-worker", "install-controller")
        if rke2 and labels is None:
            config = yaml.safe_load(rke2) or {}
            labels = ",".join(config.get("node-label", []))
            taints = ",".join(config.get("node-taint", []))
        return labels or "", taints or ""

    def storage(self) -> Optional[str]:
        served = self.inputs.get("serve-nfs")
        if served:
            return (f"serves NFS {served.get('NFS_EXPORT_PATH')} to "
                    f"{served.get('NFS_CLIENT_CIDRS', '').replace(' ', ', ')}")
        if self.value("INSTALL_NFS_CLIENT", "prepare-host") == "true":
            return "NFS client installed"
        return None

    def lines(self) -> list:
        role = self.value("HOST_ROLE", "preflight")
        gpus = self.value("GPU_COUNT", "preflight")
        about = ", ".join(part for part in (self.value("HOST_ADDRESS", "preflight"), role,
                                            f"{gpus} GPUs" if gpus not in (None, "0") else None)
                          if part)
        labels, taints = self.labels_and_taints()
        lines = [f"{self.name}" + (f" ({about})" if about else ""),
                 "  steps: " + " > ".join(s for s in self.steps if s not in _PLUMBING)]
        args = self.kernel_args()
        if "prepare-host" in self.inputs:
            lines.append("  kernel arguments: " + (" ".join(args) if args else "none added"))
        packages = self.packages()
        if packages:
            lines.append("  installs: " + "; ".join(packages))
        lines.append(f"  reboot: {self.reboot()}")
        if labels or taints:
            lines.append(f"  node labels: {labels or 'none'}; taints: {taints or 'none'}")
        storage = self.storage()
        if storage:
            lines.append(f"  storage: {storage}")
        return lines


def host_summaries(plan: Plan) -> list:
    """One HostSummary per machine, its steps in the order the preview renders them."""
    rendered: dict = {}
    for path, text in host_scripts(plan):
        _, host, file = path.split("/")
        rendered.setdefault(host, []).append((_run_order(file), text))
    summaries = []
    for host, steps in rendered.items():
        summary = HostSummary(host)
        for _, text in sorted(steps, key=lambda step: step[0]):
            inputs = step_inputs(text)
            step = inputs.get("GPU_CLUSTER_STEP", "")
            summary.steps.append(step)
            summary.inputs.setdefault(step, inputs)
        summaries.append(summary)
    return summaries


def _run_order(file: str) -> tuple:
    """host_files' names: boot-NN-STEP.sh (at the instance's boot, first), NN-STEP.sh (NN:
    the wave, over SSH)."""
    at_boot = file.startswith("boot-")
    number = file.removeprefix("boot-").split("-", 1)[0]
    return (0 if at_boot else 1, int(number), file)


def summary_markdown(plan: Plan) -> str:
    lines = [f"# What `pulumi up` does to each machine of stack '{plan.stack}'", "",
             "Read from the steps the preview rendered (build/<stack>/hosts/), in order.", ""]
    for summary in host_summaries(plan):
        first, *rest = summary.lines()
        lines += [f"## {first}", ""] + [f"- {line.strip()}" for line in rest] + [""]
    return "\n".join(lines)


def summary_screen(plan: Plan) -> list:
    lines = ["", "Machines (what `pulumi up` does to each; build/<stack>/summary.md):"]
    for summary in host_summaries(plan):
        lines += [f"  {line}" for line in summary.lines()]
    return lines
