"""The preview's warnings block: what the program will not do that a user might expect,
printed by `pulumi preview` (pulumi.log.warn) and the offline preview, naming the key that
changes it (config/warnings.py; the rules are in tests/config/test_warnings.py)."""

from preview.report import tree
from tests.builders import bare_metal_config, preview
from tests.kubeflow.test_component import kubeflow_values


def test_backups_off_because_the_controller_serves_nfs_is_warned_in_the_preview():
    # Seed 000: the controller serves the NFS export; nothing else would say so.
    plan = preview(bare_metal_config(workers=1))
    [warning] = [w for w in plan.warnings if "backup" in w]
    assert warning.startswith("no backups of the control plane: the NFS export is served by "
                              "the controller controller itself (gpu-cluster:storage.nfs.host)")
    assert "gpu-cluster:backup.path" in warning and "gpu-cluster:backup.enabled: false" in warning
    assert f"warning: {warning}" in tree(plan)


def test_a_repository_the_vendored_release_ignores_is_warned():
    plan = preview(kubeflow_values(repository="https://git.example.com/mirror/manifests"))
    [warning] = [w for w in plan.warnings if "kubeflow.source" in w]
    assert warning.startswith("gpu-cluster:kubeflow.source.repository "
                              "(https://git.example.com/mirror/manifests) is not read: "
                              "gpu-cluster:kubeflow.source.ref is the pinned release")
    assert "set gpu-cluster:kubeflow.source.ref to another tag" in warning
