"""Hands out the cluster's kubeconfigs (and on hybrid stacks the users' VPN profiles):
`python -m distribute`.

Reads the stack outputs (`kubeconfig`, `userKubeconfigs`, `userKubeconfigParameters`,
`userVpnProfiles`) through the Pulumi CLI (the Automation API) or from a JSON export, or one
user's kubeconfig from its SSM parameter, and writes it to a file or merges it into an
existing kubeconfig without touching the other clusters, users and contexts there, the VPN
profile beside it. Files are written atomically with mode 0600. `demo` makes outputs to try
it on offline."""


from contract import ContractError, InputError

__all__ = ["DistributeError", "InputError"]

# A failure reported as one line, nothing done (exit code 2): refused or failed, or InputError
# (wrong command line or unusable input). The contract's reader and kubeconfig raise the
# same classes, so the command reports theirs as its own.
DistributeError = ContractError
