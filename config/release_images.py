"""The images the pinned distribution releases of config/versions.py run themselves, by
release: what a node pulls beside the program's (build/<stack>/images.txt, the image
mirror's upstream registries). Facts of those releases, read from their tags; a release
without an entry has its list from the release's own image list at `pulumi up` time (the
preview says so)."""

from config import versions

# k0s v1.36.3+k0s.2 pkg/constant/constant.go:72-105 (the default images of its
# ClusterConfig, pkg/apis/k0s/v1beta1/images.go): those of a Linux node with the
# konnectivity agent, metrics-server, kube-proxy, CoreDNS and the CNI of network.cni.
# Not pulled here: envoy (node-local load balancing, off), pushgateway (system metrics,
# off), the Windows images.
_K0S_COMMON = (
    "quay.io/k0sproject/apiserver-network-proxy-agent:v0.36.0-k0s.0",
    "quay.io/k0sproject/metrics-server:v0.9.0-k0s.0",
    "quay.io/k0sproject/pause:3.10.2-0",
    "quay.io/k0sproject/kube-proxy:v1.36.3-1",
    "quay.io/k0sproject/coredns:1.14.6-k0s.0",
)
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


def release_images(distribution: str, version: str, cni: str) -> tuple[str, ...]:
    """The images of `distribution` at `version` with `cni`; () when not known offline."""
    if distribution == "k0s" and version == versions.K0S:
        return _K0S_COMMON + _K0S_CNI[cni]
    if distribution == "rke2" and version == versions.RKE2:
        return _RKE2
    return ()
