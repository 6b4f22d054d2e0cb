"""The one-context kubeconfig the program hands out (contract/kubeconfig.py): its
credentials, and merging it into an existing kubeconfig without clobbering what is there."""

import base64
import binascii
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from contract.kubeconfig import SECTIONS, Handout, load_yaml
from distribute import DistributeError, InputError, certificates


@dataclass
class MergeResult:
    document: dict
    # "cluster 'prod' added", "user 'prod-alice' updated", ...
    changes: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    current_context: Optional[str] = None

    @property
    def changed(self) -> bool:
        return any(not change.endswith("unchanged") for change in self.changes)


def _b64decode(value: Any) -> Optional[bytes]:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=False)
    except (binascii.Error, ValueError):
        return None


def check_credentials(handout: Handout) -> list[str]:
    """Notes on the client certificate (expiry; not signed by the cluster's CA). Raises
    when the key does not belong to the certificate: such a kubeconfig cannot work."""
    user = handout.entry("users")["user"]
    cert_pem = _b64decode(user.get("client-certificate-data"))
    if cert_pem is None:
        return []
    try:
        certificate = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        raise InputError(f"user '{handout.user_name}': client-certificate-data is not a PEM "
                         "certificate") from None
    key_pem = _b64decode(user.get("client-key-data"))
    if key_pem is not None:
        try:
            key = serialization.load_pem_private_key(key_pem, password=None)
        except (ValueError, TypeError):
            raise InputError(f"user '{handout.user_name}': client-key-data is not an "
                             "unencrypted PEM private key") from None
        if not certificates.key_matches(key, certificate):
            raise InputError(f"user '{handout.user_name}': the client key does not belong to "
                             "the client certificate")
    return certificates.notes(
        certificate, f"client certificate of user '{handout.user_name}'",
        _b64decode(handout.entry("clusters")["cluster"].get("certificate-authority-data")),
        f"the CA of cluster '{handout.cluster_name}'")


def parse_existing(text: str, what: str) -> dict:
    """A user's kubeconfig as found; an empty file is an empty kubeconfig."""
    document = load_yaml(text, what) if text.strip() else None
    if document is None:
        document = {"apiVersion": "v1", "kind": "Config", "preferences": {}}
    if not isinstance(document, dict):
        raise InputError(f"{what} is not a kubeconfig (not a mapping); not touching it")
    for section, body_key in SECTIONS.items():
        entries = document.get(section)
        if entries is None:
            document[section] = []
        elif not isinstance(entries, list) or not all(
                isinstance(e, dict) and isinstance(e.get("name"), str) for e in entries):
            raise InputError(f"{what}: '{section}' is not a list of named entries; "
                                  "not touching it")
    return document


def _named(entries: list, name: str) -> Optional[dict]:
    return next((entry for entry in entries if entry.get("name") == name), None)


def _certificates(body: dict, base_dir: Path) -> Optional[list[bytes]]:
    """The cluster's CA bundle as DER certificates (inline or from its file), to compare."""
    pem = _b64decode(body.get("certificate-authority-data"))
    if pem is None and isinstance(body.get("certificate-authority"), str):
        try:
            pem = (base_dir / Path(body["certificate-authority"]).expanduser()).read_bytes()
        except OSError:
            return None
    if pem is None:
        return None
    try:
        return [c.public_bytes(serialization.Encoding.DER)
                for c in x509.load_pem_x509_certificates(pem)]
    except ValueError:
        return [pem.strip()]


def _difference(existing: dict, new: dict, base_dir: Path) -> Optional[str]:
    """None when both cluster bodies describe the same cluster (server and CA), else how
    they differ."""
    old_server = str(existing.get("server", "")).rstrip("/")
    new_server = str(new.get("server", "")).rstrip("/")
    if old_server != new_server:
        return f"server {old_server or '(none)'}, not {new_server}"
    old_ca = _certificates(existing, base_dir)
    if old_ca is None or old_ca != _certificates(new, base_dir):
        return f"server {old_server} with another CA"
    return None


def _clashes(document: dict, handout: Handout, base_dir: Path) -> list[str]:
    """Entries of the handout's names that describe another cluster."""
    clusters, new_cluster = document["clusters"], handout.entry("clusters")["cluster"]

    def context_clash(context: dict) -> Optional[str]:
        body = context.get("context") or {}
        ref = body.get("cluster")
        target = _named(clusters, ref) if isinstance(ref, str) else None
        if target is None:
            # Dangling: fine only when it names the cluster being added.
            return None if ref == handout.cluster_name else f"cluster '{ref}' (not in the file)"
        difference = _difference(target.get("cluster") or {}, new_cluster, base_dir)
        return f"cluster '{ref}' at {difference}" if difference else None

    found = []
    cluster = _named(clusters, handout.cluster_name)
    if cluster is not None:
        difference = _difference(cluster.get("cluster") or {}, new_cluster, base_dir)
        if difference:
            found.append(f"cluster '{handout.cluster_name}' has {difference}")
    context = _named(document["contexts"], handout.context_name)
    if context is not None and (clash := context_clash(context)):
        found.append(f"context '{handout.context_name}' uses {clash}")
    if _named(document["users"], handout.user_name) is not None:
        # A user entry belongs to the clusters of the contexts that use it.
        for other in document["contexts"]:
            if (other.get("context") or {}).get("user") == handout.user_name \
                    and other.get("name") != handout.context_name \
                    and (clash := context_clash(other)):
                found.append(f"user '{handout.user_name}' is used by context "
                             f"'{other.get('name')}' of {clash}")
    return found


def _upsert(entries: list, name: str, body_key: str, body: dict) -> str:
    for entry in entries:
        if entry.get("name") == name:
            if entry.get(body_key) == body:
                return "unchanged"
            entry[body_key] = body
            return "updated"
    entries.append({"name": name, body_key: body})
    return "added"


def merge(document: dict, handout: Handout, what: str, base_dir: Path, force: bool = False,
          set_current: bool = False) -> MergeResult:
    """Adds or replaces the handout's cluster, user and context in `document` (changed in
    place). Entries of the same name that describe another cluster are refused unless
    `force`; every other entry is kept as it is."""
    clashes = _clashes(document, handout, base_dir)
    if clashes and not force:
        raise DistributeError(
            f"refusing to merge into {what}: {'; '.join(clashes)}; the new context "
            f"'{handout.context_name}' is for {handout.server}. Rerun with --force to replace "
            "these entries, or write to another file with --output")
    result = MergeResult(document, replaced=clashes)
    for section, body_key in SECTIONS.items():
        entry = handout.entry(section)
        action = _upsert(document[section], entry["name"], body_key, entry[body_key])
        result.changes.append(f"{body_key} '{entry['name']}' {action}")
    if set_current or not document.get("current-context"):
        if document.get("current-context") != handout.context_name:
            result.changes.append(f"current-context set to '{handout.context_name}'")
        document["current-context"] = handout.context_name
    result.current_context = document.get("current-context")
    return result
