"""Every upstream artifact version the program installs, pinned in one place.

Stack config may override these under `gpu-cluster:versions`; the defaults below are
what the project is tested with. Python dependencies are pinned in requirements*.txt.
"""

import re
from dataclasses import dataclass
from typing import Optional

from contract import ports

K0S = "v1.36.3+k0s.2"
# RKE2, the second distribution (kubernetes.distribution: rke2): the release tag whose
# rke2.linux-<arch>.tar.gz and sha256sum-<arch>.txt the rke2 scripts install
# (github.com/rancher/rke2/releases; install.sh download_tarball/download_checksums).
RKE2 = "v1.36.3+rke2r1"
# RKE2's SELinux policy for hosts where SELinux labels files (EL9): rke2-selinux VERSION-RELEASE
# from Rancher's stable RPM repository for EL9 (tag v0.23.stable.1 of rancher/rke2-selinux,
# 95659f0: policy/centos9, scripts/version makes the tag 0.23-1; its rke2.fc labels the
# tarball's /usr/local/bin/rke2 and units). The repository's key, "Rancher (CI)
# <ci@rancher.com>" (https://rpm.rancher.io/public.key, rancher/rke2-selinux README, "Signing
# Keys"), by fingerprint: the one dnf shows importing it in public install logs.
RKE2_SELINUX = "0.23-1.el9"
RANCHER_RPM_KEY_FINGERPRINT = "C8CFF216455126E9B9C918BE925EA29AE257814A"


# Image digests: the content each tag named when it was pinned, so a tag moved by whoever can
# push to its repository changes nothing here. An image constant below is `pinned(...)`: its
# tag, kept for people, plus the digest listed here, if any. `python -m pins` reads the
# digests of the tag-only images from their registries and adds them to this table
# (`--check` reports a tag that moved since); each line says where its digest came from.
# The lines between the markers are the table's, one image a line: the tool rewrites them.
IMAGE_DIGESTS: dict[str, str] = {
    # --- pins: digests ---
    # NVIDIA's own pin: NVIDIA/gpu-operator bundle/manifests/
    # gpu-operator-certified.clusterserviceversion.yaml:266 (commit a22dbf6, Aug 2026).
    "nvcr.io/nvidia/k8s-device-plugin:v0.20.0": "sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312",
    # NVIDIA's own pin: the same file at commit ce8360e (gpu-operator's dcgm-exporter pin
    # before 4.6.0).
    "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless": "sha256:60d3b00ac80b4ae77f94dae2f943685605585ad9e92fdccda3154d009ae317cc",
    # The multi-arch index of v2.20.0, the same in two unrelated public repositories that pin
    # it (one also lists its amd64 manifest 01171220c7c0...); no upstream file publishes it.
    "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.20.0": "sha256:42cfe3723a5f058171c627537fb57a3ea0f26e4380fa18555a95cb1a1b4cfc5b",
    # The same digest in unrelated public repositories that pin v3.14.0 from quay.io and
    # from Docker Hub (open-telemetry/opentelemetry-ebpf-instrumentation among them).
    "quay.io/prometheus/prometheus:v3.14.0": "sha256:5ce7540c3c00ef4ab0c9d2c995c6a5b9c421f44b4a115d97a2c7af3b1c21cbb0",
    # The same digest in more than five unrelated public repositories that pin 13.2.0.
    "docker.io/grafana/grafana:13.2.0": "sha256:3fd54ae1214669f8355f065ec9f6445d5279a3d77095ab048ca045685272429b",
    # The image promoter's manifest for registry.k8s.io, which maps each digest it serves to
    # its tags: kubernetes/k8s.io registry.k8s.io/images/k8s-staging-sig-storage/images.yaml
    # (commit 0279c5e), `nfs-subdir-external-provisioner` dmap, [ "v4.0.2" ]. A manifest list:
    # the release pushes one (nfs-subdir-external-provisioner v4.0.2
    # release-tools/build.make:156-157, `docker manifest create` / `docker manifest push`).
    "registry.k8s.io/sig-storage/nfs-subdir-external-provisioner:v4.0.2": "sha256:63d5e04551ec8b5aae83b6f35938ca5ddc50a88d85492d9731810c31591fa4c9",
    # Docker's own record of its official images: docker-library/repo-info
    # repos/busybox/remote/1.37.0.md:4 (commit 01a7054, May 2026), `docker pull busybox@...`,
    # "Manifest MIME: application/vnd.oci.image.index.v1+json" (the multi-arch index).
    "busybox:1.37.0": "sha256:9db7b59979c38555a39def84a31fb98b5296952f9e3afd4f6f11f05b07adfab0",
    # No upstream file publishes it (rancher/local-path-provisioner's deploy/ names the tag):
    # the same digest for v0.0.37 in more than five unrelated public repositories (kustomize
    # `images:` entries with newTag v0.0.37, a Nix pullImage with finalImageTag v0.0.37, test
    # fixtures), two of them "verified pullable 2026-08-11". Index or manifest: not stated.
    "rancher/local-path-provisioner:v0.0.37": "sha256:e757967a5ec338f6a9b371c5a9688bedaa8c3578ea3dd4db329ea0084be0a86f",
    # The k8s.io promoter manifest, kubernetes/k8s.io registry.k8s.io/images/
    # k8s-staging-provider-aws/images.yaml, `cloud-controller-manager` dmap, at
    # commit 0137eda2cba1d3894c93aa4bd4363eacc2ed7287: the newest tag it promotes
    # (CLOUD_PROVIDER_AWS says why not v1.36.x).
    "registry.k8s.io/provider-aws/cloud-controller-manager:v1.35.2": "sha256:5a5d4e5942ad078a184c12bf5435f8226ccb157ee15e9e1f87c183a4bf4b8f1a",
    # The image promoter's manifest for registry.k8s.io: registry.k8s.io/images/
    # k8s-staging-autoscaling/images.yaml, `cluster-autoscaler` dmap, [ "v1.36.1" ], read at
    # commit 2d7cc8e of a fork of kubernetes/k8s.io (the stored copies of kubernetes/k8s.io
    # itself stop at v1.33.1); the same digest in an unrelated public file that pins v1.36.1.
    # The multi-arch image (the per-architecture ones are `cluster-autoscaler-amd64`, ...).
    "registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.1": "sha256:461388d03eb5b55db58941ee7a81d9a619dd15302b01cbab9f5a9946715994b4",
    # --- end of pins ---
}


def pinned(image: str) -> str:
    """`image` (repository:tag) with its digest from IMAGE_DIGESTS appended, when it has one."""
    digest = IMAGE_DIGESTS.get(image)
    return f"{image}@{digest}" if digest else image


@dataclass(frozen=True)
class Distribution:
    """A Kubernetes distribution the program installs: its pinned release, the form of
    its release tags (matched whole), and the API port when it cannot serve another."""

    pin: str
    release_form: re.Pattern
    fixed_api_port: Optional[int] = None


# kubernetes.distribution's values; each has its module components/distributions/<name>.py
# and its scripts in components/scripts/<name>/. Tags: github.com/k0sproject/k0s/releases;
# github.com/rancher/rke2/releases (the form rke2/lib.sh RKE2_RELEASE checks). RKE2's server
# drops --https-listen-port (rancher/rke2 pkg/cli/cmds/server.go).
DISTRIBUTIONS = {
    # The same forms as the scripts' checks (k0s/lib.sh k0s_install_binary, rke2/lib.sh
    # RKE2_RELEASE; tests/config/test_release_forms.py has bash judge both alike).
    "k0s": Distribution(K0S, re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?\+k0s\.[0-9]+")),
    "rke2": Distribution(RKE2, re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+(-rc[0-9]+)?\+rke2r[0-9]+"),
                         fixed_api_port=ports.KUBERNETES_API),
}
# The sha256 of the file each distribution's scripts download (k0s: the binary
# k0s-<version>-<arch>; RKE2: rke2.linux-<arch>.tar.gz), per release and architecture,
# checked on the host before anything is installed. Pinned here, never read from the release
# that is being checked. Sources (the release's own sha256 files are not reachable offline):
# - k0s v1.36.3+k0s.2: github.com/johbo/k0s-nix commit 02b6c83 k0s/1_36.nix (Nix SRI hashes
#   of the release assets, "k0s_1_36: 1.36.3+k0s.1 -> 1.36.3+k0s.2"); amd64 also in a second,
#   unrelated Nix package fetching the same URL (the same SRI hash).
# - RKE2 v1.36.3+rke2r1: github.com/KornaKube/terraform-hcloud-kube-hetzner commit eb6d1f2
#   locals.tf:841-844 rke2_release_sha256_manifest ("captured from the official GitHub
#   release assets/checksum files", the tarball its scripts/install-verified-kubernetes.sh
#   verifies); amd64 also in an RKE2-on-Flatcar guide's Ignition `verification.hash`.
# Another kubernetes.version needs its checksums in `gpu-cluster:versions` releaseSha256.
RELEASE_SHA256 = {
    "k0s": {
        K0S: {"amd64": "f8b278ba5a9938ced226381484a0f31b6bfa2938703949df235474e03c774acc",
              "arm64": "5114193cad12fd34169518bb81b5967792e0c3b840dd6d730d0e0252315131ee"},
    },
    "rke2": {
        RKE2: {"amd64": "5bbc6315131af7f435385d0ed63f14788ef2a858ac482f8b9146cf3a1a1582d3",
               "arm64": "af50c3352ccb4d86c1fda24424707f9d4078b2a296245d832143ae283cd5fdbd"},
    },
}
RELEASE_ARCHITECTURES = ("amd64", "arm64")

# NVIDIA's production driver branch, installed from Ubuntu's *-server packages.
NVIDIA_DRIVER_BRANCH = "580"
# apt version of nvidia-container-toolkit and its libraries.
NVIDIA_CONTAINER_TOOLKIT = "1.19.1-1"
# The OpenPGP key of its apt repository (https://nvidia.github.io/libnvidia-container/gpgkey,
# "NVIDIA CORPORATION (Open Source Projects) <cudatools@nvidia.com>"), by fingerprint: the
# gpg listing of that file in NVIDIA/nvidia-container-toolkit#650 and
# NVIDIA/libnvidia-container#280; the key apt names when it is missing is its long id
# DDCAE044F796ECB0 (NVIDIA/nvidia-container-toolkit#81). install-nvidia.sh trusts no other.
# The same key signs its RPM repository's metadata (stable/rpm/, EL9 hosts).
NVIDIA_CONTAINER_TOOLKIT_KEY_FINGERPRINT = "C95B321B61E88C1809C4F759DDCAE044F796ECB0"
# The key of NVIDIA's CUDA RPM repositories (D42D0685.pub, "cudatools <cudatools@nvidia.com>"),
# which EL9 hosts take the driver from, by fingerprint: NVIDIA/cuda-repo-management
# SIGNATURES.md (ee8303d), "RPM repo method 1/2", the key dnf imports for the rhel8 repository
# and that signs its repomd.xml; one key for every RPM distribution since the 2022 rotation
# (NVIDIA/cuda-repo-management#4). Ubuntu hosts take the driver from Ubuntu's archive.
NVIDIA_CUDA_REPO_KEY_FINGERPRINT = "610C7B14E068A878070DA4E99CD0A493D42D0685"
# EPEL 9's key ("Fedora (epel9) <epel@fedoraproject.org>", dl.fedoraproject.org/pub/epel/
# RPM-GPG-KEY-EPEL-9), which signs its packages (packages.epel, configure-dnf.sh), by
# fingerprint: `gpg --show-keys` of keys/epel/RPM-GPG-KEY-EPEL-9 in
# rpm-software-management/distribution-gpg-keys (added in 5a8177d, "Add EPEL9 key"; the same
# at 65c3eae), the key dnf shows importing it ("Importing GPG key 0x3228467C").
EPEL_9_KEY_FINGERPRINT = "FF8AD1344597106ECE813B918A3872BF3228467C"

# The hosts' operating systems: contract/host_os.py (the command reads them too).

# Cluster add-ons.
NVIDIA_DEVICE_PLUGIN = "v0.20.0"
NVIDIA_DEVICE_PLUGIN_REPOSITORY = "nvcr.io/nvidia/k8s-device-plugin"
NVIDIA_DEVICE_PLUGIN_IMAGE = pinned(f"{NVIDIA_DEVICE_PLUGIN_REPOSITORY}:{NVIDIA_DEVICE_PLUGIN}")
# The same release's Helm chart, used only for the optional GPU Feature Discovery (with
# its node-feature-discovery dependency); the device plugin itself is rendered here.
NVIDIA_DEVICE_PLUGIN_CHART = "nvidia-device-plugin"
NVIDIA_DEVICE_PLUGIN_CHART_VERSION = NVIDIA_DEVICE_PLUGIN.lstrip("v")
NVIDIA_DEVICE_PLUGIN_CHART_REPO = "https://nvidia.github.io/k8s-device-plugin"
MPI_OPERATOR = "v0.8.0"
MPI_OPERATOR_MANIFEST_SOURCE = (
    f"https://raw.githubusercontent.com/kubeflow/mpi-operator/{MPI_OPERATOR}"
    "/deploy/v2beta1/mpi-operator.yaml"
)
# That file, vendored (vendor/README.md); relative to the project, as the provider reads it.
MPI_OPERATOR_MANIFEST = f"vendor/mpi-operator-{MPI_OPERATOR}/deploy/v2beta1/mpi-operator.yaml"
# Its content as reviewed: vendor/SHA256SUMS pins the same digest (the tests hold it).
MPI_OPERATOR_MANIFEST_SHA256 = "b38def13a94abe60b2a4b3485239d77f64892b8fbd202e9e435a6031b7500a8f"
# The image that manifest runs, as it writes it: applied unchanged, so by tag (the preview
# says so; the tests hold it to the vendored file).
MPI_OPERATOR_IMAGE = "mpioperator/mpi-operator:0.8.0"
# Kueue (job queueing for the teams, access.queues): the release's Helm chart, as its README
# installs it (kubernetes-sigs/kueue v0.19.2 charts/kueue/README.md), vendored from the tag
# (vendor/README.md) and read from there by the provider, with the release's image set in the
# values. Packaging the release changes only the image repositories, tags and pull policies
# in values.yaml (hack/helm-chart-package.sh, the `yq ... -i charts/kueue/values.yaml` lines):
# the manager's are set here, the others are for kueueViz, which stays off.
KUEUE = "v0.19.2"
KUEUE_CHART = f"vendor/kueue-{KUEUE}/charts/kueue"
KUEUE_CHART_VERSION = KUEUE.lstrip("v")
KUEUE_IMAGE_REPOSITORY = "registry.k8s.io/kueue/kueue"
KUEUE_IMAGE = pinned(f"{KUEUE_IMAGE_REPOSITORY}:{KUEUE}")
# The EFS CSI driver (the cloud layout's EFS volumes: access points, mounted by efs-utils with
# `tls,iam`): its Helm chart 4.4.1 at the release tag v3.4.1, vendored from the tag
# (vendor/README.md); the images are the chart's defaults at that tag
# (charts/aws-efs-csi-driver/values.yaml `image`, `sidecars.*.image`), set here in its values.
EFS_CSI_DRIVER = "v3.4.1"
EFS_CSI_DRIVER_CHART = f"vendor/aws-efs-csi-driver-{EFS_CSI_DRIVER}/charts/aws-efs-csi-driver"
EFS_CSI_DRIVER_CHART_VERSION = "4.4.1"
EFS_CSI_DRIVER_IMAGE_REPOSITORY = "public.ecr.aws/efs-csi-driver/amazon/aws-efs-csi-driver"
EFS_CSI_DRIVER_IMAGE = pinned(f"{EFS_CSI_DRIVER_IMAGE_REPOSITORY}:{EFS_CSI_DRIVER}")
# The chart's sidecars: each one's repository and image.
EFS_CSI_SIDECAR_IMAGES = {name: (repository, pinned(f"{repository}:{tag}")) for name, (
    repository, tag) in {
    "livenessProbe": ("public.ecr.aws/csi-components/livenessprobe", "v2.19.0-eksbuild.3"),
    "nodeDriverRegistrar": ("public.ecr.aws/csi-components/csi-node-driver-registrar",
                            "v2.17.0-eksbuild.3"),
    "csiProvisioner": ("public.ecr.aws/csi-components/csi-provisioner", "v6.3.0-eksbuild.2"),
}.items()}
# The AWS cloud controller manager (components/aws/cloud_controller.py): kubernetes/
# cloud-provider-aws v1.35.2 (commit 1c494fb), its chart vendored from that tag. The release
# for Kubernetes 1.36 is tagged (v1.36.0, v1.36.1, commit 7656c21) but registry.k8s.io does
# not serve it: the promoter manifest (IMAGE_DIGESTS) promotes no v1.36 tag, so it cannot be
# pinned by digest and would not pull. v1.35.2 is the newest promoted one; Kubernetes'
# version skew policy lets a cloud-controller-manager be one minor older than the API server
# (https://kubernetes.io/releases/version-skew-policy/, kube-controller-manager,
# kube-scheduler, and cloud-controller-manager). Move to v1.36.x once the manifest lists it.
CLOUD_PROVIDER_AWS = "v1.35.2"
CLOUD_PROVIDER_AWS_CHART = (f"vendor/cloud-provider-aws-{CLOUD_PROVIDER_AWS}/charts/"
                            "aws-cloud-controller-manager")
CLOUD_PROVIDER_AWS_CHART_VERSION = "0.0.10"
CLOUD_PROVIDER_AWS_IMAGE_REPOSITORY = "registry.k8s.io/provider-aws/cloud-controller-manager"
CLOUD_PROVIDER_AWS_IMAGE = pinned(f"{CLOUD_PROVIDER_AWS_IMAGE_REPOSITORY}:{CLOUD_PROVIDER_AWS}")
# cluster-autoscaler (the cloud layout's pools, components/addons/cluster_autoscaler.py): the
# newest patch of the release for Kubernetes 1.36 (kubernetes/autoscaler tag
# cluster-autoscaler-1.36.1, 35e8a28; CA's minor follows Kubernetes', its FAQ "What are the
# Parameters to CA?" / README "Releases"), with the Helm chart of the newest chart tag,
# cluster-autoscaler-chart-9.59.0 (5a0b98e): no chart tag names 1.36 yet (9.54.0 to 9.59.0 have
# appVersion 1.35.0), so the image is set in its values. Both vendored (vendor/README.md); the
# ProvisioningRequest CRD (autoscaling.x-k8s.io) is the release tag's.
CLUSTER_AUTOSCALER = "v1.36.1"
CLUSTER_AUTOSCALER_CHART_VERSION = "9.59.0"
CLUSTER_AUTOSCALER_CHART = (f"vendor/cluster-autoscaler-chart-{CLUSTER_AUTOSCALER_CHART_VERSION}"
                            "/cluster-autoscaler/charts/cluster-autoscaler")
CLUSTER_AUTOSCALER_SOURCE = f"vendor/cluster-autoscaler-{CLUSTER_AUTOSCALER.lstrip('v')}"
PROVISIONING_REQUEST_CRD = (f"{CLUSTER_AUTOSCALER_SOURCE}/cluster-autoscaler/apis/config/crd/"
                            "autoscaling.x-k8s.io_provisioningrequests.yaml")
CLUSTER_AUTOSCALER_IMAGE_REPOSITORY = "registry.k8s.io/autoscaling/cluster-autoscaler"
CLUSTER_AUTOSCALER_IMAGE = pinned(f"{CLUSTER_AUTOSCALER_IMAGE_REPOSITORY}:{CLUSTER_AUTOSCALER}")
NFS_SUBDIR_PROVISIONER = "v4.0.2"
NFS_SUBDIR_PROVISIONER_IMAGE = pinned(
    f"registry.k8s.io/sig-storage/nfs-subdir-external-provisioner:{NFS_SUBDIR_PROVISIONER}")
LOCAL_PATH_PROVISIONER = "v0.0.37"
LOCAL_PATH_PROVISIONER_IMAGE = pinned(f"rancher/local-path-provisioner:{LOCAL_PATH_PROVISIONER}")
# A small shell: local-path-provisioner's helper pods and the storage acceptance check.
BUSYBOX_IMAGE = pinned("busybox:1.37.0")

# The monitoring add-on (components/addons/monitoring/), rendered by the program, no chart.
# NVIDIA's DCGM exporter at the tag its own chart pins (NVIDIA/dcgm-exporter
# deployment/values.yaml `image.tag`, commit d5e5f51, May 2026): DCGM 4.5.3, which needs
# driver R450 or later (docs.nvidia.com/datacenter/dcgm/latest/installation.html,
# "Supported Platforms"), so the R580 branch above.
DCGM_EXPORTER_IMAGE = pinned("nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless")
# The versions kube-prometheus-stack 88.5.3 ships (prometheus-community/helm-charts
# charts/kube-prometheus-stack/values.yaml `prometheus.prometheusSpec.image`, its
# kube-state-metrics dependency 8.4.0 with appVersion 2.20.0; commit cf408a2, Aug 2026).
PROMETHEUS_IMAGE = pinned("quay.io/prometheus/prometheus:v3.14.0")
KUBE_STATE_METRICS_IMAGE = pinned(
    "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.20.0")
# Grafana at the appVersion of the grafana chart that kube-prometheus-stack 88.5.3 depends
# on (grafana-community/helm-charts charts/grafana/Chart.yaml 12.11.1, commit 3386a11).
GRAFANA_IMAGE = pinned("docker.io/grafana/grafana:13.2.0")

# Images of the acceptance workloads (files users apply after `pulumi up`).
CUDA_BASE_IMAGE = pinned("nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04")
CUDA_SAMPLE_IMAGE = pinned("nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04")
# NCCL's benchmark for the MPI check: NVIDIA/nccl-tests 2.18.3 built with MPI, NCCL 2.30.4,
# CUDA 12.9.1 (Ampere to Blackwell; the R580 driver runs it), HPC-X OpenMPI and sshd: CoreWeave's
# maintained image, listed in the "Docker Images" table of github.com/coreweave/nccl-tests
# README.md (commit cb86553, May 2026); the tag's suffix is the commit it was built from.
NCCL_TESTS_IMAGE = pinned(
    "ghcr.io/coreweave/nccl-tests:12.9.1-devel-ubuntu24.04-nccl2.30.4-1-2eedd7c")
# Images of `python -m validate` only (never applied by the program).
# NVIDIA's DCGM (dcgmi, nv-hostengine), the tag the GPU Operator chart pins for its standalone
# host engine (NVIDIA/gpu-operator deployments/gpu-operator/values.yaml, `dcgm.version`).
DCGM_IMAGE = pinned("nvcr.io/nvidia/cloud-native/dcgm:3.3.7-1-ubuntu22.04")
# fio and iperf3: the community images public manifests pin (Docker Hub ljishen/fio, built from
# github.com/ljishen/fio-docker; networkstatic/iperf3, from github.com/nerdalert/iperf3).
FIO_IMAGE = pinned("ljishen/fio:3.36")
IPERF3_IMAGE = pinned("networkstatic/iperf3:3.16")

# Kubeflow: the kubeflow/manifests release (git tag) the Kubeflow stages are built from: the
# community distribution 26.03 (its README, "Kubeflow Components Versions"). It ships
# Trainer v2, whose CRDs do not clash with the MPI operator's MPIJob.
KUBEFLOW_MANIFESTS = "26.03"
KUBEFLOW_MANIFESTS_REPOSITORY = "https://github.com/kubeflow/manifests"
# The Argo Workflows release that release's Pipelines names as remote bases (v1.11.0's too)
# (applications/pipeline/upstream/third-party/argo/base/kustomization.yaml), vendored too.
ARGO_WORKFLOWS = "v3.7.3"
# JobSet, which Trainer's folder names as a remote base (the release asset
# github.com/kubernetes-sigs/jobset/releases/download/v0.10.1/manifests.yaml), vendored:
# built from the tag's config/default as the release does (vendor/README.md).
JOBSET = "v0.10.1"
JOBSET_MANIFEST = f"vendor/jobset-{JOBSET}/manifests.yaml"
# cert-manager's own API check (the Helm chart's startupapicheck), at the cert-manager
# release those manifests ship; the tests check the tag against them.
CERT_MANAGER_API_CHECK_IMAGE = pinned("quay.io/jetstack/cert-manager-startupapicheck:v1.19.4")

# EC2 images, by exact name (an image name is unique per owner and region), so an instance
# or launch template changes only when this pin does, never because a newer image
# appeared. The resolved ids are the stack output `images`. Deprecated images still match
# (DescribeImages hides them unless asked), so an old pin keeps resolving.
UBUNTU_IMAGE_OWNER = "099720109477"  # Canonical
UBUNTU_IMAGE_NAME = "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-amd64-server-20260904"
# AWS's GPU image with the NVIDIA driver and container toolkit (the cloud pools' default).
GPU_IMAGE_OWNER = "amazon"
GPU_IMAGE_NAME = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20260929"

# EC2's on-demand prices of the GPU instance types (config/ec2_prices.json, read by the
# preview's price line for each pool): karpenter-provider-aws's table, generated from AWS's
# Price List API, as of this commit on main ("chore: Update data from AWS APIs (#9435)"; release
# tag v1.14.1 has the older table of 2026-07-06; main's 1d92708 of 2026-08-21 the same blob),
# its header line 19: "generated at <EC2_PRICES_GENERATED> for us-east-1".
# `python -m config.ec2_prices GIT_DIR COMMIT` rewrites the table from another commit
# (README, "What a pool costs").
EC2_PRICES_REPOSITORY = "github.com/aws/karpenter-provider-aws"
EC2_PRICES_PATH = "pkg/providers/pricing/zz_generated.pricing_aws.go"
EC2_PRICES_COMMIT = "6fc13b5236fd04fd16ff3f9dc7490d0813994099"
EC2_PRICES_BLOB = "f9e947e9f370b3646a3635d99fdc4622d084166d"
EC2_PRICES_GENERATED = "2026-07-20T13:44:30Z"

# The images the program applies, by the key that names them here; `pulumi preview` warns
# about those pinned by tag only (image_pins.tag_only).
DEPLOYED_IMAGES = {
    "NVIDIA_DEVICE_PLUGIN_IMAGE": NVIDIA_DEVICE_PLUGIN_IMAGE,
    "KUEUE_IMAGE": KUEUE_IMAGE,
    "EFS_CSI_DRIVER_IMAGE": EFS_CSI_DRIVER_IMAGE,
    **{f"EFS_CSI_SIDECAR_IMAGES.{name}": image
       for name, (_, image) in EFS_CSI_SIDECAR_IMAGES.items()},
    "CLOUD_PROVIDER_AWS_IMAGE": CLOUD_PROVIDER_AWS_IMAGE,
    "CLUSTER_AUTOSCALER_IMAGE": CLUSTER_AUTOSCALER_IMAGE,
    "NFS_SUBDIR_PROVISIONER_IMAGE": NFS_SUBDIR_PROVISIONER_IMAGE,
    "LOCAL_PATH_PROVISIONER_IMAGE": LOCAL_PATH_PROVISIONER_IMAGE,
    "BUSYBOX_IMAGE": BUSYBOX_IMAGE,
    "DCGM_EXPORTER_IMAGE": DCGM_EXPORTER_IMAGE,
    "PROMETHEUS_IMAGE": PROMETHEUS_IMAGE,
    "KUBE_STATE_METRICS_IMAGE": KUBE_STATE_METRICS_IMAGE,
    "GRAFANA_IMAGE": GRAFANA_IMAGE,
    "CUDA_BASE_IMAGE": CUDA_BASE_IMAGE,
    "CUDA_SAMPLE_IMAGE": CUDA_SAMPLE_IMAGE,
    "NCCL_TESTS_IMAGE": NCCL_TESTS_IMAGE,
    "CERT_MANAGER_API_CHECK_IMAGE": CERT_MANAGER_API_CHECK_IMAGE,
}
# The images only `python -m validate` runs (the others it runs are above).
VALIDATE_IMAGES = {"DCGM_IMAGE": DCGM_IMAGE, "FIO_IMAGE": FIO_IMAGE, "IPERF3_IMAGE": IPERF3_IMAGE}

# The images the pinned distribution releases above run themselves, by release: what a node
# pulls beside the program's (build/<stack>/images.txt, the image mirror's upstream
# registries). Facts of those releases, read from their tags; a release without an entry
# has its list from the release's own image list at `pulumi up` time (the preview says so).
# k0s v1.36.3+k0s.2 pkg/constant/constant.go:72-105 (the default images of its
# ClusterConfig, pkg/apis/k0s/v1beta1/images.go): those of a Linux node with the
# konnectivity agent, metrics-server, kube-proxy, CoreDNS and the CNI of network.cni.
# Not pulled here: pushgateway (system metrics, off), the Windows images; envoy only
# with node-local load balancing (_K0S_NLLB).
_K0S_COMMON = (
    "quay.io/k0sproject/apiserver-network-proxy-agent:v0.36.0-k0s.0",
    "quay.io/k0sproject/metrics-server:v0.9.0-k0s.0",
    "quay.io/k0sproject/pause:3.10.2-0",
    "quay.io/k0sproject/kube-proxy:v1.36.3-1",
    "quay.io/k0sproject/coredns:1.14.6-k0s.0",
)
# Node-local load balancing's proxy on every worker, type EnvoyProxy (k0s
# pkg/constant/constant.go:88-89 at the pin); by tag, as k0s pins it, like the others.
_K0S_NLLB = ("quay.io/k0sproject/envoy-distroless:v1.39.0",)
_K0S_CNI = {
    "calico": ("quay.io/k0sproject/calico-cni:v3.32.1-2",
               "quay.io/k0sproject/calico-node:v3.32.1-2",
               "quay.io/k0sproject/calico-kube-controllers:v3.32.1-2"),
    "kuberouter": ("quay.io/k0sproject/kube-router:v2.10.0-iptables1.8.13-k0s.1",
                   "quay.io/k0sproject/cni-node:v1.9.1-k0s.1"),
}
# RKE2 v1.36.3+rke2r1 scripts/build-images (images-core.txt and images-canal.txt, with
# REGISTRY=docker.io, REPO=rancher) and scripts/version.sh:36-42 (the tags it fills in):
# the core images and Canal, the CNI components/distributions/rke2.py configures.
_RKE2 = (
    "docker.io/rancher/rke2-runtime:v1.36.3-rke2r1",
    "docker.io/rancher/hardened-kubernetes:v1.36.3-rke2r1-build20260723",
    "docker.io/rancher/hardened-coredns:v1.14.6-build20260722",
    "docker.io/rancher/hardened-cluster-autoscaler:v1.10.3-build20260717",
    "docker.io/rancher/hardened-dns-node-cache:1.26.8-build20260722",
    "docker.io/rancher/hardened-etcd:v3.6.14-k3s1-build20260723",
    "docker.io/rancher/hardened-k8s-metrics-server:v0.9.0-build20260722",
    "docker.io/rancher/hardened-addon-resizer:1.8.23-build20260717",
    "docker.io/rancher/klipper-helm:v0.13.3-build20260727",
    "docker.io/rancher/klipper-lb:v0.4.17",
    "docker.io/rancher/mirrored-pause:3.10.2",
    "docker.io/rancher/rke2-cloud-provider:v1.36.2-0.20260610225606-10b320a3ba51-build20260709",
    "docker.io/rancher/hardened-snapshot-controller:v8.6.0-build20260722",
    "docker.io/rancher/hardened-traefik:v3.7.8-build20260717",
    "docker.io/rancher/hardened-calico:v3.32.1-build20260722",
    "docker.io/rancher/hardened-flannel:v0.28.8-build20260722",
)


def release_images(distribution: str, version: str, cni: str,
                   nllb: bool = False) -> tuple[str, ...]:
    """The images of `distribution` at `version` with `cni` (and k0s's node-local load
    balancing when `nllb`); () when not known offline."""
    if distribution == "k0s" and version == K0S:
        return _K0S_COMMON + _K0S_CNI[cni] + (_K0S_NLLB if nllb else ())
    if distribution == "rke2" and version == RKE2:
        return _RKE2
    return ()
