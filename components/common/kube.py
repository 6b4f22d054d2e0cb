"""Kubernetes objects written as manifests (dicts, readable like YAML) and registered as
typed pulumi_kubernetes resources, so each object shows in a preview and diffs alone."""

import importlib
import re

import pulumi
import pulumi_kubernetes as k8s

# apiVersion group -> pulumi_kubernetes module name.
_GROUP_MODULES = {
    "": "core",
    "admissionregistration.k8s.io": "admissionregistration",
    "apps": "apps",
    "batch": "batch",
    "networking.k8s.io": "networking",
    "rbac.authorization.k8s.io": "rbac",
    "storage.k8s.io": "storage",
    "node.k8s.io": "node",
    "scheduling.k8s.io": "scheduling",
}


def resource_class(api_version: str, kind: str) -> type:
    group, _, version = api_version.rpartition("/")
    module = importlib.import_module(f"pulumi_kubernetes.{_GROUP_MODULES[group]}.{version}")
    return getattr(module, kind)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def apply(manifest: dict, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Registers one object; its Pulumi name is `<namespace>-<kind>-<name>`."""
    metadata = manifest["metadata"]
    name = "-".join(filter(None, [metadata.get("namespace"), manifest["kind"].lower(),
                                  metadata["name"]]))
    if manifest["apiVersion"].rpartition("/")[0] not in _GROUP_MODULES:
        # A custom resource (Istio's, Kubeflow's): its CRD's fields as they are.
        return k8s.apiextensions.CustomResource(
            name, api_version=manifest["apiVersion"], kind=manifest["kind"],
            **{key: value for key, value in manifest.items()
               if key not in ("apiVersion", "kind")}, opts=opts)
    cls = resource_class(manifest["apiVersion"], manifest["kind"])
    fields = {_snake(key): value for key, value in manifest.items()
              if key not in ("apiVersion", "kind")}
    return cls(name, **fields, opts=opts)


def apply_all(manifests: list[dict], opts: pulumi.ResourceOptions) -> list[pulumi.CustomResource]:
    """Namespaces first; every other object waits for them."""
    namespaces = [apply(m, opts) for m in manifests if m["kind"] == "Namespace"]
    rest = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=namespaces))
    return namespaces + [apply(m, rest) for m in manifests if m["kind"] != "Namespace"]


def k8s_provider_opts(provider: k8s.Provider, parent: pulumi.Resource,
                      depends_on: list = ()) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(provider=provider, parent=parent, depends_on=list(depends_on))
