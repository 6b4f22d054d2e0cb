"""What build/<stack>/ shows of the machines: each step a host runs, rendered whole, in the
order it runs (hosts/<host>/), the step bundle once (bundle/<digest>/) and the OpenVPN
configs the VPN steps install (vpn/)."""

from typing import Optional

from components.common.bundle import step_bundle
from components.common.step_text import step_inputs, whole_text
from preview.plan import Plan


def host_scripts(plan: Plan):
    """Each step's stdin (scripts and inputs), per host the step is about, numbered in the
    order the steps run: over SSH, on the machine running `pulumi up`, or at boot from an
    instance's or launch template's user data."""
    commands = plan.of_type_in_tree_order("command:remote:Command") + plan.of_type_in_tree_order("command:local:Command")
    for resource in commands:
        # Rendered whole: the bundle's files the step runs pasted in, as the host runs them.
        stdin = whole_text(plan.redact(resource.inputs.get("stdin", "")))
        host, step = _envelope_names(stdin)
        if not (host and step):
            continue
        where = (plan.redact(resource.inputs.get("connection", {})).get("host")
                 if resource.type.startswith("command:remote") else "the machine running pulumi")
        header = (
            f"#!/usr/bin/env bash\n# Rendered by the offline preview of stack '{plan.stack}'.\n"
            f"# Runs on {where} as: {resource.inputs.get('create')}\n"
        )
        if resource.inputs.get("delete"):
            header += "# On delete the same input runs with the action 'delete'.\n"
        depth = plan.depth_of(resource)
        yield f"hosts/{host}/{depth:02d}-{step}.sh", header + stdin
    for resource, user_data in _user_data(plan):
        # Imported here: only a stack with EC2 instances loads the AWS SDK.
        from components.aws.boot import boot_scripts
        [part] = boot_scripts(user_data)
        note = (f"# Rendered by the offline preview of stack '{plan.stack}'.\n# Runs at "
                f"first boot from the user data of {resource.name} (cloud-init, as root, "
                "executed as a program).\n")
        # The part exactly as cloud-init gets it, the note after its "#!" line.
        first, _, rest = part.partition("\n")
        host, step = _envelope_names(part)
        yield f"hosts/{host}/boot-00-{step}.sh", f"{first}\n{note}{rest}"
        for index, (name, stdin) in enumerate(plan.boot_steps(user_data), start=1):
            text = whole_text(plan.redact(stdin))
            yield (f"hosts/{host}/boot-{index:02d}-{name}.sh",
                   f"#!/usr/bin/env bash\n# Rendered by the offline preview of stack "
                   f"'{plan.stack}'.\n# Runs at boot from {resource.name}'s boot plan "
                   "(boot/run-boot.sh, as root).\n" + text)


def bundle_files(plan: Plan):
    """The step bundle the machines get, once: bundle/<digest>/<path>."""
    if not (plan.of_type_in_tree_order("command:remote:CopyToRemote")
            or plan.of_type_in_tree_order("aws:s3/bucketObjectv2:BucketObjectv2")):
        return
    bundle = step_bundle()
    for file in bundle.files:
        yield f"bundle/{bundle.digest}/{file.path}", file.data.decode(), file.mode


def _user_data(plan: Plan):
    """(resource, gzipped multipart user data) of instances and launch templates."""
    for resource in plan.of_type_in_tree_order("aws:ec2/instance:Instance"):
        if resource.inputs.get("userDataBase64"):
            yield resource, resource.inputs["userDataBase64"]
    for resource in plan.of_type_in_tree_order("aws:ec2/launchTemplate:LaunchTemplate"):
        if resource.inputs.get("userData"):
            yield resource, resource.inputs["userData"]


def _envelope_names(text: str) -> tuple[Optional[str], Optional[str]]:
    inputs = step_inputs(text)
    return inputs.get("GPU_CLUSTER_HOST"), inputs.get("GPU_CLUSTER_STEP")


def vpn_configs(plan: Plan):
    """The OpenVPN configs the VPN steps install, as files to read on their own."""
    for resource in plan.of_type_in_tree_order("command:remote:Command"):
        inputs = step_inputs(plan.redact(resource.inputs.get("stdin", "")))
        if "OPENVPN_CONFIG" in inputs:
            yield f"vpn/{resource.name}.conf", inputs["OPENVPN_CONFIG"]
