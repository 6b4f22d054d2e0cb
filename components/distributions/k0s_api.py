"""The API side of k0s's cluster config (/etc/k0s/k0s.yaml, components/distributions/k0s.py):
the API server's flags and files, and the control plane's endpoint."""

from typing import Optional

from components.common import audit
from components.distributions.base import admission_plugins, jwks_uri
from config.control_plane import ControlPlaneEndpoint
from config.hosts import Host

# Files install-controller writes for kube-apiserver, which k0s runs as the system user
# kube-apiserver (k0s pkg/constant/constant.go ApiserverUser; `k0s install controller`
# creates it, pkg/install/users_linux.go): readable by it, and its own log folder.
ADMISSION_CONFIG_FILE = "/etc/k0s/admission-config.yaml"
AUDIT_POLICY_FILE = "/etc/k0s/audit-policy.yaml"
AUDIT_LOG_FILE = "/var/log/k0s-audit/audit.log"
# k0s's own --enable-admission-plugins, which spec.api.extraArgs replaces, not extends (k0s
# v1.36.3+k0s.2 pkg/component/controller/apiserver.go:120, and lines 140-146: a user's
# extraArgs entry overrides the flag of the same name).
DEFAULT_ADMISSION_PLUGINS = ("NodeRestriction",)
# k0s's service-account issuer (v1.36.3+k0s.2 pkg/component/controller/apiserver.go:115).
K0S_ISSUER = "https://kubernetes.default.svc"


def node_local_load_balancing(endpoint: ControlPlaneEndpoint) -> bool:
    """Whether workers run k0s's node-local load balancer (its Envoy image): with the
    controllers' VIP, never beside an external address (endpoint_config)."""
    return endpoint.vrrp is not None


def endpoint_config(endpoint: ControlPlaneEndpoint, controller: Host) -> tuple[dict, dict]:
    """(spec.api, spec.network) keys for the endpoint at `controller`; none for a single
    controller at its own address.

    A load balancer of the user's: `externalAddress`, which every component and join
    token then names (k0s v1.36.3+k0s.2 docs/configuration.md:132; api.go:117-138). A
    VIP: k0s's control plane load balancing (keepalived VRRP, unicast to the other
    controllers, docs/cplb.md:91-109) for clients, and node-local load balancing (Envoy on
    each worker, docs/nllb.md) for the nodes, as k0s recommends both together without an
    external load balancer (cplb.md:11-13); then no `externalAddress`, which NLLB forbids
    (clusterconfig_types.go:477-492)."""
    if endpoint.load_balancer == "external":
        return {"externalAddress": endpoint.node_address}, {}
    vrrp = endpoint.vrrp
    if vrrp is None:
        return {}, {}
    # Field names and limits: pkg/apis/k0s/v1beta1/cplb.go:85-136 (virtualIPs CIDRs :90,
    # interface :96, virtualRouterID 1-255 :105, authPass at most 8 characters :118,
    # unicastPeers never this controller's own address :123-127 and :193-205),
    # nllb.go:25-32.
    instance: dict = {"virtualIPs": [vrrp.virtual_ip], "authPass": vrrp.auth_pass,
                      "virtualRouterID": vrrp.router_id,
                      "unicastSourceIP": controller.address,
                      "unicastPeers": list(endpoint.peers_of(controller.address))}
    interface = vrrp.interface_of(controller)
    if interface:
        instance["interface"] = interface
    return {}, {
        "controlPlaneLoadBalancing": {"enabled": True, "type": "Keepalived",
                                      "keepalived": {"vrrpInstances": [instance]}},
        "nodeLocalLoadBalancing": {"enabled": True, "type": "EnvoyProxy"},
    }


def api_server_args(issuer: Optional[str] = None) -> dict[str, str]:
    """kube-apiserver flags through the cluster config (k0s docs/configuration.md,
    spec.api.extraArgs): the Pod Security default as k0s docs/podsecurity.md configures it,
    and the audit log, which k0s leaves to the user (docs/cis_benchmark.md, checks
    1.2.22-1.2.25); k0s's admission plugins and the GPU toleration one. With a public
    service-account issuer, it replaces k0s's own flag (extraArgs override k0s's, k0s
    v1.36.3+k0s.2 pkg/component/controller/apiserver.go:140-145), so it comes first."""
    args = {"admission-control-config-file": ADMISSION_CONFIG_FILE,
            "enable-admission-plugins": admission_plugins(DEFAULT_ADMISSION_PLUGINS),
            "audit-policy-file": AUDIT_POLICY_FILE,
            "audit-log-path": AUDIT_LOG_FILE,
            **audit.ROTATION}
    if issuer:
        args.update({"service-account-issuer": issuer, "service-account-jwks-uri": jwks_uri(issuer)})
    return args


def api_server_raw_args(issuer: Optional[str]) -> list[str]:
    """k0s's own issuer, still accepted after the public one: spec.api.rawArgs come after
    every other flag (apiserver.go:218-222), so it is the second --service-account-issuer.
    k0s's api-audiences stays its own (apiserver.go:127-138): tokens already in pods keep
    working."""
    return [f"--service-account-issuer={K0S_ISSUER}"] if issuer else []
