"""The step bundle over a real sshd and sudo on loopback (loopback.py): the tarball uploaded
over SFTP where CopyToRemote puts it, the bundle step's stdin as the program renders it,
then steps whose stdin the program renders (bundle_stdin) run from the installed bundle.

The bundle is this checkout's scripts plus a demo step (demo/write.sh, its delete
demo/remove.sh) that only touches files below GPU_CLUSTER_ROOT, an input both declare:
the machine's real /var/lib is left alone."""

import shutil
import stat
from pathlib import Path

import pytest

from components.common.bundle import SCRIPTS_DIR, Bundle, collect
from components.common.remote_step import step_command
from components.common.step_text import Script, bundle_stdin, render_envelope
from components.hosts.bundle_step import RECEIVE, STEP, upload_path
from tests.hosts.loopback import LoopbackHost, loopback_host

HOST = "gpu001"
# Their headers declare what the step passes: bundle_stdin checks the bundle's files.
WRITE = """\
#!/usr/bin/env bash
# Inputs: DEMO_TEXT GPU_CLUSTER_ROOT
set -euo pipefail
main() {
  mkdir -p "$GPU_CLUSTER_ROOT/srv"
  printf '%s\\n' "$DEMO_TEXT" >"$GPU_CLUSTER_ROOT/srv/demo"
  log "wrote $DEMO_TEXT"
}
main "$@"
"""
REMOVE = """\
#!/usr/bin/env bash
# Inputs: GPU_CLUSTER_ROOT
set -euo pipefail
rm -f -- "$GPU_CLUSTER_ROOT/srv/demo"
log "removed (version {version})"
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory) -> LoopbackHost:
    with loopback_host(tmp_path_factory.mktemp("sshd")) as running:
        yield running


def bundle_with_demo(folder: Path, version: int) -> Bundle:
    shutil.copytree(SCRIPTS_DIR, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "demo").mkdir()
    (folder / "demo" / "write.sh").write_text(WRITE)
    (folder / "demo" / "remove.sh").write_text(REMOVE.format(version=version))
    return collect(folder)


def install(host: LoopbackHost, bundle: Bundle, root: Path, tarball: Path):
    """Uploads the tarball as the program's CopyToRemote does, then runs the bundle step."""
    tarball.write_bytes(bundle.tarball)
    uploaded = host.put(tarball, upload_path(bundle))
    assert uploaded.returncode == 0, uploaded.stderr
    env = {"GPU_CLUSTER_ROOT": str(root), "BUNDLE_TARBALL": upload_path(bundle),
           "BUNDLE_SHA256": bundle.tarball_sha256, "BUNDLE_DIGEST": bundle.digest}
    return host.run(step_command(HOST, STEP, "create", host.user),
                    stdin=render_envelope(HOST, STEP, RECEIVE, env))


def step(host: LoopbackHost, bundle: Bundle, root: Path, action: str, text: str = "hello"):
    stdin = bundle_stdin(HOST, "demo", Script("demo/write.sh"),
                         {"GPU_CLUSTER_ROOT": str(root), "DEMO_TEXT": text},
                         delete=Script("demo/remove.sh"), bundle=bundle)
    return host.run(step_command(HOST, "demo", action, host.user), stdin=stdin)


@pytest.fixture
def root(tmp_path) -> Path:
    # Below a folder only root may write, as /var/lib is on a host.
    (tmp_path / "host").mkdir(mode=0o755)
    return tmp_path / "host"


def test_the_bundle_step_installs_it_root_owned_and_a_second_run_changes_nothing(
        host, root, tmp_path):
    bundle = bundle_with_demo(tmp_path / "scripts", 1)

    first = install(host, bundle, root, tmp_path / "bundle.tar.gz")

    assert first.returncode == 0, first.stderr
    assert f"{HOST}: {STEP}: changed: step bundle {bundle.digest} installed" in first.stderr
    bundles = root / "var/lib/gpu-cluster/bundles"
    installed = bundles / bundle.digest
    assert (bundles / "current").readlink() == Path(bundle.digest)
    for path in [installed, *installed.rglob("*")]:
        info = path.lstat()
        assert info.st_uid == 0 and info.st_gid == 0, path
        assert not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH), path
        assert stat.S_IMODE(info.st_mode) == (0o755 if path.is_dir()
                                              else bundle.by_path[str(path.relative_to(
                                                  installed))].mode), path
    assert sorted(str(p.relative_to(installed)) for p in installed.rglob("*") if p.is_file()) \
        == sorted(bundle.by_path)

    second = install(host, bundle, root, tmp_path / "bundle.tar.gz")

    assert second.returncode == 0, second.stderr
    assert "changed" not in second.stderr
    assert f"step bundle {bundle.digest} in place" in second.stderr


def test_a_tarball_altered_in_transit_is_refused_naming_host_and_step(host, root, tmp_path):
    bundle = bundle_with_demo(tmp_path / "scripts", 1)
    tarball = tmp_path / "bundle.tar.gz"
    tarball.write_bytes(bundle.tarball[:-8] + bytes(8))
    uploaded = host.put(tarball, upload_path(bundle))
    assert uploaded.returncode == 0, uploaded.stderr
    env = {"GPU_CLUSTER_ROOT": str(root), "BUNDLE_TARBALL": upload_path(bundle),
           "BUNDLE_SHA256": bundle.tarball_sha256, "BUNDLE_DIGEST": bundle.digest}

    result = host.run(step_command(HOST, STEP, "create", host.user),
                      stdin=render_envelope(HOST, STEP, RECEIVE, env))

    assert result.returncode == 1
    assert f"gpu-cluster: {HOST}: {STEP}: refused: the step bundle received" in result.stderr
    assert not (root / "var/lib/gpu-cluster/bundles" / bundle.digest).exists()


def test_a_step_runs_from_the_bundle_and_is_refused_once_the_bundle_is_altered(
        host, root, tmp_path):
    bundle = bundle_with_demo(tmp_path / "scripts", 1)
    assert install(host, bundle, root, tmp_path / "bundle.tar.gz").returncode == 0

    ran = step(host, bundle, root, "create")

    assert ran.returncode == 0, ran.stderr
    assert f"gpu-cluster: {HOST}: demo: wrote hello" in ran.stderr
    assert (root / "srv/demo").read_text() == "hello\n"

    # Someone with root on the host changes a library every step sources.
    library = root / "var/lib/gpu-cluster/bundles" / bundle.digest / "lib.sh"
    library.write_text(library.read_text() + "\necho injected >&2\n")

    refused = step(host, bundle, root, "create", text="again")

    assert refused.returncode == 1
    assert f"gpu-cluster: {HOST}: demo: refused: the step bundle {bundle.digest} was " \
        "altered on this host" in refused.stderr
    assert "injected" not in refused.stderr
    assert (root / "srv/demo").read_text() == "hello\n"


def test_a_step_rendered_for_another_bundle_is_refused(host, root, tmp_path):
    installed = bundle_with_demo(tmp_path / "one", 1)
    other = bundle_with_demo(tmp_path / "two", 2)
    (tmp_path / "two" / "demo" / "write.sh").write_text(WRITE.replace("wrote", "now writes"))
    other = collect(tmp_path / "two")
    assert install(host, installed, root, tmp_path / "bundle.tar.gz").returncode == 0

    result = step(host, other, root, "create")

    assert result.returncode == 1
    assert f"gpu-cluster: {HOST}: demo: refused: the step bundle {installed.digest} is not " \
        "the one this step was rendered with" in result.stderr
    assert not (root / "srv/demo").exists()


def test_a_delete_runs_the_version_its_step_was_created_with(host, root, tmp_path):
    first = bundle_with_demo(tmp_path / "one", 1)
    assert install(host, first, root, tmp_path / "one.tar.gz").returncode == 0
    assert step(host, first, root, "create").returncode == 0
    # Newer bundles replace it, enough of them that bundle/install.sh prunes it.
    for version in (2, 3, 4, 5):
        newer = bundle_with_demo(tmp_path / f"v{version}", version)
        assert install(host, newer, root, tmp_path / f"v{version}.tar.gz").returncode == 0
    assert not (root / "var/lib/gpu-cluster/bundles" / first.digest).exists()

    # Pulumi runs the delete with the stdin the step was created with.
    deleted = step(host, first, root, "delete")

    assert deleted.returncode == 0, deleted.stderr
    assert f"gpu-cluster: {HOST}: demo: removed (version 1)" in deleted.stderr
    assert not (root / "srv/demo").exists()
    assert not (root / "var/lib/gpu-cluster/steps" / HOST / "demo").exists()


def test_a_step_without_a_bundle_on_the_host_is_refused(host, root, tmp_path):
    bundle = bundle_with_demo(tmp_path / "scripts", 1)

    result = step(host, bundle, root, "create")

    assert result.returncode == 1
    assert f"gpu-cluster: {HOST}: demo: refused: no step bundle on this host holds " \
        "bundle/run-step.sh" in result.stderr
