"""Components run under the SDK's mocks; the recording monitor keeps every resource."""

import pulumi
import pytest

from config import load
from preview.engine import RecordingMonitor
from preview.plan import Plan
from pulumi.runtime import settings
from tests.builders import as_cli_config, bare_metal_config


@pytest.fixture
def plan() -> Plan:
    recorded = Plan(project="gpu-cluster", stack="test")
    monitor = RecordingMonitor(recorded)
    settings.set_root_resource(None)
    pulumi.runtime.set_mocks(monitor.mocks, project="gpu-cluster", stack="test",
                             preview=True, monitor=monitor)
    return recorded


def settings_for(values: dict = None):
    cli = as_cli_config(values or bare_metal_config())
    return load(cli.config, cli.secret_keys, stack="test")
