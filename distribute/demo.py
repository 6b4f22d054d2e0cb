"""`gpu-cluster distribute demo`: stack outputs to try the command on without a cluster, a
cloud account or the Pulumi CLI. They are what `pulumi stack output --json --show-secrets`
would print for one of the project's example stacks, made by the offline preview
(preview/engine.py) from the program as it is, so they always have the program's current
shape; its keys and certificates are real ones generated for the demo, of no cluster."""

import json
import os
import shlex
from pathlib import Path

from contract.names import USER_KUBECONFIGS_OUTPUT, USER_VPN_PROFILES_OUTPUT
from distribute import DistributeError, InputError, files

# The hybrid example: users with kubeconfigs and VPN profiles, an admin VPN profile.
DEFAULT_STACK = "prod"
DEFAULT_FILE = Path("build") / "demo" / "outputs.json"


def stack_outputs(project_dir: Path, stack: str) -> dict:
    """The example stack's outputs, secrets shown, from the offline preview."""
    try:
        from preview.engine import run_program, unwrap_secrets
        from preview.stack_file import EXAMPLE_STACKS, read_stack
    except ImportError as error:
        raise DistributeError(
            f"the demo runs the offline preview, which needs the program's dependencies "
            f"({error.name} is missing): run `make preview` first") from None
    if stack not in EXAMPLE_STACKS:
        raise InputError(f"stack '{stack}' is not an example stack of the project "
                         f"({', '.join(EXAMPLE_STACKS)})")
    plan = run_program(project_dir, read_stack(project_dir, stack))
    return {name: unwrap_secrets(value) for name, (value, _) in plan.outputs.items()}


def write(project_dir: Path, path_arg: str, stack: str, force: bool) -> tuple[Path, list[str]]:
    """Writes the demo outputs (mode 0600: they hold private keys, if throwaway ones) unless
    the file is there: an earlier demo's kubeconfigs merge again without a clash."""
    target = files.inspect(path_arg)
    if target.text is not None and not force:
        return target.path, [f"kept {target.path} from an earlier demo (--force makes new "
                             "keys and certificates; contexts merged from the old ones then "
                             "clash)"]
    text = json.dumps(stack_outputs(project_dir, stack), indent=2) + "\n"
    notes = files.write_private(target, text)
    return target.path, [f"wrote the outputs of example stack '{stack}' to {target.path} "
                         f"(mode {files.FILE_MODE:04o}; throwaway keys of no cluster)", *notes]


def next_steps(path: Path) -> list[str]:
    """The commands to try on the demo outputs, kubeconfig and profiles beside them."""
    values = json.loads(path.read_text())
    shown = _shown(path)
    folder = os.path.join(os.path.dirname(_shown(path, quote=False)), "kube")
    config = shlex.quote(os.path.join(folder, "config"))
    # The admin's file apart: on hybrid stacks the admin reaches the API at its public
    # address and users at its private one through the VPN, under the same cluster name,
    # which a merge into one file refuses as a clash.
    steps = [f"gpu-cluster distribute users --outputs {shown}",
             f"gpu-cluster distribute write --admin --outputs {shown} --output "
             f"{shlex.quote(os.path.join(folder, 'admin.yaml'))}"]
    users = sorted(values.get(USER_KUBECONFIGS_OUTPUT) or {})
    vpn = set(values.get(USER_VPN_PROFILES_OUTPUT) or {})
    for user in users[:1]:
        steps.append(f"gpu-cluster distribute write --user {shlex.quote(user)} --outputs {shown} "
                     f"--merge-into {config}{' --vpn' if user in vpn else ''}")
    steps.append(f"kubectl config view --kubeconfig {config} --minify")
    return steps


def _shown(path: Path, quote: bool = True) -> str:
    """The path relative to the current folder when it is inside it."""
    relative = os.path.relpath(path)
    text = str(path) if relative.startswith("..") else relative
    return shlex.quote(text) if quote else text
