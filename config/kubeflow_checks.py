"""Kubeflow rules that span sections: the password secret, the default StorageClass, the
component set, the image mirror and how the UI is exposed on the stack's layout."""

import datetime
import ipaddress
import re
from typing import Optional

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from config.kubeflow import COMPONENT_REQUIRES
from config.partial import PartialConfig
from config.problems import Problem

# kubeflow/manifests' example user: its password and the bcrypt hash it ships.
UPSTREAM_EXAMPLE_PASSWORD = "12341234"
UPSTREAM_EXAMPLE_HASH = "$2y$12$4K/VkmDd1q1Orb3xAt82zu8gk7Ad6ReFR4LCP9UeYE90NLiN9Df72"
BCRYPT_HASH = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
MIN_PASSWORD_LENGTH = 12
_REGISTRY_HOST = re.compile(r"([a-z0-9-]+\.)+[a-z0-9-]+(:\d{1,5})?|localhost(:\d{1,5})?")
_SET_PASSWORD = "pulumi config set --secret gpu-cluster:kubeflowPassword"
_SET_TLS_KEY = "pulumi config set --secret gpu-cluster:kubeflowTlsKey < key.pem"


def kubeflow_checks(cfg: PartialConfig) -> list[Problem]:
    if not cfg.given("kubeflow"):
        return [Problem(key, "is set but gpu-cluster:kubeflow is not")
                for key, value in (("kubeflowPassword", cfg.kubeflow_password),
                                   ("kubeflowTlsKey", cfg.kubeflow_tls_key),
                                   ("kubeflowPasswordHashes", cfg.kubeflow_password_hashes),
                                   ("kubeflowConnectorSecrets", cfg.kubeflow_connector_secrets))
                if value]
    problems = _default_storage_class(cfg)
    kubeflow = cfg.kubeflow
    if kubeflow is None:  # the section itself did not parse; its problems are reported
        return problems + (_password(cfg.kubeflow_password) if cfg.kubeflow_password else [])
    problems += _components(kubeflow.components)
    if kubeflow.user is not None:
        problems += _password(cfg.kubeflow_password)
    elif cfg.kubeflow_password:
        problems.append(Problem("kubeflowPassword", "is only used with kubeflow.user (deprecated):"
                                " give each access.users entry its own login instead"))
    problems += login_checks(cfg)
    if cfg.access is not None and kubeflow.user is not None:
        # Kubeflow's profile controller owns the user's profile namespace.
        problems += [Problem(f"access.teams[{index}].name", f"'{team.name}' is the Kubeflow "
                             "user's profile namespace (kubeflow.user.profile); name the team "
                             "or the profile differently")
                     for index, team in enumerate(cfg.access.teams)
                     if team.name == kubeflow.user.profile_name]
    if kubeflow.image_mirror is not None:
        problems += [
            Problem(f"kubeflow.imageMirror.registries.{host}",
                    "must be a registry host like docker.io, ghcr.io or quay.io")
            for host in kubeflow.image_mirror.registries
            if len(host) > 253 or not _REGISTRY_HOST.fullmatch(host)
        ]
    problems += _access(cfg)
    problems += _tls(cfg)
    return problems


def login_checks(cfg: PartialConfig) -> list[Problem]:
    """Every access.users entry with an email logs in: through a connector, or as a Dex
    static user with a bcrypt hash of its own. Secrets are never quoted."""
    kubeflow, hashes = cfg.kubeflow, cfg.kubeflow_password_hashes
    users = cfg.access.users if cfg.access is not None else []
    with_email = {user.name for user in users if user.email}
    problems = []
    if not kubeflow.connectors:
        problems += [Problem(f"kubeflowPasswordHashes.{user.name}",
                             f"is required: access.users[{index}] ({user.name}) logs in to "
                             "Kubeflow with a password of its own; set its bcrypt hash with "
                             f"`pulumi config set --secret --path 'gpu-cluster:kubeflowPasswordHashes"
                             f".{user.name}' \"$(htpasswd -nBC 12 '' | tr -d ':\\n')\"`, or "
                             "configure kubeflow.connectors")
                     for index, user in enumerate(users) if user.email and user.name not in hashes]
    for name, value in hashes.items():
        key = f"kubeflowPasswordHashes.{name}"
        if name not in with_email:
            problems.append(Problem(key, "names no access.users entry with an email"))
        elif kubeflow.connectors:
            problems.append(Problem(key, "is not used: users log in through kubeflow.connectors"))
        elif value == UPSTREAM_EXAMPLE_HASH:
            problems.append(Problem(key, "is kubeflow/manifests' published example hash"))
        elif not BCRYPT_HASH.fullmatch(value):
            problems.append(Problem(key, "is not a bcrypt hash ($2a$/$2b$/$2y$, cost, 53 "
                                    "characters of salt and hash)"))
    ids = {connector.id: connector.type for connector in kubeflow.connectors}
    what = {"oidc": "its OIDC client secret", "ldap": "its LDAP bind password"}
    problems += [Problem(f"kubeflowConnectorSecrets.{connector_id}", f"is required: {what[kind]}")
                 for connector_id, kind in ids.items()
                 if not cfg.kubeflow_connector_secrets.get(connector_id)]
    problems += [Problem(f"kubeflowConnectorSecrets.{name}", "names no kubeflow.connectors entry")
                 for name in cfg.kubeflow_connector_secrets if name not in ids]
    if not (with_email or kubeflow.user is not None):
        problems.append(Problem("kubeflow", "nobody can log in: give access.users entries an "
                                "email (their Kubeflow login)"))
    return problems


def _password(password: str) -> list[Problem]:
    # Messages never quote the value: it is a secret.
    if not password:
        return [Problem("kubeflowPassword",
                        "is required with gpu-cluster:kubeflow: the Dex user's password (or its "
                        f"bcrypt hash); set it with `{_SET_PASSWORD}`")]
    if password in (UPSTREAM_EXAMPLE_PASSWORD, UPSTREAM_EXAMPLE_HASH):
        return [Problem("kubeflowPassword", "is kubeflow/manifests' published example password; "
                        "choose your own")]
    if password.startswith("$2"):
        if not BCRYPT_HASH.fullmatch(password):
            return [Problem("kubeflowPassword", "looks like a bcrypt hash but is not one "
                            "($2a$/$2b$/$2y$, cost, 53 characters of salt and hash)")]
        return []
    if len(password.encode()) > 72:
        return [Problem("kubeflowPassword", "is longer than bcrypt's 72 bytes; use a shorter "
                        "password or set its bcrypt hash")]
    if len(password) < MIN_PASSWORD_LENGTH:
        return [Problem("kubeflowPassword",
                        f"is shorter than {MIN_PASSWORD_LENGTH} characters")]
    return []


def _default_storage_class(cfg: PartialConfig) -> list[Problem]:
    storage = cfg.storage
    if storage is None:
        return []
    if len(storage.default_backends) != 1:
        return [Problem("kubeflow", "needs the stack's default StorageClass (Kubeflow's volumes "
                        "claim it: Katib's and Pipelines' databases, notebook workspaces); "
                        "gpu-cluster:storage has none")]
    return []


def _components(components: list[str]) -> list[Problem]:
    return [
        Problem("kubeflow.components", f"{component} needs {COMPONENT_REQUIRES[component]} "
                "(add it to the list)")
        for component in components
        if component in COMPONENT_REQUIRES and COMPONENT_REQUIRES[component] not in components
    ]


def _access(cfg: PartialConfig) -> list[Problem]:
    access = cfg.kubeflow.access
    layout = cfg.layout
    problems = []
    if access.mode == "loadBalancer":
        if layout not in ("hybrid", "cloud"):
            problems.append(Problem("kubeflow.access.mode",
                                    f"loadBalancer needs an AWS layout (hybrid or cloud), not "
                                    f"{layout}; use nodePort or portForward"))
        if access.hostname is None:
            problems.append(Problem("kubeflow.access.hostname",
                                    "is required with loadBalancer: the DNS name users open, "
                                    "pointing at the load balancer"))
    elif access.mode == "nodePort" and layout == "cloud" and access.hostname is None:
        problems.append(Problem("kubeflow.access.hostname",
                                "is required with nodePort on cloud: pool nodes have no fixed "
                                "addresses; a DNS name resolving to them"))
    if access.mode != "loadBalancer" and access.source_ranges:
        problems.append(Problem("kubeflow.access.sourceRanges", "is only used with loadBalancer"))
    if access.mode == "portForward":
        if layout == "cloud":
            problems.append(Problem("kubeflow.access.mode",
                                    "portForward runs on the controller over SSH; the cloud "
                                    "layout's controller is not reached over SSH: use nodePort "
                                    "or loadBalancer"))
        elif layout == "hybrid" and access.listen_address != "127.0.0.1":
            problems.append(Problem("kubeflow.access.listenAddress",
                                    "must be 127.0.0.1 on hybrid: the control-plane instance's "
                                    "security group does not open the port; reach it through "
                                    "`ssh -L`"))
    return problems


def _tls(cfg: PartialConfig) -> list[Problem]:
    """A configured certificate must be usable at the URL users open: its key, its names,
    its dates. Messages never quote the key."""
    tls = cfg.kubeflow.access.tls
    if tls.mode != "certificate":
        problems = []
        if tls.certificate:
            problems.append(Problem("kubeflow.access.tls.certificate",
                                    "is only used with tls.mode certificate"))
        if cfg.kubeflow_tls_key:
            problems.append(Problem("kubeflowTlsKey",
                                    "is only used with kubeflow.access.tls.mode certificate"))
        return problems
    problems = []
    if not tls.certificate:
        problems.append(Problem("kubeflow.access.tls.certificate",
                                "is required with tls.mode certificate: the gateway's PEM "
                                "certificate, then its intermediates"))
    key = None
    if not cfg.kubeflow_tls_key:
        problems.append(Problem("kubeflowTlsKey", "is required with kubeflow.access.tls.mode "
                                f"certificate: the certificate's private key; `{_SET_TLS_KEY}`"))
    else:
        try:
            key = serialization.load_pem_private_key(cfg.kubeflow_tls_key.encode(), password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            problems.append(Problem("kubeflowTlsKey", "is not an unencrypted PEM private key"))
    if not tls.certificate:
        return problems
    certificate = x509.load_pem_x509_certificates(tls.certificate.encode())[0]
    if key is not None and _public_bytes(key.public_key()) != _public_bytes(
            certificate.public_key()):
        problems.append(Problem("kubeflowTlsKey", "is not the private key of "
                                "kubeflow.access.tls.certificate (its first certificate)"))
    if certificate.not_valid_after_utc <= datetime.datetime.now(datetime.timezone.utc):
        problems.append(Problem("kubeflow.access.tls.certificate",
                                f"expired on {certificate.not_valid_after_utc:%Y-%m-%d}"))
    host = _url_host(cfg)
    if host and not _covers(certificate, host):
        problems.append(Problem("kubeflow.access.tls.certificate",
                                f"is not valid for {host}, the host users open (kubeflowUrl); "
                                f"it names {', '.join(_names(certificate)) or 'no host'}: set "
                                "kubeflow.access.hostname to one of them"))
    return problems


def _url_host(cfg: PartialConfig) -> Optional[str]:
    hosts = [host for _, host in cfg.hosts]
    controller = next((h.address for h in hosts if h.runs_control_plane), None)
    return cfg.kubeflow.access.url_host([h.address for h in hosts if h.runs_workloads],
                                        controller)


def _public_bytes(public_key) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)


def _alternative_names(certificate: x509.Certificate) -> x509.SubjectAlternativeName:
    try:
        return certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return x509.SubjectAlternativeName([])


def _names(certificate: x509.Certificate) -> list[str]:
    names = _alternative_names(certificate)
    return (names.get_values_for_type(x509.DNSName)
            + [str(ip) for ip in names.get_values_for_type(x509.IPAddress)])


def _covers(certificate: x509.Certificate, host: str) -> bool:
    """Whether a browser accepts the certificate for `host`: by its subject alternative
    names only (RFC 6125 6.4: no common name once SANs exist; browsers ignore it), a
    wildcard standing for one leftmost label."""
    names = _alternative_names(certificate)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None:
        return address in names.get_values_for_type(x509.IPAddress)
    host = host.lower().rstrip(".")
    for name in names.get_values_for_type(x509.DNSName):
        name = name.lower().rstrip(".")
        if name == host:
            return True
        if name.startswith("*.") and "." in host and host.split(".", 1)[1] == name[2:]:
            return True
    return False
