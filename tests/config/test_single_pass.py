"""The loader validates the stack once, and what the cross-key checks read is StackConfig
itself as far as it validated (config/single_pass.py, config/partial.py)."""

import sys
from collections import Counter

from config import single_pass, types
from config.model import SECRET_KEYS, StackConfig
from tests.config.loading import problem_lines, problems_of
from tests.builders import bare_metal_config


def _names_validated(values: dict) -> Counter:
    """How often each DNS label (host names among them) is validated while `values` load."""
    seen: Counter = Counter()
    code = types._dns_label.__code__

    def profile(frame, event, _arg):
        if event == "call" and frame.f_code is code:
            seen[frame.f_locals["value"]] += 1
    sys.setprofile(profile)
    try:
        problems_of(values)
    finally:
        sys.setprofile(None)
    return seen


def test_each_value_is_validated_once_when_another_section_is_broken():
    values = bare_metal_config(workers=2)
    values["network"] = {**values.get("network", {}), "cni": "off"}
    seen = _names_validated(values)
    # The workers' names are nowhere else in the config (the controller's is storage.nfs.host).
    hosts = [host["name"] for host in values["hosts"] if host.get("role", "worker") == "worker"]
    assert len(hosts) == 2
    assert {name: seen[name] for name in hosts} == {name: 1 for name in hosts}


def _fields_of(values: dict) -> dict:
    validated = single_pass.validate(values, set())
    return {name: getattr(validated.partial, name) for name in StackConfig.model_fields}


def test_the_checks_read_every_field_of_the_model():
    values = bare_metal_config()
    settings = single_pass.validate(values, set()).settings
    fields = _fields_of(values)
    for name, field in StackConfig.model_fields.items():
        value = getattr(settings, name)
        if field.alias in SECRET_KEYS and isinstance(value, dict):
            expected = {key: secret.get_secret_value() for key, secret in value.items()}
        elif field.alias in SECRET_KEYS:
            expected = {} if "dict" in str(field.annotation) else \
                value.get_secret_value() if value is not None else ""
        elif name in ("hosts", "pools"):
            expected = list(enumerate(value))
        else:
            expected = value
        assert fields[name] == expected, name


def test_a_section_that_does_not_validate_is_none_and_the_others_stay():
    values = bare_metal_config()
    network = single_pass.validate(values, set()).settings.network
    values["monitoring"] = {"namespace": "Not A Label"}
    values["gpu"] = "on"
    values["hosts"][1]["address"] = "not an address"
    validated = single_pass.validate(values, set())
    assert validated.settings is None
    assert validated.partial.gpu is None
    # A section with a broken key is kept without it, and the key is dropped.
    assert validated.partial.monitoring.namespace == "monitoring"
    assert validated.dropped == {"monitoring.namespace"}
    assert validated.partial.network == network
    assert [index for index, _ in validated.partial.hosts] == [0, 2, 3]
    assert not validated.partial.complete("hosts") and validated.partial.complete("pools")
    assert sorted(error["loc"] for error in validated.errors) == [
        ("gpu",), ("hosts", 1, "address"), ("monitoring", "namespace")]


def test_a_list_given_for_a_section_is_refused_not_kept():
    """A section written as a list is named, and no rule reads it as a section (the
    monitoring rules once read `access.teams` of a list)."""
    values = bare_metal_config()
    values["access"] = [{"teams": []}]
    assert problem_lines(values) == [
        "gpu-cluster:access: Input should be a valid dictionary or instance of AccessSettings"]
