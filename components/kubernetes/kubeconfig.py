"""Kubeconfig files built from the cluster CA and a client certificate, named after the
cluster so they merge cleanly into a user's existing kubeconfig."""

import base64

import yaml


def _b64(pem: str) -> str:
    return base64.b64encode(pem.encode()).decode()


def client_kubeconfig(cluster_name: str, api_endpoint: str, ca_cert_pem: str, user: str,
                      cert_pem: str, private_key_pem: str) -> str:
    """One cluster, one user, one context `<user>` (e.g. `dev-admin`) set as current."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {
            "server": api_endpoint, "certificate-authority-data": _b64(ca_cert_pem)}}],
        "users": [{"name": user, "user": {
            "client-certificate-data": _b64(cert_pem),
            "client-key-data": _b64(private_key_pem)}}],
        "contexts": [{"name": user, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": user,
        "preferences": {},
    }
    return yaml.safe_dump(document, sort_keys=False)
