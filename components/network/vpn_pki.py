"""The VPN's own small PKI, kept in the stack's state: a CA, the server's certificate,
client certificates for the on-prem gateway and an administrator, and the tls-crypt key
that hides the server from anyone without it. Private keys are secret outputs."""

from dataclasses import dataclass

import pulumi
import pulumi_random as random
import pulumi_tls as tls

from components.network import openvpn_config
from components.common.certificates import IssuedCertificate, Issuer

CA_VALIDITY_HOURS = 10 * 365 * 24
CERT_VALIDITY_HOURS = 3 * 365 * 24
# A `pulumi up` within the last 30 days of a certificate's life issues a new one (the
# steps then install it and restart OpenVPN); the CA is renewed by replacing it.
CERT_EARLY_RENEWAL_HOURS = 30 * 24
TLS_CRYPT_KEY_BYTES = 256

SERVER_USES = ["server_auth", "digital_signature", "key_agreement"]
CLIENT_USES = ["client_auth", "digital_signature", "key_agreement"]


@dataclass
class VpnPkiArgs:
    # Names the certificates: <cluster>-vpn-server, <cluster>-onprem-gateway, <cluster>-admin.
    cluster_name: str


class VpnPki(pulumi.ComponentResource):
    ca_cert_pem: pulumi.Output[str]
    server: IssuedCertificate
    gateway: IssuedCertificate
    admin: IssuedCertificate
    tls_crypt_key: pulumi.Output[str]  # secret, an OpenVPN static key file

    def __init__(self, name: str, args: VpnPkiArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:network:VpnPki", name, None, opts)
        self._name = name
        self._opts = pulumi.ResourceOptions(parent=self)
        cluster = args.cluster_name

        ca_key = tls.PrivateKey(f"{name}-ca-key", algorithm="ECDSA", ecdsa_curve="P256",
                                opts=self._opts)
        ca = tls.SelfSignedCert(
            f"{name}-ca-cert",
            private_key_pem=ca_key.private_key_pem,
            subject=tls.SelfSignedCertSubjectArgs(common_name=f"{cluster}-vpn-ca",
                                                  organization="gpu-cluster"),
            is_ca_certificate=True,
            allowed_uses=["cert_signing", "crl_signing"],
            validity_period_hours=CA_VALIDITY_HOURS,
            opts=self._opts,
        )
        self.ca_cert_pem = ca.cert_pem
        self._issuer = Issuer(name, ca_key.private_key_pem, self.ca_cert_pem, self._opts)
        self.server = self.issue("server", f"{cluster}-vpn-server", SERVER_USES)
        self.gateway = self.issue("gateway", f"{cluster}-onprem-gateway", CLIENT_USES)
        self.admin = self.issue("admin", f"{cluster}-admin", CLIENT_USES)

        tls_crypt = random.RandomBytes(f"{name}-tls-crypt-key", length=TLS_CRYPT_KEY_BYTES,
                                       opts=self._opts)
        self.tls_crypt_key = pulumi.Output.secret(tls_crypt.hex.apply(openvpn_config.static_key))
        self.register_outputs({
            "caCertPem": self.ca_cert_pem,
            "serverCommonName": self.server.common_name,
            "gatewayCommonName": self.gateway.common_name,
            "adminCommonName": self.admin.common_name,
        })

    def issue(self, role: str, common_name: str,
              uses: list[str] = CLIENT_USES) -> IssuedCertificate:
        return self._issuer.issue(role, common_name, "gpu-cluster", uses, CERT_VALIDITY_HOURS,
                                  CERT_EARLY_RENEWAL_HOURS)
