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
# Between controllers: etcd's client and peer ports (both distributions), RKE2's etcd
# metrics (its "Inbound Network Rules"), k0s's konnectivity server, which workers' agents
# dial (k0s docs/networking.md, "Required ports and protocols"), and the port k0s's control
# plane load balancing serves the API at behind the virtual IP (docs/cplb.md:527-537 at
# v1.36.3+k0s.2: an iptables REDIRECT from VIP:6443).
ETCD_CLIENT = 2379
ETCD_PEER = 2380
ETCD_METRICS = 2381
KONNECTIVITY = 8132
K0S_CPLB_PROXY = 6444

# Ports that must never be open to the internet, with what listens there.
ADMIN_PORTS = {SSH: "SSH", NFS: "NFS", KUBERNETES_API: "the Kubernetes API",
               K0S_JOIN_API: "the k0s join API",
               RKE2_SUPERVISOR: "the RKE2 supervisor (agent joins)", KUBELET: "the kubelet API",
               ETCD_CLIENT: "etcd's client API", ETCD_PEER: "etcd's peer port",
               ETCD_METRICS: "etcd's metrics", KONNECTIVITY: "k0s's konnectivity server",
               K0S_CPLB_PROXY: "the Kubernetes API behind k0s's virtual IP"}
