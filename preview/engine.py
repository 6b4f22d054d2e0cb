"""Runs the Pulumi program under the SDK's mocks, the way the CLI would run it for a
stack, and records every resource (type, name, parent, dependencies, inputs) and the
stack outputs. Used by the offline preview command and by the tests."""

import contextlib
import functools
import gc
import hashlib
import json
import logging
import os
import re
import runpy
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Optional

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks, rpc, settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from components.common import clock, gc_settings
from components.network import vpn_ledger
from preview import aws_mocks, credentials, entropy
from preview.plan import Plan, ResourceRecord
from preview.stack_file import StackConfigFile


# Outputs that only a real host produces, by step (the end of the command's name).
_STEP_OUTPUTS: dict[str, Callable[[entropy.Draw], str]] = {
    "create-join-token": credentials.join_token,
    "service-account-key": credentials.service_account_public_key,
}

# Keys, certificates and random bytes, generated for real from the resource's inputs, so
# rendered files (OpenVPN configs, profiles) are files their tools accept.
_GENERATED_OUTPUTS: dict[str, Callable[[dict, entropy.Draw], credentials.Generated]] = {
    "tls:index/privateKey:PrivateKey": credentials.tls_private_key,
    "tls:index/selfSignedCert:SelfSignedCert": credentials.tls_self_signed_cert,
    "tls:index/certRequest:CertRequest": credentials.tls_cert_request,
    "tls:index/locallySignedCert:LocallySignedCert": credentials.tls_locally_signed_cert,
    "random:index/randomBytes:RandomBytes": credentials.random_bytes,
    "random:index/randomId:RandomId": credentials.random_id,
}


# Dynamic resources: their provider's outputs from the inputs and the earlier run's
# outputs (None at creation), as its create and update compute them.
_DYNAMIC_OUTPUTS: dict[str, Callable[[dict, Optional[dict]], dict]] = {
    vpn_ledger.LEDGER_TYPE: vpn_ledger.outputs,
}


class PreviewMocks(mocks.Mocks):
    def __init__(self, plan: Plan, earlier: Optional[Plan] = None):
        self.plan = plan
        # What an earlier run generated: kept where `pulumi up` would keep the resource.
        self.earlier = earlier.generated if earlier is not None else {}
        # The inputs the SDK's mock monitor decoded for the resource it is registering
        # on this thread, kept for the recording monitor instead of decoding them again.
        self.decoded = threading.local()

    def new_resource(self, args: mocks.MockResourceArgs):
        self.decoded.inputs = args.inputs
        on_aws = aws_mocks.resource(args.typ, args.name, args.inputs)
        if on_aws is not None:
            self._made_by_provider({key: value for key, value in on_aws[1].items()
                                    if args.inputs.get(key) != value})
            return on_aws
        outputs = dict(args.inputs)
        if args.typ == "command:remote:Command":
            produce = next(
                (make for step, make in _STEP_OUTPUTS.items() if args.name.endswith(f"-{step}")),
                None,
            )
            outputs["stdout"] = produce(entropy.stream(f"{args.name}:stdout")) if produce else ""
            outputs["stderr"] = ""
            if produce:
                self.plan.add_secrets(_secret_strings(outputs["stdout"]))
        dynamic = _DYNAMIC_OUTPUTS.get(args.typ)
        if dynamic is not None:
            inputs = unwrap_secrets(args.inputs)
            earlier = self.earlier.get((args.typ, args.name))
            outputs = dynamic(inputs, earlier[2].outputs if earlier else None)
            self.plan.generated[(args.typ, args.name)] = (
                inputs, None, credentials.Generated(outputs))
        generate = _GENERATED_OUTPUTS.get(args.typ)
        if generate is not None:
            inputs = unwrap_secrets(args.inputs)
            trigger = self.decoded.__dict__.pop("trigger", None)
            generated = self._kept(args, inputs, trigger) or generate(
                inputs, entropy.stream(_generation_label(args.typ, args.name, inputs, trigger)))
            self.plan.generated[(args.typ, args.name)] = (inputs, trigger, generated)
            outputs.update(generated.outputs)
            self._made_by_provider({name: value for name, value in generated.outputs.items()
                                    if name not in generated.secret})
            for name in generated.secret:
                self.plan.add_secrets(_secret_strings(outputs[name]))
                # As the engine does for the provider's additional_secret_outputs.
                outputs[name] = rpc.wrap_rpc_secret(outputs[name])
            self.plan.add_secrets(generated.derived)
        return f"{args.name}-id", outputs

    def _made_by_provider(self, outputs: dict) -> None:
        # Short strings (a flag, an algorithm name) could be parts of anything: left out.
        # A key's text is stripped where it is used (a trailing newline).
        self.plan.provider_made |= {value.strip() for value in outputs.values()
                                    if isinstance(value, str) and len(value.strip()) >= 8}

    def _kept(self, args: mocks.MockResourceArgs, inputs: dict,
              trigger: Any) -> Optional[credentials.Generated]:
        """The earlier run's outputs of this resource if `pulumi up` would keep it: the
        same inputs (every input of these types forces a new resource) and no change
        between two set replacement triggers (pulumi/pulumi pkg/resource/deploy/
        step_generator.go, shouldTriggerReplace)."""
        earlier = self.earlier.get((args.typ, args.name))
        if earlier is None or earlier[0] != inputs:
            return None
        if None not in (earlier[1], trigger) and earlier[1] != trigger:
            return None
        return earlier[2]

    def call(self, args: mocks.MockCallArgs):
        self.plan.invokes.append((args.token, dict(args.args)))
        return aws_mocks.invoke(args.token, args.args) or {}, []


def _generation_label(typ: str, name: str, inputs: dict, trigger: Any) -> str:
    """What a generated resource's material is drawn for: new inputs or a new replacement
    trigger mean a new resource, and under a seed new material, as after `pulumi up`."""
    digest = hashlib.sha256(json.dumps([inputs, trigger], sort_keys=True, default=str).encode())
    return f"{typ}::{name}::{digest.hexdigest()}"


class RecordingMonitor(mocks.MockMonitor):
    def __init__(self, plan: Plan, earlier: Optional[Plan] = None):
        self.preview_mocks = PreviewMocks(plan, earlier)
        super().__init__(self.preview_mocks)
        self.plan = plan

    def RegisterResource(self, request):
        # For new_resource, which the mock monitor calls on this thread.
        self.preview_mocks.decoded.trigger = (
            json_format.MessageToDict(request.replacement_trigger)
            if request.HasField("replacement_trigger") else None)
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            # Decoded by the mock monitor when it called new_resource on this thread.
            inputs = self.preview_mocks.decoded.__dict__.pop("inputs", None)
            if inputs is None:
                inputs = rpc.deserialize_properties(request.object)
            # A dynamic resource's pickled provider is code, not what it is given.
            inputs = {key: value for key, value in inputs.items() if key != "__provider"}
            self.plan.resources.append(
                ResourceRecord(
                    urn=response.urn,
                    type=request.type,
                    name=request.name,
                    parent=request.parent,
                    custom=request.custom,
                    dependencies=list(request.dependencies),
                    inputs=_assets_as_in_state(inputs),
                    protect=request.protect,
                    retain_on_delete=request.retainOnDelete,
                    property_dependencies={
                        key: list(value.urns)
                        for key, value in request.propertyDependencies.items()},
                    ignore_changes=list(request.ignoreChanges),
                    aliases=[_alias(alias) for alias in request.aliases],
                    provider=request.provider,
                    replacement_trigger=(
                        json_format.MessageToDict(request.replacement_trigger)
                        if request.HasField("replacement_trigger") else None),
                )
            )
        return response


def _alias(alias) -> Any:
    """An alias as the SDK sent it: the old URN, or the spec's fields that are set."""
    if alias.WhichOneof("alias") == "urn":
        return alias.urn
    spec = alias.spec
    found = {key: getattr(spec, key) for key in ("name", "type", "stack", "project")
             if getattr(spec, key)}
    parent = spec.WhichOneof("parent")
    if parent:
        found[parent] = getattr(spec, parent)
    return found


# YAML keys whose values are credentials inside a secret document (kubeconfigs).
_CREDENTIAL_KEYS = ("client-key-data", "client-certificate-data", "token", "password")


def unwrap_secrets(value: Any) -> Any:
    """`value` with secret inputs as their plain values (a generator needs the CA key)."""
    value = rpc.unwrap_rpc_secret(value)
    if isinstance(value, dict):
        return {key: unwrap_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(item) for item in value]
    return value


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Za-z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def _secret_strings(text: str) -> set[str]:
    """A secret, plus the parts of a multi-line secret that may be re-serialised on their
    own: the lines of its private-key and static-key blocks (certificates are public and
    stay readable) and the credential values of a kubeconfig."""
    found = {text, text.strip()}
    if text.lstrip().startswith("{"):
        # A secret map (kubeflowPasswordHashes): each value is a secret of its own.
        try:
            found |= {v for v in json.loads(text).values() if isinstance(v, str)}
        except (ValueError, AttributeError):
            pass
    for kind, body in _PEM_BLOCK.findall(text):
        if "CERTIFICATE" not in kind:
            found |= {line.strip() for line in body.splitlines() if len(line.strip()) >= 16}
    for line in text.splitlines():
        key, _, value = line.strip().partition(": ")
        if key.strip("- ") in _CREDENTIAL_KEYS and value:
            found.add(value.strip("'\""))
    return {s for s in found if s}


class _WarningRecorder(logging.Handler):
    """Collects the program's warnings and info messages, which the mock engine hands to a
    logger at their level (pulumi 3.272.0 sdk/python/lib/pulumi/runtime/mocks.py:398-406,
    MockEngine.Log); debug ones `pulumi preview` hides too."""

    def __init__(self, plan: Plan):
        super().__init__(level=logging.INFO)
        self.plan = plan

    def emit(self, record: logging.LogRecord) -> None:
        messages = self.plan.warnings if record.levelno >= logging.WARNING else self.plan.info
        messages.append(record.getMessage())


def _warnings_logger(plan: Plan) -> logging.Logger:
    logger = logging.getLogger(f"gpu-cluster.preview.{id(plan)}")
    logger.propagate = False
    # Its own level: the root's default, WARNING, would drop the info messages first.
    logger.setLevel(logging.INFO)
    logger.handlers = [_WarningRecorder(plan)]
    return logger


@contextlib.contextmanager
def _gc_settings():
    """The program's collector settings (components/common/gc_settings.py) for any program
    run here (the benchmark's floor too, so both are measured alike), and the caller's
    back afterwards."""
    thresholds = gc.get_threshold()
    gc_settings.apply()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


@contextlib.contextmanager
def _cli_environment(stack_file: StackConfigFile):
    """PULUMI_CONFIG and PULUMI_CONFIG_SECRET_KEYS, as the CLI passes them."""
    saved = {k: os.environ.get(k) for k in ("PULUMI_CONFIG", "PULUMI_CONFIG_SECRET_KEYS")}
    os.environ["PULUMI_CONFIG"] = json.dumps(stack_file.config)
    os.environ["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(stack_file.secret_keys)
    pulumi.runtime.config.set_all_config({}, [])
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_program(project_dir: Path, stack_file: StackConfigFile,
                program: Optional[Callable[[], None]] = None,
                earlier: Optional[Plan] = None) -> Plan:
    """Runs `__main__.py` of `project_dir` (or `program`) for the stack and returns the plan.
    Errors the program raises (ConfigError among them) propagate. With `earlier` (a plan
    of the same stack), generated keys and certificates the engine would keep are the
    earlier plan's, as after a `pulumi up` of it."""
    plan = Plan(project=stack_file.project, stack=stack_file.stack,
                placeholders=list(stack_file.placeholders),
                missing_secrets=list(stack_file.missing))
    for key in stack_file.secret_keys:
        plan.add_secrets(_secret_strings(stack_file.config[key]))
    main = project_dir / "__main__.py"
    if program is None:
        def program() -> None:
            runpy.run_path(str(main), run_name="__main__")

    if str(project_dir) not in sys.path:
        sys.path.insert(0, str(project_dir))
    # The program's "now" is the preview's: pinned under a seed.
    with _cli_environment(stack_file), _gc_settings(), clock.using(entropy.now):
        settings.set_root_resource(None)
        monitor = RecordingMonitor(plan, earlier)
        pulumi.runtime.set_mocks(
            monitor.mocks, project=stack_file.project, stack=stack_file.stack,
            preview=True, monitor=monitor, logger=_warnings_logger(plan),
        )
        _sync_await(run_pulumi_func(program))
        root = settings.get_root_resource()
        for name, value in (root.outputs if root else {}).items():
            output = pulumi.Output.from_input(value)
            plan.outputs[name] = (_sync_await(output.future()), _sync_await(output.is_secret()))
            if plan.outputs[name][1]:
                plan.add_secrets(_secret_strings(str(plan.outputs[name][0])))
    return plan


def _assets_as_in_state(inputs: dict) -> dict:
    """A FileAsset input as Pulumi's state keeps it: its path and the sha256 of the file
    (pulumi sdk/go/common/resource/asset.go), never its bytes."""
    def plain(value: Any) -> Any:
        if isinstance(value, pulumi.FileAsset):
            return {"path": value.path, "hash": _file_sha256(value.path)}
        return value
    return {key: plain(value) for key, value in inputs.items()}


@functools.lru_cache(maxsize=None)
def _file_sha256(path: str) -> str:
    # One tarball serves every machine: read once per run. Its name is its digest.
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
