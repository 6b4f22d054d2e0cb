"""What the offline preview shows: the resource tree with counts, and the artifacts a
reviewer reads (host scripts with their inputs, manifests, kubeconfig template)."""

import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Optional

import yaml
from pulumi.runtime import rpc

from components.addons.shared_storage import DEFAULT_CLASS_ANNOTATION
from components.addons.kubeflow.sources import UPSTREAM_COPY
from config.messages import set_secret_command
from config import vendored
from config.storage import STORAGE_CLASS_NAMES
from preview.host_files import bundle_files, host_scripts, vpn_configs
from contract.names import REDACTED, UNKNOWN
from preview.host_summary import summary_markdown, summary_screen
from preview.plan import Plan, ResourceRecord

_KUBERNETES_TYPE = re.compile(r"^kubernetes:(?P<group>[^/]+)/(?P<version>[^:]+):(?P<kind>\w+)$")


def tree(plan: Plan) -> str:
    """The resources as `pulumi preview` nests them, siblings in the order they run: a
    resource after the ones it waits for (its wave: the longest chain of resources before
    it, the `NN` of the host scripts), a component at its first resource's wave; ties by
    name."""
    lines = [f"Plan for stack '{plan.stack}' of project '{plan.project}':",
             "(wave N: what starts once everything it waits for is done; resources of one "
             "wave run side by side, and a host's step NN-STEP.sh is in wave NN)", ""]
    first_wave = _first_waves(plan)

    def run_order(resource: ResourceRecord) -> tuple:
        return first_wave[resource.urn], resource.name, resource.type, resource.urn

    def walk(resource: ResourceRecord, prefix: str, last: bool) -> None:
        branch = "└─ " if last else "├─ "
        # A component the provider expands (a kustomize Directory, a Chart) is one step too.
        expanded = not resource.custom and not plan.children.get(resource.urn)
        wave = f"  (wave {first_wave[resource.urn]})" if resource.custom or expanded else ""
        lines.append(f"{prefix}{branch}{resource.type}  {resource.name}{wave}")
        children = sorted(plan.children.get(resource.urn, []), key=run_order)
        for index, child in enumerate(children):
            walk(child, prefix + ("   " if last else "│  "), index == len(children) - 1)

    roots = sorted(plan.roots, key=run_order)
    for index, root in enumerate(roots):
        walk(root, "", index == len(roots) - 1)
    lines += summary_screen(plan)
    counts = Counter(r.type for r in plan.resources)
    lines += ["", f"Resources: {len(plan.resources)} to create"]
    lines += [f"  {count:5d}  {type_}" for type_, count in sorted(counts.items())]
    lines += ["", f"Dependency depth: {plan.depth} (longest chain of steps that must run in order)"]
    lines += _storage_summary(plan)
    lines += ["", "Outputs:"]
    for name, value in shown_outputs(plan).items():
        lines.append(f"  {name}: {value if value == REDACTED else json.dumps(value)}")
    lines += _info(plan) + _warnings(plan) + _secrets_summary(plan)
    return "\n".join(lines) + "\n"


def quiet_report(plan: Plan) -> str:
    """`--quiet`: what happens to each machine, the warnings and the secrets to set."""
    lines = summary_screen(plan) + _info(plan) + _warnings(plan) + _secrets_summary(plan)
    return "\n".join(lines[1:]) + "\n"


def _info(plan: Plan) -> list[str]:
    """What `pulumi preview` prints as info (each EC2 pool's price an hour)."""
    if not plan.info:
        return []
    return ["", "Info:"] + [f"  info: {plan.redact(message)}" for message in plan.info]


def _warnings(plan: Plan) -> list[str]:
    if not plan.warnings:
        return []
    return ["", "Warnings:"] + [f"  warning: {plan.redact(message)}" for message in plan.warnings]


def shown_outputs(plan: Plan) -> dict[str, Any]:
    """The stack outputs as a reviewer may read them: secrets hidden, and what the cloud
    makes (ids, addresses, generated names and keys) shown as known after pulumi up."""
    return {name: REDACTED if secret else plan.provider_made_hidden(plan.redact(value))
            for name, (value, secret) in plan.outputs.items()}


def _first_waves(plan: Plan) -> dict[str, int]:
    """URN -> the wave a resource starts in: one after the last wave of everything it waits
    for (a component it waits for ends with its last resource); a component starts with
    its first resource. A component the provider expands (a kustomize Directory: no
    children here) counts as one resource."""
    starts: dict[str, int] = {}
    ends: dict[str, int] = {}

    def leaf(resource: ResourceRecord) -> bool:
        return resource.custom or not plan.children.get(resource.urn)

    def start(resource: ResourceRecord) -> int:
        if resource.urn not in starts:
            if leaf(resource):
                starts[resource.urn] = 1 + max((end(plan.by_urn[urn]) for urn in
                                                resource.dependencies if urn in plan.by_urn),
                                               default=0)
            else:
                starts[resource.urn] = min(start(c) for c in plan.children[resource.urn])
        return starts[resource.urn]

    def end(resource: ResourceRecord) -> int:
        if resource.urn not in ends:
            ends[resource.urn] = start(resource) if leaf(resource) else max(
                end(c) for c in plan.children[resource.urn])
        return ends[resource.urn]

    for resource in plan.resources:
        start(resource)
    return starts


def _secrets_summary(plan: Plan) -> list[str]:
    """Which secrets the preview made up, and whether `pulumi up` will have them: an
    encrypted one it decrypts, a missing one stops it."""
    if not (plan.placeholders or plan.missing_secrets):
        return []
    lines = ["", "Secrets the preview uses placeholders for (in this preview only):"]
    lines += [f"  {key}: not set: `pulumi up` will refuse; set it with "
              f"`{set_secret_command(key)}`" for key in plan.missing_secrets]
    lines += [f"  {key}: encrypted: placeholder used (`pulumi up` decrypts it)"
              for key in plan.placeholders]
    return lines


def _storage_summary(plan: Plan) -> list[str]:
    """Which storage backend is the default, and why."""
    classes = plan.of_type_in_tree_order("kubernetes:storage.k8s.io/v1:StorageClass")
    if not classes:
        return []
    backend_of = {name: backend for backend, name in STORAGE_CLASS_NAMES.items()}
    lines = ["", "Storage:"]
    for resource in classes:
        name = resource.inputs["metadata"]["name"]
        default = resource.inputs["metadata"]["annotations"].get(
            DEFAULT_CLASS_ANNOTATION) == "true"
        why = ""
        if default:
            why = (" (default: the only backend configured)" if len(classes) == 1 else
                   f" (default: gpu-cluster:storage.{backend_of.get(name, name)}.default is true)")
        options = ",".join(resource.inputs.get("mountOptions", [])) or "-"
        lines.append(f"  StorageClass {name}: {resource.inputs['provisioner']}, reclaim "
                     f"{resource.inputs['reclaimPolicy']}, mount options {options}{why}")
    return lines


def write_artifacts(plan: Plan, build_dir: Path,
                    extra_files: Optional[dict[str, str]] = None) -> list[Path]:
    """Writes build/<stack>/ afresh, plus `extra_files` (relative path -> text); returns
    the files written."""
    # Kustomize overlays the program wrote under the build folder it is about to clear.
    overlays = _kustomize_overlays(plan)
    if build_dir.exists():
        shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True)
    written = []

    def write(relative: str, text: str, mode: int = 0o644) -> None:
        path = build_dir / relative
        if path.exists():
            raise ValueError(f"two artifacts would be written to {relative}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)
        written.append(path)

    write("plan.txt", tree(plan))
    write("plan.json", json.dumps(_plan_document(plan), indent=2) + "\n")
    write("outputs.json", json.dumps(shown_outputs(plan), indent=2) + "\n")
    write("summary.md", summary_markdown(plan))
    for path, text in host_scripts(plan):
        write(path, text, 0o755)
    for path, text, mode in bundle_files(plan):
        write(path, text, mode)
    for path, text in vpn_configs(plan):
        write(path, text)
    for path, text in _manifests(plan):
        write(path, text)
    if "kubeconfig" in plan.outputs:
        write("kubeconfig/admin.template.yaml", _kubeconfig_template(plan))
    for path, text in overlays:
        write(path, text)
    upstream = _upstream_manifests(plan)
    if upstream:
        write("manifests/upstream.txt", upstream)
    for relative, text in (extra_files or {}).items():
        write(relative, plan.redact(text))
    return written


def _plan_document(plan: Plan) -> dict:
    return {
        "stack": plan.stack,
        "depth": plan.depth,
        "resources": [
            {
                "type": r.type,
                "name": r.name,
                "parent": plan.by_urn[r.parent].name if r.parent in plan.by_urn else None,
                "dependsOn": sorted(plan.by_urn[d].name for d in plan.custom_dependencies(r)),
                # Which resource each input comes from (the policy pack's stack rules).
                "propertyDependencies": {
                    key: sorted(plan.by_urn[u].name for u in urns if u in plan.by_urn)
                    for key, urns in sorted(r.property_dependencies.items()) if urns},
                # What the policy pack checks on data that must outlive the stack.
                "protect": r.protect,
                "retainOnDelete": r.retain_on_delete,
                "inputs": plan.redact(_without_secret_data(r)),
            }
            for r in plan.in_tree_order
        ],
    }


# Components the provider expands itself (from a URL or chart) at `pulumi up`.
_PROVIDER_EXPANDED = ("yaml", "helm.sh", "kustomize")
_PROJECT_DIR = Path(__file__).resolve().parent.parent


def _kustomize_overlays(plan: Plan) -> list[tuple[str, str]]:
    """(kubeflow/<folder>/<file>, text) of each kustomize Directory's local overlay, and
    of the rewritten upstream copy beside them (kubeflow/upstream/...) the overlays read."""
    found, copies = [], set()
    for resource in plan.of_type_in_tree_order("kubernetes:kustomize/v2:Directory"):
        folder = _PROJECT_DIR / resource.inputs.get("directory", "")
        if not folder.is_dir():
            continue
        for file in sorted(folder.iterdir()):
            if file.is_file() and not file.name.startswith("."):
                found.append((f"kubeflow/{folder.name}/{file.name}", file.read_text()))
        copies.add(folder.parent / UPSTREAM_COPY)
    for copy in sorted(c for c in copies if c.is_dir()):
        for file in sorted(copy.rglob("*")):
            if file.is_file() and not file.name.startswith("."):
                found.append((f"kubeflow/{UPSTREAM_COPY}/{file.relative_to(copy).as_posix()}",
                              file.read_text()))
    return found


def _manifests(plan: Plan):
    """manifests/[<namespace>/]<kind>-<name>.yaml: named by the object, so a file keeps
    its name from run to run and objects of one name in two namespaces do not meet."""
    for resource in plan.resources:
        match = _KUBERNETES_TYPE.match(resource.type)
        if not match or match["group"] in _PROVIDER_EXPANDED:
            continue
        document = plan.redact(_manifest(resource, match))
        metadata = document.get("metadata", {})
        name = _plain(metadata.get("name")) or resource.name
        # A namespace is a DNS label (no dots), never "upstream.txt" or a file's name.
        namespace = _plain(metadata.get("namespace"))
        folder = f"{namespace}/" if namespace else ""
        # A patch (server-side apply of the fields it names) is not a whole object.
        suffix = ".patch.yaml" if match["kind"].endswith("Patch") else ".yaml"
        yield (f"manifests/{folder}{document['kind'].lower()}-{name}{suffix}",
               yaml.safe_dump(document, sort_keys=True))


def _plain(value: Any) -> Optional[str]:
    """A redacted value as a file name may hold it: not hidden as secret, not unknown."""
    if isinstance(value, str) and value and REDACTED not in value and UNKNOWN not in value:
        return value
    return None


def _upstream_manifests(plan: Plan) -> str:
    """Pinned upstream manifests the Kubernetes provider reads and applies itself."""
    lines = []
    sums = vendored.pinned_sums()
    prefix = f"{vendored.VENDOR_DIR}/"
    waves = _first_waves(plan)
    for resource in sorted(plan.in_tree_order, key=lambda r: waves[r.urn]):
        match = _KUBERNETES_TYPE.match(resource.type)
        if match and match["group"] == "yaml":
            for file in [resource.inputs.get("file"), *resource.inputs.get("files", [])]:
                if file:
                    pinned = sums.get(file.removeprefix(prefix)) if file.startswith(prefix) else None
                    lines.append(f"{resource.name}: {file}"
                                 + (f" (vendored, sha256 {pinned})" if pinned else ""))
        elif match and match["group"] == "kustomize":
            lines.append(f"{resource.name}: kustomize overlay {resource.inputs.get('directory')} "
                         "(its upstream folders and patches: build/<stack>/kubeflow/)")
        elif match and match["group"] == "helm.sh":
            inputs = resource.inputs
            chart = inputs.get("chart", "")
            source = (f"{chart} (vendored, its files pinned in {vendored.VENDOR_DIR}/"
                      f"{vendored.SUMS_FILE})" if chart.startswith(prefix) else
                      f"{chart} {inputs.get('version')} from "
                      f"{inputs.get('repositoryOpts', {}).get('repo', '')}")
            lines.append(f"{resource.name}: chart {source} into namespace "
                         f"{inputs.get('namespace')}, values "
                         f"{json.dumps(inputs.get('values', {}), sort_keys=True)}")
    if not lines:
        return ""
    header = ("# Applied server-side by the Kubernetes provider at `pulumi up` from these pinned\n"
              "# upstream files and charts (CRDs and namespaces first); not expanded offline.\n"
              "# Upstream files are vendored in vendor/ and checked against vendor/SHA256SUMS at\n"
              "# every run (vendor/README.md).\n")
    return header + "\n".join(lines) + "\n"


def _without_secret_data(resource: ResourceRecord) -> dict[str, Any]:
    """Inputs with a Kubernetes Secret's values hidden: some are derived from secrets
    (a password's hash) and not known to the plan as secrets themselves."""
    if resource.type != "kubernetes:core/v1:Secret":
        return resource.inputs
    inputs = dict(resource.inputs)
    for key in ("data", "stringData"):
        if key in inputs:
            values = rpc.unwrap_rpc_secret(inputs[key]) or {}
            inputs[key] = {name: REDACTED for name in values}
    return inputs


def _manifest(resource: ResourceRecord, match: re.Match) -> dict[str, Any]:
    group, version, kind = match["group"], match["version"], match["kind"]
    kind = kind.removesuffix("Patch")
    document = {
        "apiVersion": version if group == "core" else f"{group}/{version}",
        "kind": kind,
    }
    document.update({k: _json_numbers(v) for k, v in _without_secret_data(resource).items()
                     if k not in ("apiVersion", "kind")})
    return document


def _json_numbers(value: Any) -> Any:
    """Numbers as the API server gets them: the engine carries every number as a double
    (a protobuf Struct), the provider sends JSON, where 65534.0 is 65534."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _json_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_numbers(item) for item in value]
    return value


def _kubeconfig_template(plan: Plan) -> str:
    """The admin kubeconfig with its credentials left out: what users' kubeconfigs will
    look like, safe to read in a pull request."""
    value, _ = plan.outputs["kubeconfig"]
    document = yaml.safe_load(value)
    for user in document.get("users", []):
        user["user"] = {key: REDACTED for key in user.get("user", {})}
    return yaml.safe_dump(document, sort_keys=False)
