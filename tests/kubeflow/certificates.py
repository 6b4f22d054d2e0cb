"""Test certificates for the gateway (a user's own, as `tls.mode: certificate` takes them),
and a loopback HTTPS server that serves one, for real TLS clients to check."""

import datetime
import http.server
import ipaddress
import ssl
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def make_certificate(*names: str, days: int = 90, expired: bool = False) -> tuple[str, str]:
    """(certificate PEM, key PEM): a self-signed server certificate for `names`."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    start = now - datetime.timedelta(days=days + 1) if expired else now - datetime.timedelta(hours=1)
    sans = []
    for name in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0] if names else "x")])
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=days)))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    certificate = builder.sign(key, hashes.SHA256())
    return (certificate.public_bytes(serialization.Encoding.PEM).decode(),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode())


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        body = b"kubeflow\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def https_server(certificate_pem: str, key_pem: str, folder: Path):
    """A loopback HTTPS server presenting the certificate (as the gateway would); yields
    its port."""
    (folder / "tls.crt").write_text(certificate_pem)
    (folder / "tls.key").write_text(key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def curl(url: str, port: int, trusted: Path, curl_path: str) -> subprocess.CompletedProcess:
    """`curl` opening `url` as a user would, trusting only `trusted`, its connection sent
    to the loopback server on `port` (name checks still use the URL's host)."""
    parts = urlsplit(url)
    return subprocess.run(
        [curl_path, "--silent", "--show-error", "--max-time", "10", "--cacert", str(trusted),
         "--connect-to", f"{parts.hostname}:{parts.port or 443}:127.0.0.1:{port}", url],
        capture_output=True, text=True)
