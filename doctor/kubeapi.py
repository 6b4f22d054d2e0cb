"""What the doctor reads from the cluster's API (GET only), through the contract's client
(contract/kubeapi.py) in a private temporary folder."""

import datetime
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Optional
from urllib.parse import quote

from cryptography import x509

from contract.kubeapi import ApiError, Client
from contract.kubeconfig import Handout
from doctor import DoctorError

LOG_TAIL_LINES = 300

# name -> API path of a list; the checks ask for them by name.
LISTS = {
    "nodes": "/api/v1/nodes",
    "pods": "/api/v1/pods",
    "namespaces": "/api/v1/namespaces",
    "persistentvolumeclaims": "/api/v1/persistentvolumeclaims",
    "storageclasses": "/apis/storage.k8s.io/v1/storageclasses",
    # Only what PVC checks read, not every event of the cluster.
    "events": "/api/v1/events?fieldSelector=involvedObject.kind%3DPersistentVolumeClaim",
    # Bootstrap tokens live in kube-system as Secrets of this type
    # (https://kubernetes.io/docs/reference/access-authn-authz/bootstrap-tokens/).
    "bootstrap-tokens": ("/api/v1/namespaces/kube-system/secrets"
                         "?fieldSelector=type%3Dbootstrap.kubernetes.io%2Ftoken"),
    # k0s's etcd members, cluster-scoped (k0sproject/k0s v1.36.3+k0s.2
    # pkg/apis/etcd/v1beta1/types.go:14-24); RKE2 serves no such type: `absent`.
    "etcdmembers": "/apis/etcd.k0sproject.io/v1beta1/etcdmembers",
    # k0s renews a lease `k0s-ctrl-<node>` here while a controller runs
    # (pkg/component/controller/controllersleasecounter.go:53-61); the kubelets' leases too.
    "node-leases": "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
    # Each kube-apiserver's identity lease, renewed every 10 s, labelled with its hostname
    # (kubernetes/kubernetes pkg/controlplane/apiserver/server.go: IdentityLeaseComponentLabelKey,
    # IdentityLeaseRenewIntervalPeriod; labelAPIServerHeartbeatFunc sets kubernetes.io/hostname).
    "apiserver-leases": ("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
                         "?labelSelector=apiserver.kubernetes.io%2Fidentity%3Dkube-apiserver"),
}
# Lists of a type the cluster may not serve (HTTP 404): recorded in `absent`, not an error.
OPTIONAL = ("etcdmembers",)


@dataclass
class Snapshot:
    """What the API returned, by list name; a list that could not be read is in `errors`."""
    server: str
    now: datetime.datetime
    lists: dict[str, list[dict]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    # OPTIONAL lists whose type the API does not serve (another distribution's resource).
    absent: set[str] = field(default_factory=set)
    # (namespace, pod, container, previous) -> the log's last lines, or an error in `log_errors`.
    logs: dict[tuple, str] = field(default_factory=dict)
    log_errors: dict[tuple, str] = field(default_factory=dict)
    client_certificate: Optional[x509.Certificate] = None
    ca_certificate: Optional[x509.Certificate] = None

    def items(self, name: str) -> Optional[list[dict]]:
        return self.lists.get(name)


def _certificate(pem: Optional[bytes]) -> Optional[x509.Certificate]:
    if pem is None:
        return None
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None


# (namespace, pod, container, previous) of the logs a check reads, from the pods listed.
LogWanted = Callable[[list[dict]], list[tuple]]


def collect(kubeconfig: Handout, wanted_logs: LogWanted,
            now: Optional[datetime.datetime] = None) -> Snapshot:
    """Reads every list in LISTS and the logs `wanted_logs` names. Raises DoctorError when the
    API cannot be reached at all (ContractError when the kubeconfig cannot serve); a list it
    refuses is left in `errors`."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    with tempfile.TemporaryDirectory(prefix="doctor-") as folder:  # mode 0700
        client = Client(kubeconfig, folder)
        snapshot = Snapshot(client.server, now,
                            client_certificate=_certificate(client.cert_pem),
                            ca_certificate=_certificate(client.ca_pem))
        for name, path in LISTS.items():
            try:
                snapshot.lists[name] = client.list(path)
            except ApiError as error:
                if not error.reachable:
                    raise DoctorError(f"the cluster's API: {error}") from None
                if name in OPTIONAL and error.status == 404:
                    snapshot.absent.add(name)
                    continue
                snapshot.errors[name] = str(error)
        for key in wanted_logs(snapshot.lists.get("pods") or []):
            namespace, pod, container, previous = key
            path = (f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(pod)}/log"
                    f"?container={quote(container)}&tailLines={LOG_TAIL_LINES}"
                    + ("&previous=true" if previous else ""))
            try:
                snapshot.logs[key] = client.get(path, as_json=False)
            except ApiError as error:
                snapshot.log_errors[key] = str(error)
        client.session.close()
    return snapshot
