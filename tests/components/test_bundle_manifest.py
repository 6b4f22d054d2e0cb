"""The bundle's manifest, whose sha256 is its digest, is the same text the machines compute
from the files they received (bundle/run-step.sh gpu_cluster_bundle_manifest, run here by
bash): a folder named like the start of a sibling file (k0s/etcd/ beside k0s/etcd-quorum.sh)
sorts the same way on both sides."""

import subprocess

from components.common.bundle import SCRIPTS_DIR, collect

FILES = ["lib.sh", "k0s/etcd-quorum.sh", "k0s/etcd/lib.sh", "k0s/lib.sh", "k0s.sh",
         "rke2/etcd/lib.sh", "rke2/etcd-quorum.sh", "a-b/c.sh", "a/b.sh"]


def test_the_manifest_is_the_one_the_machines_compute(tmp_path):
    for relative in FILES:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {relative}\n")
        path.chmod(0o644)
    machine = subprocess.run(
        ["bash", "-c", 'source "$1"; gpu_cluster_bundle_manifest "$2"', "manifest",
         str(SCRIPTS_DIR / "bundle/run-step.sh"), str(tmp_path)],
        capture_output=True, text=True, check=True).stdout
    assert collect(tmp_path).manifest == machine
