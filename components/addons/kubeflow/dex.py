"""Dex's config for Kubeflow's login: a static user per access.users entry with an email
(its bcrypt hash from secret config), the deprecated single kubeflow.user, and the
organisation's identity providers (kubeflow.connectors). No secret is in the config: Dex
reads each from its environment, the program's dex-passwords Secret."""

import base64
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from config.kubeflow import KubeflowSettings


@dataclass(frozen=True)
class StaticLogin:
    """An access.users entry that logs in to Dex with its own password."""

    name: str
    email: str

    @property
    def env(self) -> str:
        # Dex reads the hash from this variable of the dex-passwords Secret (envFrom);
        # user names are DNS labels, so '-' to '_' keeps them apart.
        return hash_env(self.name)


def hash_env(name: str) -> str:
    return "DEX_PASSWORD_HASH_" + name.upper().replace("-", "_")


def connector_env(connector_id: str) -> str:
    return "DEX_CONNECTOR_SECRET_" + connector_id.upper().replace("-", "_")


def dex_config(kubeflow: KubeflowSettings, logins: Sequence[StaticLogin] = (),
               public_url: str = "") -> str:
    """Upstream's Dex config (oauth2-proxy overlay) with a static user per login (and the
    deprecated kubeflow.user) in place of the example user, and the configured connectors;
    every hash and connector secret comes from the program's dex-passwords Secret."""
    passwords = [{"email": login.email, "hashFromEnv": login.env, "username": login.name,
                  # Stable per email, so sessions and profiles survive re-runs.
                  "userID": str(uuid.uuid5(uuid.NAMESPACE_URL, f"mailto:{login.email}"))}
                 for login in logins]
    if kubeflow.user is not None:
        user = kubeflow.user
        passwords.insert(0, {
            "email": user.email, "hashFromEnv": "DEX_USER_PASSWORD", "username": user.username,
            "userID": str(uuid.uuid5(uuid.NAMESPACE_URL, f"mailto:{user.email}"))})
    config = {
        "issuer": "http://dex.auth.svc.cluster.local:5556/dex",
        "storage": {"type": "kubernetes", "config": {"inCluster": True}},
        "web": {"http": "0.0.0.0:5556"},
        "logger": {"level": "info", "format": "text"},
        "oauth2": {"skipApprovalScreen": True},
        "enablePasswordDB": bool(passwords),
        "staticPasswords": passwords,
        "staticClients": [{"idEnv": "OIDC_CLIENT_ID", "redirectURIs": ["/oauth2/callback"],
                           "name": "Dex Login Application", "secretEnv": "OIDC_CLIENT_SECRET"}],
    }
    if kubeflow.connectors:
        config["connectors"] = [dex_connector(c, public_url) for c in kubeflow.connectors]
    return yaml.safe_dump(config, sort_keys=False)


def dex_connector(connector, public_url: str) -> dict:
    """A Dex connector (dexidp/dex v2.45.0 connector/oidc/oidc.go, connector/ldap/ldap.go
    Config): its secret as `$VAR`, which Dex expands from its environment
    (cmd/dex/config.go:476, on by default); users come back through the gateway, which
    routes /dex/ to Dex (kubeflow/manifests common/dex/base/virtual-service.yaml)."""
    secret = f"${connector_env(connector.id)}"
    if connector.type == "oidc":
        config = {"issuer": connector.issuer, "clientID": connector.client_id,
                  "clientSecret": secret, "redirectURI": f"{public_url}dex/callback",
                  "scopes": list(connector.scopes)}
    else:
        search = connector.user_search
        config = {"host": connector.host, "startTLS": connector.start_tls,
                  "insecureNoSSL": False, "insecureSkipVerify": False,
                  "bindDN": connector.bind_dn, "bindPW": secret, "usernamePrompt": "Email",
                  "userSearch": {"baseDN": search.base_dn, "username": search.username,
                                 "idAttr": search.id_attr, "emailAttr": search.email_attr,
                                 "nameAttr": search.name_attr,
                                 **({"filter": search.filter} if search.filter else {})}}
        if connector.root_ca:
            config["rootCAData"] = base64.b64encode(connector.root_ca.encode()).decode()
    return {"type": connector.type, "id": connector.id, "name": connector.name,
            "config": config}
