"""Ports the program opens and the policy pack guards. Standard library only (the policy
pack's virtualenv has nothing else)."""

SSH = 22
NFS = 2049
KUBERNETES_API = 6443
KUBELET = 10250
# Worker joins: k0s's join API (docs/networking.md at v1.36.3+k0s.2, "Required ports and
# protocols"); RKE2's supervisor (rancher/rke2-docs install/requirements.md, "Inbound
# Network Rules").
K0S_JOIN_API = 9443
RKE2_SUPERVISOR = 9345

# Ports that must never be open to the internet, with what listens there.
ADMIN_PORTS = {SSH: "SSH", NFS: "NFS", KUBERNETES_API: "the Kubernetes API",
               K0S_JOIN_API: "the k0s join API",
               RKE2_SUPERVISOR: "the RKE2 supervisor (agent joins)", KUBELET: "the kubelet API"}
