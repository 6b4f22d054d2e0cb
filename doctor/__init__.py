"""Checks a running cluster for the failures users hit: `python -m doctor`.

Reads the stack outputs (`kubeconfig`, `nodes`, `pools`, `defaultStorageClass`) through the
Pulumi CLI or from a JSON export, reads the cluster through its API with the admin
kubeconfig (GET only), and optionally the hosts' recorded command outputs; every check is a
pure function over what was read. Nothing here changes the cluster."""


class DoctorError(Exception):
    """The doctor could not look at all (outputs unreadable, API unreachable): exit code 2."""
