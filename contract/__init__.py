"""What the program hands the day-2 tools, written once: the stack's output names, the node
label and roles they read, the ports the policy pack guards, the envelope's check branch,
the stack-outputs reader, the admin kubeconfig and the Kubernetes API client.

The program (`components/`, `config/`, `preview/`, `__main__.py`), `doctor`, `validate`,
`distribute` and the policy pack import it; no tool imports another tool
(tests/contract/test_contract.py). `names` and `ports` use the standard library only: the policy
pack loads them in its own virtualenv, which holds pulumi-policy alone."""


class ContractError(Exception):
    """The outputs, the kubeconfig or the API client could not give what was asked, as one
    line (refused or failed: the command exits 2, nothing done; command.py)."""


class InputError(ContractError):
    """Unusable input (outputs, user name, command line)."""
