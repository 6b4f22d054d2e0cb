"""The VPN's own small PKI, kept in the stack's state: a CA, the server's certificate,
client certificates for the on-prem gateway and an administrator, and the tls-crypt key
that hides the server from anyone without it. Private keys are secret outputs.

Rotation (vpn.pkiGeneration, vpn.previousCaTrusted): generation g's CA is `<name>-ca-*`
for an even g and `<name>-ca-alt-*` for an odd one; each pair is replaced (through its
key's replacementTrigger) when a generation of its parity comes, so the previous
generation's CA is still in the state while the current one issues. While the previous
CA is trusted, both ends trust both CAs (OpenVPN reads every certificate of its `ca`
file: doc/man-sections/tls-options.rst, "--ca file ... can have multiple certificates
in .pem format, concatenated together"), and the server keeps its certificate from the
previous CA, which peers of either generation accept; clients get new ones at once."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

import pulumi
import pulumi_random as random
import pulumi_tls as tls

from components.common import clock
from components.network import openvpn_config, vpn_ledger
from components.common.certificates import IssuedCertificate, Issuer, ecdsa_key

CA_VALIDITY_HOURS = 10 * 365 * 24
CERT_VALIDITY_HOURS = vpn_ledger.CERT_VALIDITY_DAYS * 24
# Renewal comes with the rounds (vpn_ledger.RENEWAL_ROUND_DAYS: at least 65 days before the
# end); a certificate in its last 30 days at a `pulumi up` is re-issued all the same (the
# steps then install it and restart OpenVPN). The CA is renewed by a rotation.
CERT_EARLY_RENEWAL_HOURS = 30 * 24
TLS_CRYPT_KEY_BYTES = 256
# The CA resources of even and of odd generations: `<name>-ca-key`, `<name>-ca-alt-key`.
CA_SLOTS = ("ca", "ca-alt")

SERVER_USES = ["server_auth", "digital_signature", "key_agreement"]
CLIENT_USES = ["client_auth", "digital_signature", "key_agreement"]
PREVIOUS_CA_WARNING = (
    "vpn.previousCaTrusted: the VPN still trusts the CA of vpn.pkiGeneration {previous} and "
    "the server presents its certificate from it; once every VPN profile is handed out "
    "again, set it to false and run `pulumi up` to end the rotation")


def slot_generation(slot: int, generation: int) -> Optional[int]:
    """The generation whose CA CA_SLOTS[slot] holds at `generation`: the latest one of
    its parity, none before generation 1 for the odd slot."""
    held = generation if generation % 2 == slot else generation - 1
    return held if held >= 0 else None


@dataclass(frozen=True, kw_only=True)
class VpnPkiArgs:
    # Names the certificates: <cluster>-vpn-server, <cluster>-onprem-gateway, <cluster>-admin.
    cluster_name: str
    # vpn.pkiGeneration: the CA that issues the clients' certificates (and, once the
    # previous CA is no longer trusted, the server's).
    generation: int = 0
    # vpn.previousCaTrusted: the rotation's window is open.
    previous_ca_trusted: bool = False
    # access.users: each gets a client certificate, CN `user-<name>`.
    users: Sequence[str] = field(default_factory=tuple)


class VpnPki(pulumi.ComponentResource):
    ca_cert_pem: pulumi.Output[str]  # the current generation's CA
    # What both ends trust: the current CA, and during a rotation the previous one.
    trusted_ca_pem: pulumi.Output[str]
    server: IssuedCertificate
    gateway: IssuedCertificate
    admin: IssuedCertificate
    users: dict[str, IssuedCertificate]  # user name -> its certificate (CN user-<name>)
    crl_pem: pulumi.Output[str]  # one CRL per trusted CA, concatenated
    tls_crypt_key: pulumi.Output[str]  # secret, an OpenVPN static key file

    def __init__(self, name: str, args: VpnPkiArgs, opts: pulumi.ResourceOptions = None):
        super().__init__("gpu-cluster:network:VpnPki", name, None, opts)
        if args.previous_ca_trusted and args.generation == 0:
            raise ValueError("VpnPki: there is no previous CA at generation 0")
        self._name = name
        self._opts = pulumi.ResourceOptions(parent=self)
        self._generation = args.generation
        self._now = clock.now()
        self._round = vpn_ledger.rounds_since_epoch(self._now, vpn_ledger.RENEWAL_ROUND_DAYS)
        cluster = args.cluster_name
        # generation -> (issuer, CA certificate)
        self._cas = {generation: self._create_ca(slot, generation, cluster)
                     for slot in range(len(CA_SLOTS))
                     if (generation := slot_generation(slot, args.generation)) is not None}
        self.ca_cert_pem = self._cas[args.generation][1]
        self.trusted_ca_pem = self.ca_cert_pem
        server_generation = args.generation
        if args.previous_ca_trusted:
            server_generation = args.generation - 1
            self.trusted_ca_pem = pulumi.Output.all(
                self.ca_cert_pem, self._cas[server_generation][1]).apply(ca_bundle)
            pulumi.log.warn(PREVIOUS_CA_WARNING.format(previous=server_generation),
                            resource=self)
        self.server = self._issue("server", f"{cluster}-vpn-server", SERVER_USES,
                                  server_generation)
        self.gateway = self.issue("gateway", f"{cluster}-onprem-gateway", CLIENT_USES)
        self.admin = self.issue("admin", f"{cluster}-admin", CLIENT_USES)
        self.users = {user: self.issue(f"user-{user}", f"user-{user}") for user in args.users}
        trusted = [args.generation] + ([args.generation - 1] if args.previous_ca_trusted else [])
        self.crl_pem = self._revocation_lists(trusted)

        tls_crypt = random.RandomBytes(f"{name}-tls-crypt-key", length=TLS_CRYPT_KEY_BYTES,
                                       opts=self._opts)
        self.tls_crypt_key = pulumi.Output.secret(tls_crypt.hex.apply(openvpn_config.static_key))
        self.register_outputs({
            "caCertPem": self.ca_cert_pem,
            "serverCommonName": self.server.common_name,
            "gatewayCommonName": self.gateway.common_name,
            "adminCommonName": self.admin.common_name,
        })

    def _create_ca(self, slot: int, generation: int, cluster: str
                   ) -> tuple[Issuer, pulumi.Output[str]]:
        prefix = f"{self._name}-{CA_SLOTS[slot]}"
        # The key is replaced when its slot's generation changes (see Issuer.issue for why
        # a replacementTrigger), and with it the certificate (private_key_pem).
        ca_key = ecdsa_key(prefix, pulumi.ResourceOptions.merge(
            self._opts, pulumi.ResourceOptions(replacement_trigger=generation)))
        ca = tls.SelfSignedCert(
            f"{prefix}-cert",
            private_key_pem=ca_key.private_key_pem,
            # Two trusted CAs never share a subject: a peer's log names which one it is.
            subject=tls.SelfSignedCertSubjectArgs(
                common_name=f"{cluster}-vpn-ca", organization="gpu-cluster",
                serial_number=str(generation) if generation else None),
            is_ca_certificate=True,
            allowed_uses=["cert_signing", "crl_signing"],
            validity_period_hours=CA_VALIDITY_HOURS,
            opts=self._opts,
        )
        # Issued certificates keep their names (`<name>-<role>-*`) whatever CA signs them.
        return Issuer(self._name, ca_key.private_key_pem, ca.cert_pem, self._opts), ca.cert_pem

    def _issue(self, role: str, common_name: str, uses: list[str],
               generation: int) -> IssuedCertificate:
        return self._cas[generation][0].issue(role, common_name, "gpu-cluster", uses,
                                              CERT_VALIDITY_HOURS, CERT_EARLY_RENEWAL_HOURS,
                                              generation, self._round)

    def _revocation_lists(self, trusted: list[int]) -> pulumi.Output[str]:
        """The ledger of the clients' certificates, and from it a CRL for each trusted CA."""
        generation = self._generation
        clients = {"gateway": self.gateway, "admin": self.admin,
                   **{f"user-{name}": cert for name, cert in self.users.items()}}
        current = pulumi.Output.all(**{
            holder: cert.cert_pem.apply(
                lambda pem: vpn_ledger.certificate_facts(pem, generation))
            for holder, cert in clients.items()})
        this_update, _ = vpn_ledger.crl_window(self._now)
        ledger = vpn_ledger.CertificateLedger(
            f"{self._name}-ledger", current, trusted,
            vpn_ledger.rfc3339(this_update), opts=self._opts)
        now = self._now
        crls = [pulumi.Output.all(self._cas[g][0].ca_private_key_pem, self._cas[g][1],
                                  ledger.revoked).apply(
            lambda values, g=g: vpn_ledger.crl_pem(*values, g, now)) for g in trusted]
        # Not secret: serials and dates, signed (the CA key only taints it).
        return pulumi.Output.unsecret(pulumi.Output.all(*crls).apply("".join))

    def issue(self, role: str, common_name: str,
              uses: list[str] = CLIENT_USES) -> IssuedCertificate:
        """A client certificate from the current generation's CA."""
        return self._issue(role, common_name, uses, self._generation)


def ca_bundle(pems: list[str]) -> str:
    """CA certificates, one after the other, as an OpenVPN `ca` file takes them."""
    return "".join(pem if pem.endswith("\n") else pem + "\n" for pem in pems)
