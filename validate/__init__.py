"""Proves a built cluster delivers what its stack says: `python -m validate [STACK]`.

Reads the stack outputs through contract/ as the doctor does (`kubeconfig`, `nodes`, `pools`,
`defaultStorageClass`), then runs workloads in a namespace of its own and judges their
output: GPUs allocatable, a CUDA sample and `dcgmi diag` per GPU node, nccl-tests'
`all_reduce_perf` on each GPU node and across them, storage shared between two nodes and its
fio throughput. Everything it creates carries one run label and is deleted by it at the end,
also on Ctrl-C. Needs `requests`, `cryptography` and PyYAML, not the Pulumi SDK."""


class ValidateError(Exception):
    """Validation could not start (outputs unreadable, API unreachable): exit code 2."""
