"""`python -m pins` against a real registry: Distribution's with TLS and token auth on
loopback, images pushed and pulled by the real skopeo."""

import hashlib
import importlib.util
import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from config import versions
from pins import table
from pins.__main__ import VERSIONS, run
from pins.registry import Client, RegistryError, parse
from tests.builders import require_tool
from tests.pins.registry_server import Registry, oci_layout

pytestmark = pytest.mark.tools


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    require_tool("docker-registry")
    require_tool("skopeo")
    server = Registry(tmp_path_factory.mktemp("registry")).start()
    yield server
    server.stop()


def load(path: Path):
    spec = importlib.util.spec_from_file_location("_pinned_versions", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def push(registry, tmp_path, name: str, content: bytes) -> str:
    """Push a two-platform image as `library/busybox:1.37.0`; the digest of its index."""
    index = oci_layout(tmp_path / name, "1.37.0", content)
    registry.push(tmp_path / name, "1.37.0", "library/busybox")
    return "sha256:" + hashlib.sha256(index).hexdigest()


def test_a_tag_is_pinned_by_its_multi_arch_index_and_pulls_by_that_digest(registry, tmp_path):
    digest = push(registry, tmp_path, "first", b"one")
    copy = tmp_path / "versions.py"
    shutil.copy(VERSIONS, copy)
    image = f"{registry.host}/library/busybox:1.37.0"
    out = io.StringIO()

    assert run({"BUSYBOX_IMAGE": image}, copy, Client(verify=str(registry.ca)), False, out) == 0

    assert out.getvalue() == f"pinned BUSYBOX_IMAGE: {image}@{digest}\n"
    # The rewritten file is still the module the program imports, and pins the image.
    pinned = load(copy)
    assert pinned.pinned(image) == f"{image}@{digest}"
    assert pinned.IMAGE_DIGESTS == {**versions.IMAGE_DIGESTS, image: digest}
    # The digest is the index's (both platforms), which skopeo pulls by that digest.
    raw = registry.raw(f"library/busybox@{digest}")
    assert "sha256:" + hashlib.sha256(raw).hexdigest() == digest
    assert b'"arm64"' in raw and b'"amd64"' in raw


def test_check_names_a_moved_tag_and_writes_nothing(registry, tmp_path):
    old = push(registry, tmp_path, "old", b"before")
    new = push(registry, tmp_path, "new", b"after")
    copy = tmp_path / "versions.py"
    shutil.copy(VERSIONS, copy)
    image = f"{registry.host}/library/busybox:1.37.0"
    out = io.StringIO()

    assert run({"BUSYBOX_IMAGE": f"{image}@{old}"}, copy, Client(verify=str(registry.ca)),
               True, out) == 1

    assert out.getvalue().startswith(f"moved BUSYBOX_IMAGE: {image} names {new} now, "
                                     f"pinned {old}")
    assert copy.read_text() == VERSIONS.read_text()


def test_an_unreachable_registry_is_reported_per_image_and_fails(tmp_path):
    copy = tmp_path / "versions.py"
    shutil.copy(VERSIONS, copy)
    out = io.StringIO()
    # Port 9 (discard) on loopback: nothing listens there.
    named = {"A_IMAGE": "127.0.0.1:9/a/b:v1", "B_IMAGE": "127.0.0.1:9/c:v2"}

    assert run(named, copy, Client(), False, out) == 1

    lines = out.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == ["could not read A_IMAGE",
                                                       "could not read B_IMAGE"]
    assert copy.read_text() == VERSIONS.read_text()


def test_the_command_speaks_when_it_cannot_reach_any_registry():
    """Offline (no network in a namespace of its own), --check names every image it could
    not read and exits 1: it never goes silent."""
    result = subprocess.run(["unshare", "-rn", sys.executable, "-m", "pins", "--check"],
                            capture_output=True, text=True, timeout=120,
                            cwd=VERSIONS.parents[1])
    if "unshare failed" in result.stderr:
        pytest.skip(result.stderr)
    assert result.returncode == 1, result.stderr
    names = {line.split()[3] for line in result.stdout.splitlines()}
    assert names == set({**versions.DEPLOYED_IMAGES, **versions.VALIDATE_IMAGES}), result.stdout


@pytest.mark.parametrize("image, expected", [
    # distribution/reference normalize.go: Docker Hub by default, library/ for one part.
    ("busybox:1.37.0", ("docker.io", "library/busybox", "registry-1.docker.io")),
    ("ljishen/fio:3.36", ("docker.io", "ljishen/fio", "registry-1.docker.io")),
    ("docker.io/grafana/grafana:13.2.0", ("docker.io", "grafana/grafana",
                                          "registry-1.docker.io")),
    ("nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3", ("nvcr.io", "nvidia/k8s/dcgm-exporter",
                                                "nvcr.io")),
    ("127.0.0.1:5000/a/b:v1", ("127.0.0.1:5000", "a/b", "127.0.0.1:5000")),
    ("localhost/a:v1", ("localhost", "a", "localhost")),
])
def test_references_are_read_as_the_container_runtimes_read_them(image, expected):
    reference = parse(image)
    assert (reference.registry, reference.repository, reference.api_host) == expected


@pytest.mark.parametrize("image", ["busybox", "busybox@sha256:" + "0" * 64, "Busybox:1",
                                   "busybox:1@sha256:abc", "a b:1"])
def test_a_reference_without_a_tag_or_malformed_is_refused(image):
    with pytest.raises(RegistryError):
        parse(image)


def test_the_table_rewrites_only_its_own_lines(tmp_path):
    copy = tmp_path / "versions.py"
    shutil.copy(VERSIONS, copy)
    first = next(iter(versions.IMAGE_DIGESTS))
    table.write(copy, {first: "sha256:" + "1" * 64, "r/new:v1": "sha256:" + "2" * 64}, "note")
    before, after = VERSIONS.read_text().splitlines(), copy.read_text().splitlines()
    changed = [line for line in after if line not in before]
    assert changed == [f'    "{first}": "sha256:{"1" * 64}",', "    # note",
                       f'    "r/new:v1": "sha256:{"2" * 64}",']
    assert table.read(copy)["r/new:v1"] == "sha256:" + "2" * 64
