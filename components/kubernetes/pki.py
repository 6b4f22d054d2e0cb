"""The cluster's certificate authority, owned by the program and kept as secret state:
the distribution signs every cluster certificate with it (the controller gets it before
the distribution first starts), and the program issues the admin client certificate with
it, so the admin kubeconfig is built here instead of being read back from the controller."""

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_tls as tls

from components.common.certificates import IssuedCertificate, Issuer

# The CAs k0s and RKE2 make themselves are RSA 2048 too; every Kubernetes client accepts it.
CA_KEY_BITS = 2048
CA_VALIDITY_HOURS = 10 * 365 * 24
CLIENT_CERT_VALIDITY_HOURS = 365 * 24
# A `pulumi up` within the last 30 days of a client certificate's life issues a new one
# (and with it a new kubeconfig output).
CLIENT_CERT_EARLY_RENEWAL_HOURS = 30 * 24
CLIENT_USES = ["client_auth", "digital_signature", "key_encipherment"]
# Kubernetes maps a certificate's organizations to groups; this one is cluster-admin.
ADMIN_GROUP = "system:masters"


@dataclass(frozen=True, kw_only=True)
class ClusterPkiArgs:
    cluster_name: str
    # kubernetes.adminCertificateGeneration: raising it issues a new admin key and cert.
    admin_generation: int = 0


class ClusterPki(pulumi.ComponentResource):
    ca_cert_pem: pulumi.Output[str]
    ca_private_key_pem: pulumi.Output[str]  # secret
    admin: IssuedCertificate

    def __init__(self, name: str, args: ClusterPkiArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:cluster:ClusterPki", name, None, opts)
        self._name = name
        self._opts = pulumi.ResourceOptions(parent=self)
        ca_key = tls.PrivateKey(f"{name}-ca-key", algorithm="RSA", rsa_bits=CA_KEY_BITS,
                                opts=self._opts)
        self.ca_private_key_pem = pulumi.Output.secret(ca_key.private_key_pem)
        ca = tls.SelfSignedCert(
            f"{name}-ca-cert",
            private_key_pem=ca_key.private_key_pem,
            subject=tls.SelfSignedCertSubjectArgs(common_name=f"{args.cluster_name}-ca"),
            is_ca_certificate=True,
            allowed_uses=["cert_signing", "crl_signing", "digital_signature",
                          "key_encipherment"],
            validity_period_hours=CA_VALIDITY_HOURS,
            opts=self._opts,
        )
        self.ca_cert_pem = ca.cert_pem
        self._issuer = Issuer(name, self.ca_private_key_pem, self.ca_cert_pem, self._opts)
        self.admin = self.client_certificate("admin", f"{args.cluster_name}-admin",
                                             ADMIN_GROUP, generation=args.admin_generation)
        self.register_outputs({"caCertPem": self.ca_cert_pem})

    def client_certificate(self, role: str, user: str, group: Optional[str] = None,
                           validity_hours: int = CLIENT_CERT_VALIDITY_HOURS,
                           early_renewal_hours: int = CLIENT_CERT_EARLY_RENEWAL_HOURS,
                           generation: int = 0) -> IssuedCertificate:
        """A client certificate for Kubernetes user `user` (in `group`), signed by the CA;
        a raised `generation` issues a new key and certificate."""
        return self._issuer.issue(role, user, group, CLIENT_USES, validity_hours,
                                  early_renewal_hours, generation)
