"""A real registry on loopback for the pins tests: Distribution's (the Debian
docker-registry package) with TLS and token auth, and a token server that grants anonymous
pulls and pushes the way Docker Hub's, nvcr.io's and ghcr.io's realms grant pulls.

Tokens are JWTs signed with RS256 and carry their certificate in `x5c`, which the registry
checks against its `rootcertbundle` (distribution/distribution v2.8.2
registry/auth/token/token.go, verifySigningKey; the claims of docs/spec/auth/jwt.md)."""

import base64
import datetime
import gzip
import hashlib
import http.server
import io
import json
import socket
import ssl
import subprocess
import tarfile
import threading
import time
import urllib.parse
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

SERVICE, ISSUER = "pins-test-registry", "pins-test-issuer"
INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _certificate(name: str, key, issuer_key=None, issuer_name=None, ip: bool = False):
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    builder = (x509.CertificateBuilder().subject_name(subject)
               .issuer_name(issuer_name or subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1)))
    if ip:
        import ipaddress
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    else:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None),
                                        critical=True)
    return builder.sign(issuer_key or key, hashes.SHA256())


def _key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem(path: Path, certificate=None, key=None) -> Path:
    if certificate is not None:
        path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    else:
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.TraditionalOpenSSL,
                                           serialization.NoEncryption()))
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Registry:
    """Start with `start()`, stop with `stop()`; `ca` is the CA file both servers' TLS uses."""

    def __init__(self, root: Path):
        self.root = root
        self.port, self.token_port = _free_port(), _free_port()
        self.host = f"127.0.0.1:{self.port}"

    def start(self) -> "Registry":
        ca_key, server_key, signer_key = _key(), _key(), _key()
        ca = _certificate("pins test CA", ca_key)
        server = _certificate("127.0.0.1", server_key, ca_key, ca.subject, ip=True)
        self.signer = _certificate("pins test token signer", signer_key)
        self.signer_key = signer_key
        certs = self.root / "certs"
        certs.mkdir()
        self.ca = _pem(certs / "ca.crt", ca)
        server_crt, server_pem = _pem(self.root / "server.crt", server), \
            _pem(self.root / "server.key", key=server_key)
        bundle = _pem(self.root / "signer.crt", self.signer)
        config = self.root / "config.yml"
        config.write_text(json.dumps({
            "version": 0.1, "log": {"level": "warn"},
            "storage": {"filesystem": {"rootdirectory": str(self.root / "data")}},
            "http": {"addr": self.host, "tls": {"certificate": str(server_crt),
                                                "key": str(server_pem)}},
            "auth": {"token": {"realm": f"https://127.0.0.1:{self.token_port}/token",
                               "service": SERVICE, "issuer": ISSUER,
                               "rootcertbundle": str(bundle)}}}))
        self._token_server(server_crt, server_pem)
        self.process = subprocess.Popen(["docker-registry", "serve", str(config)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(self.process.stderr.read().decode())
                time.sleep(0.1)
        raise RuntimeError("the registry did not listen")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self.httpd.shutdown()

    def token(self, scope: str) -> str:
        header = {"alg": "RS256", "typ": "JWT", "x5c": [base64.b64encode(
            self.signer.public_bytes(serialization.Encoding.DER)).decode()]}
        access = []
        if scope:
            kind, name, actions = scope.split(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        claims = {"iss": ISSUER, "sub": "", "aud": SERVICE, "iat": now, "nbf": now - 60,
                  "exp": now + 300, "jti": _b64(hashlib.sha256(str(time.time()).encode())
                                                .digest()), "access": access}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = self.signer_key.sign(signing_input.encode(), padding.PKCS1v15(),
                                         hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def _token_server(self, certificate: Path, key: Path) -> None:
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                body = json.dumps({"token": registry.token(query.get("scope", [""])[0])})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.token_port), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificate, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def push(self, layout: Path, tag: str, repository: str) -> None:
        """Copy an OCI layout's tagged index (all its platforms) with the real skopeo."""
        subprocess.run(["skopeo", "copy", "--quiet", "--all", "--dest-cert-dir",
                        str(self.ca.parent), f"oci:{layout}:{tag}",
                        f"docker://{self.host}/{repository}:{tag}"],
                       check=True, capture_output=True, timeout=60)

    def raw(self, reference: str) -> bytes:
        """The manifest or index skopeo pulls for `reference` (by tag or by digest)."""
        return subprocess.run(["skopeo", "inspect", "--raw", "--cert-dir", str(self.ca.parent),
                               f"docker://{self.host}/{reference}"],
                              check=True, capture_output=True, timeout=60).stdout


def oci_layout(directory: Path, tag: str, content: bytes) -> bytes:
    """An OCI image layout with one two-platform index tagged `tag`, whose one file holds
    `content`; returns the index's bytes (what the tag names once pushed)."""
    blobs = directory / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def blob(data: bytes, media_type: str) -> dict:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    manifests = []
    for arch in ("amd64", "arm64"):
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            info = tarfile.TarInfo("content")
            info.size = len(content + arch.encode())
            tar.addfile(info, io.BytesIO(content + arch.encode()))
        layer = gzip.compress(archive.getvalue(), mtime=0)
        diff_id = "sha256:" + hashlib.sha256(archive.getvalue()).hexdigest()
        config = json.dumps({"architecture": arch, "os": "linux",
                             "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": MANIFEST,
            "config": blob(config, "application/vnd.oci.image.config.v1+json"),
            "layers": [blob(layer, "application/vnd.oci.image.layer.v1.tar+gzip")]}).encode()
        manifests.append({**blob(manifest, MANIFEST),
                          "platform": {"architecture": arch, "os": "linux"}})
    index = json.dumps({"schemaVersion": 2, "mediaType": INDEX,
                        "manifests": manifests}).encode()
    entry = {**blob(index, INDEX), "annotations": {"org.opencontainers.image.ref.name": tag}}
    (directory / "index.json").write_text(json.dumps({"schemaVersion": 2,
                                                      "manifests": [entry]}))
    (directory / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    return index
