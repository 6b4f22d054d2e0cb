"""Dex's rollout patch as the API server applies it: merged (server-side apply) onto
upstream's dex Deployment, built from the pinned release by the real `kubectl kustomize`,
the result is a valid Deployment whose pod template carries the new annotation, so a new
password restarts Dex; nothing in it derives from the password."""

import copy

from pulumi.runtime import rpc

from components.addons.kubeflow import catalog
from tests.k8s_tools import validate_strict
from tests.builders import bare_metal_config, preview
from tests.kubeflow.test_component import with_kubeflow
from tests.kubeflow.overlays import build, settings, stages_of, write


def merged(target: dict, patch: dict) -> dict:
    """`patch` applied to `target` as server-side apply does for maps (fields it names
    replace or add, the rest stays)."""
    result = copy.deepcopy(target)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result


def test_the_rollout_patch_merged_onto_upstreams_dex_is_a_valid_deployment(tmp_path):
    kubeflow = settings()
    auth = next(s for s in stages_of(kubeflow) if s.name == catalog.AUTH.name)
    write(kubeflow, auth, tmp_path / "auth")
    dex = next(o for o in build(tmp_path / "auth")
               if o["kind"] == "Deployment" and o["metadata"]["name"] == "dex")

    plan = preview(with_kubeflow(bare_metal_config(workers=1)))
    patch = plan.named("test-kubeflow-dex-password-rollout").inputs
    assert (patch["metadata"]["name"], patch["metadata"]["namespace"]) == ("dex", "auth")
    result = merged(dex, {key: patch[key] for key in ("metadata", "spec")})
    version = result["spec"]["template"]["metadata"]["annotations"][
        "gpu-cluster/dex-password-version"]
    assert not rpc.is_rpc_secret(version) and len(version) == 16  # 8 random bytes, hex
    # Upstream's template otherwise untouched.
    assert result["spec"]["template"]["spec"] == dex["spec"]["template"]["spec"]

    validate_strict([result], tmp_path / "dex.yaml")
