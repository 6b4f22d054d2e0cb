"""All example stacks through every rule, from the preview engine and from the plan.json
the preview writes; and the offline runner's command line."""

import json

import pytest

from policy import offline
from policy.rules import RULES
from policy.stack_rules import STACK_RULES
from preview.report import write_artifacts

STACKS = offline.example_stacks()


@pytest.fixture(scope="module")
def plans():
    return {stack: offline.preview_plan(stack) for stack in STACKS}


def test_the_example_stacks_cover_the_three_layouts():
    assert set(STACKS) >= {"lab", "prod", "dev"}


@pytest.mark.parametrize("stack", STACKS)
def test_every_example_stack_passes_every_rule(plans, stack):
    resources = offline.resources_of_plan(plans[stack])
    assert offline.evaluate(resources) == []
    # The rules saw what they guard: not an empty or unrelated plan.
    types = {r.type for r in resources}
    assert "kubernetes:apps/v1:DaemonSet" in types
    assert all(r.known_secrets for r in resources)


@pytest.mark.parametrize("stack", STACKS)
def test_the_written_plan_json_passes_and_records_the_options(plans, stack, tmp_path):
    write_artifacts(plans[stack], tmp_path)
    document = json.loads((tmp_path / "plan.json").read_text())
    assert offline.evaluate(offline.resources_of_plan_json(document)) == []
    assert offline.evaluate_stack(offline.stack_resources_of_plan_json(document)) == []
    for record in document["resources"]:
        assert isinstance(record["protect"], bool) and isinstance(record["retainOnDelete"], bool)
    # Protected and retained, but where the stack says its data may go (dev).
    for record in document["resources"]:
        if record["type"] == "aws:efs/fileSystem:FileSystem":
            protected = record["inputs"]["tags"]["gpu-cluster/data-protection"] == "on"
            assert record["protect"] is record["retainOnDelete"] is protected


def _mutated(plans, stack, type_, change):
    """The stack's resources with the first of `type_` changed by `change(resource)`."""
    resources = offline.resources_of_plan(plans[stack])
    index = next(i for i, r in enumerate(resources) if r.type == type_)
    resources[index] = change(resources[index])
    return resources


def test_an_unprotected_file_system_of_a_real_plan_fails(plans):
    from dataclasses import replace

    resources = _mutated(plans, "prod", "aws:efs/fileSystem:FileSystem",
                         lambda r: replace(r, protect=False, retain_on_delete=False))
    assert sorted(v.rule for v in offline.evaluate(resources)) == ["efs-protected", "efs-protected"]


def test_the_stack_ssh_key_in_a_real_pool_user_data_fails(plans):
    from dataclasses import replace

    from policy.user_data import decode_user_data
    from tests.policy.test_rules import multipart_gzip_base64

    key = sorted(s for s in plans["dev"].secrets if s.startswith("-----BEGIN"))[0]

    def leak(resource):
        # The texts after the document itself and its decoded form: the scripts.
        scripts = decode_user_data(resource.props["userData"])[2:]
        # The key's body pasted into a script without its PEM markers.
        body = "\n".join(key.splitlines()[1:-1])
        scripts[-1] += f"\nNOTE='{body}'\n"
        return replace(resource, props={**resource.props,
                                        "userData": multipart_gzip_base64(*scripts)})

    resources = _mutated(plans, "dev", "aws:ec2/launchTemplate:LaunchTemplate", leak)
    [violation] = offline.evaluate(resources)
    assert violation.rule == "no-secrets-in-user-data"
    assert "a secret of the stack" in violation.message


def test_offline_command_line(tmp_path, capsys, plans):
    assert offline.main(["lab"]) == 0
    rules = len(RULES) + len(STACK_RULES)
    assert f"stack lab: {len(plans['lab'].resources)} resources, {rules} rules, 0 violations" \
        in capsys.readouterr().out
    write_artifacts(plans["prod"], tmp_path / "prod")
    plan_json = tmp_path / "prod" / "plan.json"
    document = json.loads(plan_json.read_text())
    for record in document["resources"]:
        if record["type"] == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
            record["inputs"]["cidrIpv4"] = "0.0.0.0/0"
    plan_json.write_text(json.dumps(document))
    assert offline.main(["--plan", str(plan_json)]) == 1
    printed = capsys.readouterr().out
    assert "[no-admin-ports-to-the-world] aws:vpc/securityGroupIngressRule:" in printed
    assert "SSH (port 22) is open to 0.0.0.0/0" in printed
    assert offline.main(["nope"]) == 2
    assert "no stack file Pulumi.nope.yaml" in capsys.readouterr().err
