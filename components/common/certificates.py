"""Issuing a certificate from a CA kept in the stack's state (the cluster's and the VPN's):
an ECDSA P-256 key, a signing request and the signed certificate, named `<prefix>-<role>`."""

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_tls as tls


def ecdsa_key(name: str, opts: pulumi.ResourceOptions) -> tls.PrivateKey:
    """`<name>-key`: the key of every certificate the program makes, issued or self-signed:
    ECDSA P-256."""
    return tls.PrivateKey(f"{name}-key", algorithm="ECDSA", ecdsa_curve="P256", opts=opts)


@dataclass
class IssuedCertificate:
    common_name: str
    cert_pem: pulumi.Output[str]
    private_key_pem: pulumi.Output[str]  # secret


@dataclass
class Issuer:
    prefix: str
    ca_private_key_pem: pulumi.Input[str]
    ca_cert_pem: pulumi.Input[str]
    opts: pulumi.ResourceOptions

    def issue(self, role: str, common_name: str, organization: Optional[str],
              uses: list[str], validity_hours: int,
              early_renewal_hours: int, generation: Optional[int] = None,
              renewal_round: Optional[int] = None) -> IssuedCertificate:
        """A `pulumi up` within `early_renewal_hours` of the end issues a new one; so does
        a raised `generation` (a rotation), or a new `renewal_round`, with a new key too."""
        # pulumi-tls has no keepers, and a PrivateKey's inputs (algorithm, curve, bits)
        # cannot carry a generation; its name cannot either (the URN is its identity). The
        # engine replaces a resource whose replacementTrigger changed, but only when both
        # the old and the new value are set (pulumi/pulumi pkg/resource/deploy/
        # step_generator.go shouldTriggerReplace): so it is set from generation 0 on.
        trigger = generation if renewal_round is None else f"{generation or 0}/{renewal_round}"
        key_opts = self.opts if trigger is None else pulumi.ResourceOptions.merge(
            self.opts, pulumi.ResourceOptions(replacement_trigger=trigger))
        key = ecdsa_key(f"{self.prefix}-{role}", key_opts)
        # A new key replaces the request (private_key_pem) and so the certificate
        # (cert_request_pem); the generation in the subject (every subject field forces
        # replacement: terraform-provider-tls internal/provider/resource_cert_request.go)
        # replaces them even where the key's trigger was not recorded yet.
        request = tls.CertRequest(
            f"{self.prefix}-{role}-csr",
            private_key_pem=key.private_key_pem,
            subject=tls.CertRequestSubjectArgs(
                common_name=common_name, organization=organization,
                serial_number=str(generation) if generation else None),
            opts=self.opts,
        )
        cert = tls.LocallySignedCert(
            f"{self.prefix}-{role}-cert",
            cert_request_pem=request.cert_request_pem,
            ca_private_key_pem=self.ca_private_key_pem,
            ca_cert_pem=self.ca_cert_pem,
            allowed_uses=uses,
            validity_period_hours=validity_hours,
            early_renewal_hours=early_renewal_hours,
            opts=self.opts,
        )
        return IssuedCertificate(common_name, cert.cert_pem,
                                 pulumi.Output.secret(key.private_key_pem))
