"""Reaches the cluster's API with the admin kubeconfig, its CA and client certificate written
to a private temporary folder for the duration. The doctor sends GET requests only;
`Client.request` also serves `python -m validate`, which creates and deletes its own objects."""

import base64
import binascii
import datetime
import os
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Optional
from urllib.parse import quote

import requests
from cryptography import x509

from distribute.kubeconfigs import Handout
from doctor import DoctorError

TIMEOUT = (10, 60)  # connect, read (seconds)
PAGE = 500
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
}


@dataclass
class Snapshot:
    """What the API returned, by list name; a list that could not be read is in `errors`."""
    server: str
    now: datetime.datetime
    lists: dict[str, list[dict]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    # (namespace, pod, container, previous) -> the log's last lines, or an error in `log_errors`.
    logs: dict[tuple, str] = field(default_factory=dict)
    log_errors: dict[tuple, str] = field(default_factory=dict)
    client_certificate: Optional[x509.Certificate] = None
    ca_certificate: Optional[x509.Certificate] = None

    def items(self, name: str) -> Optional[list[dict]]:
        return self.lists.get(name)


def _decode(value: Optional[str], what: str) -> Optional[bytes]:
    if value is None:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise DoctorError(f"the admin kubeconfig's {what} is not base64") from None


def _certificate(pem: Optional[bytes]) -> Optional[x509.Certificate]:
    if pem is None:
        return None
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None


class Client:
    """GET-only access to the API named by a kubeconfig."""

    def __init__(self, kubeconfig: Handout, folder: str):
        cluster = kubeconfig.entry("clusters")["cluster"]
        user = kubeconfig.entry("users")["user"]
        self.server = str(cluster.get("server", "")).rstrip("/")
        if not self.server.startswith("https://"):
            raise DoctorError(f"the admin kubeconfig's server '{self.server}' is not https://")
        self.ca_pem = _decode(cluster.get("certificate-authority-data"),
                              "certificate-authority-data")
        self.cert_pem = _decode(user.get("client-certificate-data"), "client-certificate-data")
        key_pem = _decode(user.get("client-key-data"), "client-key-data")
        if self.cert_pem is None or key_pem is None:
            raise DoctorError("the admin kubeconfig has no client-certificate-data and "
                              "client-key-data (the program's admin kubeconfig has both)")
        self.session = requests.Session()
        self.session.trust_env = False  # no proxy from the environment for the cluster's API
        self.session.headers["Accept"] = "application/json"
        self.session.cert = (_write(folder, "client.crt", self.cert_pem),
                             _write(folder, "client.key", key_pem))
        self.session.verify = (_write(folder, "ca.crt", self.ca_pem) if self.ca_pem
                               else True)

    def get(self, path: str, as_json: bool = True):
        return self.request("GET", path, as_json=as_json)

    def request(self, method: str, path: str, body: Optional[dict] = None,
                as_json: bool = True, accept: tuple[int, ...] = (200,)):
        """One call; an answer outside `accept` raises ApiError (with `status`)."""
        try:
            response = self.session.request(method, self.server + path, json=body,
                                            timeout=TIMEOUT)
        except requests.exceptions.SSLError as error:
            raise ApiError(f"TLS with {self.server} failed ({_short(error)})", reachable=False)
        except requests.exceptions.RequestException as error:
            raise ApiError(f"cannot reach {self.server} ({_short(error)})", reachable=False)
        if response.status_code not in accept:
            raise ApiError(f"{method} {path.split('?')[0]} answered HTTP {response.status_code}"
                           f"{_status_message(response)}", reachable=True,
                           status=response.status_code)
        if not as_json:
            return response.text
        try:
            return response.json()
        except ValueError:
            raise ApiError(f"{method} {path.split('?')[0]} did not answer JSON", reachable=True)

    def list(self, path: str) -> list[dict]:
        """Every item of a list, page by page (`limit` and `continue`)."""
        items: list[dict] = []
        token = ""
        while True:
            separator = "&" if "?" in path else "?"
            page = f"{path}{separator}limit={PAGE}"
            if token:
                page += f"&continue={quote(token, safe='')}"
            body = self.get(page)
            items.extend(body.get("items") or [])
            token = (body.get("metadata") or {}).get("continue") or ""
            if not token:
                return items


class ApiError(Exception):
    def __init__(self, message: str, reachable: bool, status: Optional[int] = None):
        super().__init__(message)
        self.reachable = reachable
        self.status = status


def _write(folder: str, name: str, data: bytes) -> str:
    path = os.path.join(folder, name)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    return path


def _short(error: Exception) -> str:
    text = str(error)
    return text if len(text) <= 200 else text[:200] + "..."


def _status_message(response: requests.Response) -> str:
    try:
        message = response.json().get("message")
    except (ValueError, AttributeError):
        return ""
    return f": {message[:200]}" if isinstance(message, str) and message else ""


# (namespace, pod, container, previous) of the logs a check reads, from the pods listed.
LogWanted = Callable[[list[dict]], list[tuple]]


def collect(kubeconfig: Handout, wanted_logs: LogWanted,
            now: Optional[datetime.datetime] = None) -> Snapshot:
    """Reads every list in LISTS and the logs `wanted_logs` names. Raises DoctorError when the
    API cannot be reached at all; a list it refuses is left in `errors`."""
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
