"""A Kubernetes API on loopback for the doctor's own collector: HTTPS with a certificate of
the cluster CA, a client certificate required, the recorded objects served at the API's
paths, in pages (`limit`/`continue`), device plugin logs at the pods' log path. Every request
is recorded; anything but GET is refused."""

import datetime
import json
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tests.pki import Authority, pem

PAGE = 2  # servers may return fewer items than `limit` asks; small pages exercise `continue`
# path -> (list name, the fieldSelector the doctor must send, or None[, its labelSelector])
LIST_PATHS = {
    "/api/v1/nodes": ("nodes", None),
    "/api/v1/pods": ("pods", None),
    "/api/v1/namespaces": ("namespaces", None),
    "/api/v1/persistentvolumeclaims": ("persistentvolumeclaims", None),
    "/apis/storage.k8s.io/v1/storageclasses": ("storageclasses", None),
    "/api/v1/events": ("events", "involvedObject.kind=PersistentVolumeClaim"),
    "/api/v1/namespaces/kube-system/secrets": ("bootstrap-tokens",
                                               "type=bootstrap.kubernetes.io/token"),
    "/apis/etcd.k0sproject.io/v1beta1/etcdmembers": ("etcdmembers", None),
    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases": ("node-leases", None),
    "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases": (
        "apiserver-leases", None, "apiserver.kubernetes.io/identity=kube-apiserver"),
}


class ApiHandler(BaseHTTPRequestHandler):
    """Answers as the API server does: JSON bodies, failures as a v1 Status."""

    def log_message(self, *_):
        pass

    def _send(self, code: int, body, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, reason: str, message: str):
        self._send(code, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Failure", "message": message, "reason": reason,
                          "code": code})


class LoopbackHttps:
    """An HTTPS server on loopback as an API server is: a certificate of the cluster CA
    for 127.0.0.1, a client certificate of that CA required. Serves `handler` while in
    a `with` block."""

    def __init__(self, authority: Authority, handler: type[BaseHTTPRequestHandler]):
        now = datetime.datetime.now(datetime.timezone.utc)
        cert, key = authority.issue("kube-apiserver", now - datetime.timedelta(hours=1),
                                    now + datetime.timedelta(days=30), server_ip="127.0.0.1")
        self._folder = tempfile.TemporaryDirectory(prefix="apiserver-")
        folder = Path(self._folder.name)
        (folder / "server.crt").write_text(pem(cert))
        (folder / "server.key").write_text(key)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(folder / "server.crt", folder / "server.key")
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cadata=pem(authority.cert))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._folder.cleanup()


class ApiServer(LoopbackHttps):
    def __init__(self, authority: Authority, lists: dict[str, dict], logs: dict[tuple, str]):
        self.lists, self.logs = lists, logs
        # List names whose type this API does not serve: 404, as for a CRD not installed.
        self.absent: set[str] = set()
        self.requests: list[tuple[str, str]] = []
        super().__init__(authority, self._handler())

    def _handler(self):
        server = self

        class Handler(ApiHandler):

            def do_GET(self):
                server.requests.append(("GET", self.path))
                url = urlsplit(self.path)
                query = {key: values[0] for key, values in parse_qs(url.query).items()}
                if url.path in LIST_PATHS:
                    return self._list(url.path, query)
                parts = url.path.strip("/").split("/")
                if len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] \
                        and parts[4] == "pods" and parts[6] == "log":
                    key = (parts[3], parts[5], query.get("container"),
                           query.get("previous") == "true")
                    if key in server.logs and query.get("tailLines"):
                        return self._send(200, server.logs[key], "text/plain")
                    return self._status(400, "BadRequest", f"previous terminated container "
                                        f"\"{key[2]}\" in pod \"{key[1]}\" not found")
                self._status(404, "NotFound", "the server could not find the requested resource")

            def _list(self, path: str, query: dict):
                name, selector, *labels = LIST_PATHS[path]
                if selector is not None and query.get("fieldSelector") != selector:
                    return self._status(400, "BadRequest", f"expected fieldSelector {selector}")
                if labels and query.get("labelSelector") != labels[0]:
                    return self._status(400, "BadRequest", f"expected labelSelector {labels[0]}")
                if name in server.absent:
                    return self._status(404, "NotFound",
                                        "the server could not find the requested resource")
                if name not in server.lists:
                    return self._status(403, "Forbidden", f"{name} is forbidden: User \"admin\" "
                                        "cannot list resource")
                document = server.lists[name]
                start = int(query.get("continue", "0"))
                items = document["items"][start:start + min(PAGE, int(query.get("limit", PAGE)))]
                metadata = {"resourceVersion": document["metadata"]["resourceVersion"]}
                if start + len(items) < len(document["items"]):
                    metadata["continue"] = str(start + len(items))
                self._send(200, {**document, "metadata": metadata, "items": items})

            def _refuse(self):
                server.requests.append((self.command, self.path))
                self._status(405, "MethodNotAllowed", "the doctor only reads")

            do_POST = do_PUT = do_PATCH = do_DELETE = _refuse

        return Handler
