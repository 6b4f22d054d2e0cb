"""The cluster's API through the admin kubeconfig: its CA and client certificate written
to a private folder the caller owns for the duration. `python -m doctor` sends GET requests
only; `python -m validate` also creates and deletes its own objects."""

import base64
import binascii
import os
from typing import Optional
from urllib.parse import quote

import requests

from contract import ContractError
from contract.kubeconfig import Handout

TIMEOUT = (10, 60)  # connect, read (seconds)
PAGE = 500


def _decode(value: Optional[str], what: str) -> Optional[bytes]:
    if value is None:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ContractError(f"the admin kubeconfig's {what} is not base64") from None


class Client:
    """The API named by a kubeconfig: `get` and `list` (all the doctor sends), `request` for
    the objects the validation creates and deletes."""

    def __init__(self, kubeconfig: Handout, folder: str):
        cluster = kubeconfig.entry("clusters")["cluster"]
        user = kubeconfig.entry("users")["user"]
        self.server = str(cluster.get("server", "")).rstrip("/")
        if not self.server.startswith("https://"):
            raise ContractError(f"the admin kubeconfig's server '{self.server}' is not "
                                "https://")
        self.ca_pem = _decode(cluster.get("certificate-authority-data"),
                              "certificate-authority-data")
        self.cert_pem = _decode(user.get("client-certificate-data"), "client-certificate-data")
        key_pem = _decode(user.get("client-key-data"), "client-key-data")
        if self.cert_pem is None or key_pem is None:
            raise ContractError("the admin kubeconfig has no client-certificate-data and "
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
