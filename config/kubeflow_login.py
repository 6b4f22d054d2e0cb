"""`gpu-cluster:kubeflow.connectors`: the organisation's identity providers Dex sends users
to (dexidp/dex v2.45.0 connector/oidc/oidc.go Config, connector/ldap/ldap.go Config). Each
connector's secret (the OIDC client secret, the LDAP bind password) is the secret config
`gpu-cluster:kubeflowConnectorSecrets.<id>`. Dex expands `$VAR` in every string of a
connector's config (cmd/dex/config.go:476, feature flag expand_env, on by default), so no
value here may hold a `$`; the program's own `$DEX_CONNECTOR_SECRET_<ID>` is the only one."""

import re
from typing import Annotated, Literal, Optional, Union

from pydantic import AfterValidator, Discriminator, Tag

from config.model_base import Section
from config.types import DnsLabel, PemCertificateChain, matching

_HTTPS_URL = re.compile(r"https://[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:\d{1,5})?(/[A-Za-z0-9._~%/-]*)?")
_CLIENT_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,255}")
_DISPLAY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._()-]{0,63}")
_SCOPE = re.compile(r"[A-Za-z0-9._:/-]{1,128}")
_LDAP_HOST = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?:\d{1,5}")
# RFC 4514 distinguished names and RFC 4515 filters, without `$` (Dex's expansion) or
# control characters.
_DN = re.compile(r"[A-Za-z0-9][A-Za-z0-9 =,.+\\#;<>\"_@'-]{0,511}")
_FILTER = re.compile(r"\([A-Za-z0-9 =&|!()*.,:<>~_@'-]{1,510}\)")
_ATTRIBUTE = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,63}|DN")


HttpsUrl = Annotated[str, AfterValidator(matching(_HTTPS_URL, "an https:// URL like "
                                                    "https://login.example.com/realms/lab"))]
ClientId = Annotated[str, AfterValidator(matching(_CLIENT_ID, "an OAuth2 client id"))]
DisplayName = Annotated[str, AfterValidator(matching(
    _DISPLAY_NAME, "a name of letters, digits, spaces and ._()- (64 at most)"))]
Scope = Annotated[str, AfterValidator(matching(_SCOPE, "an OAuth2 scope like email"))]
LdapHost = Annotated[str, AfterValidator(matching(_LDAP_HOST, "host:port like "
                                                   "ldap.example.com:636"))]
DistinguishedName = Annotated[str, AfterValidator(matching(
    _DN, "a distinguished name like ou=people,dc=example,dc=com"))]
LdapFilter = Annotated[str, AfterValidator(matching(
    _FILTER, "an LDAP filter like (objectClass=person)"))]
LdapAttribute = Annotated[str, AfterValidator(matching(_ATTRIBUTE, "an LDAP attribute name"))]


class OidcConnector(Section):
    type: Literal["oidc"]
    """The connector's kind."""
    # Dex's connector id (never `local`, its password database's).
    id: DnsLabel
    """Dex's connector id (never `local`); its secret is `kubeflowConnectorSecrets.<id>`."""
    name: DisplayName
    """The name on Dex's login page."""
    issuer: HttpsUrl
    """The OIDC issuer URL."""
    client_id: ClientId
    """The OAuth2 client id registered with the issuer."""
    # The email claim is Kubeflow's user id; Dex refuses unverified emails unless told.
    scopes: list[Scope] = ["openid", "profile", "email"]
    """The scopes requested; the email claim is Kubeflow's user id."""


class LdapUserSearch(Section):
    base_dn: DistinguishedName
    """The DN searched under."""
    filter: Optional[LdapFilter] = None
    """An LDAP filter the users must match, e.g. `(objectClass=person)`."""
    # The attribute users type as their user name, and those Dex reads.
    username: LdapAttribute = "mail"
    """The attribute users type as their user name."""
    id_attr: LdapAttribute = "uid"
    """The attribute Dex reads as the user's id."""
    email_attr: LdapAttribute = "mail"
    """The attribute Dex reads as the user's email."""
    name_attr: LdapAttribute = "cn"
    """The attribute Dex reads as the user's display name."""


class LdapConnector(Section):
    type: Literal["ldap"]
    """The connector's kind."""
    id: DnsLabel
    """Dex's connector id (never `local`); its secret is `kubeflowConnectorSecrets.<id>`."""
    name: DisplayName
    """The name on Dex's login page."""
    # Over TLS (ldaps) unless startTls; never plain (Dex's insecureNoSSL stays false).
    host: LdapHost
    """The LDAP server as host:port, over TLS (ldaps) unless `startTls`; never plain."""
    start_tls: bool = False
    """Connect in plain LDAP and upgrade with StartTLS."""
    # The CA of the server's certificate, when the system's do not cover it.
    root_ca: Optional[PemCertificateChain] = None
    """PEM CA certificate(s) of the server's certificate; unset: the system's."""
    bind_dn: DistinguishedName
    """The DN Dex binds as to search (its password: `kubeflowConnectorSecrets.<id>`)."""
    user_search: LdapUserSearch
    """How Dex finds a user."""


def _connector_type(value) -> str:
    """The connector's kind; anything else is read as oidc, so the problem is named at
    `type` (and its value is never quoted raw)."""
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in ("oidc", "ldap") else "oidc"


# By its `type` (oidc, ldap), so a problem names the fields of that kind only.
Connector = Annotated[Union[Annotated[OidcConnector, Tag("oidc")],
                            Annotated[LdapConnector, Tag("ldap")]],
                      Discriminator(_connector_type)]
