"""The Kubeflow MPI operator (MPIJob kubeflow.org/v2beta1) from its pinned upstream
release manifest, vendored in vendor/. The provider applies it server-side (the CRD is
too large for a client-side last-applied annotation) and installs its CRD and namespace
first, then waits for the CRD to be established before anything that uses it."""

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from config import versions


@dataclass(frozen=True, kw_only=True)
class MpiOperatorArgs:
    # The add-ons' provider: registered once every node is ready.
    provider: k8s.Provider


class MpiOperator(pulumi.ComponentResource):
    def __init__(self, name: str, args: MpiOperatorArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:addons:MpiOperator", name, None, opts)
        # A stable name: a version bump updates in place; a replacement would delete the
        # CRD and with it every MPIJob. `file` is the vendored copy of the release file the
        # URL served before (the same sha256): moving from the URL is an update of this
        # component only, whose objects stay the same. Checked at every run before anything
        # is registered (config/vendored.py).
        self.manifest = k8s.yaml.v2.ConfigFile(
            f"{name}-manifest",
            file=versions.MPI_OPERATOR_MANIFEST,
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
        )
        self.register_outputs({"manifest": versions.MPI_OPERATOR_MANIFEST})
