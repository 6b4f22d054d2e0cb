"""Images by digest with the tag kept for people; the preview names those pinned by tag only."""

import re
from pathlib import Path

import pytest

from config import versions
from config.image_pins import DIGEST, tag_only, tag_only_warning

DIGEST_SUFFIX = "@sha256:" + "0123456789abcdef" * 4


def test_a_digest_pin_keeps_its_tag_and_is_matched_whole():
    assert DIGEST.fullmatch("registry.k8s.io/x/y:v1" + DIGEST_SUFFIX)
    for image in ("registry.k8s.io/x/y:v1", "registry.k8s.io/x/y" + DIGEST_SUFFIX,
                  "registry.k8s.io/x/y:v1" + DIGEST_SUFFIX.upper().replace("SHA", "sha"),
                  "registry.k8s.io/x/y:v1" + DIGEST_SUFFIX + "0", "x:v1@sha256:abc"):
        assert not DIGEST.fullmatch(image), image


@pytest.mark.parametrize("key", ["NVIDIA_DEVICE_PLUGIN_IMAGE", "DCGM_EXPORTER_IMAGE",
                                 "PROMETHEUS_IMAGE", "KUBE_STATE_METRICS_IMAGE", "GRAFANA_IMAGE",
                                 "NFS_SUBDIR_PROVISIONER_IMAGE", "BUSYBOX_IMAGE",
                                 "LOCAL_PATH_PROVISIONER_IMAGE", "CLOUD_PROVIDER_AWS_IMAGE",
                                 "CLUSTER_AUTOSCALER_IMAGE"])
def test_the_images_with_a_published_digest_are_pinned_by_it(key):
    image = versions.DEPLOYED_IMAGES[key]
    assert DIGEST.fullmatch(image), image
    assert versions.IMAGE_DIGESTS[image.split("@")[0]] == image.split("@")[1]


# The images whose tag is a version pin of its own: the digest must belong to that tag.
VERSION_OF = {
    "NVIDIA_DEVICE_PLUGIN_IMAGE": versions.NVIDIA_DEVICE_PLUGIN,
    "KUEUE_IMAGE": versions.KUEUE,
    "CLUSTER_AUTOSCALER_IMAGE": versions.CLUSTER_AUTOSCALER,
    "EFS_CSI_DRIVER_IMAGE": versions.EFS_CSI_DRIVER,
    "NFS_SUBDIR_PROVISIONER_IMAGE": versions.NFS_SUBDIR_PROVISIONER,
    "LOCAL_PATH_PROVISIONER_IMAGE": versions.LOCAL_PATH_PROVISIONER,
    "CLOUD_PROVIDER_AWS_IMAGE": versions.CLOUD_PROVIDER_AWS,
}


@pytest.mark.parametrize("key", sorted(VERSION_OF))
def test_a_digest_belongs_to_the_tag_of_the_version_pin(key):
    image = versions.DEPLOYED_IMAGES[key]
    tagged = image.split("@")[0]
    assert tagged.rsplit(":", 1)[1] == VERSION_OF[key], image
    # The table's line is keyed by that tag, so bumping the version drops the old digest.
    assert image == versions.pinned(tagged)


def test_every_digest_in_the_table_says_where_it_came_from():
    """Each line of the table sits under a comment that names its source: an upstream file at
    a commit, public repositories that pin the same tag, or a `python -m pins` run."""
    text = Path(versions.__file__).read_text().splitlines()
    block = text[text.index("    # --- pins: digests ---") + 1:
                 text.index("    # --- end of pins ---")]
    source = re.compile(r"commit [0-9a-f]{7,40}\b|public repositories|`python -m pins` on "
                        r"\d{4}-\d\d-\d\d")
    is_comment = [line.lstrip().startswith("#") for line in block]
    for index, line in enumerate(block):
        if is_comment[index]:
            continue
        # Up past the entries that share the comment (the tool's groups), then the comment.
        end = index
        while end > 0 and not is_comment[end - 1]:
            end -= 1
        start = end
        while start > 0 and is_comment[start - 1]:
            start -= 1
        assert source.search(" ".join(block[start:end])), f"no source for: {line.strip()}"


def test_the_warning_names_every_image_pinned_by_tag_only():
    keys = tag_only(versions.DEPLOYED_IMAGES)
    assert "KUBE_STATE_METRICS_IMAGE" not in keys and "BUSYBOX_IMAGE" not in keys
    assert "KUEUE_IMAGE" in keys
    warning = tag_only_warning(kubeflow=False)
    assert f"{len(keys)} of the {len(versions.DEPLOYED_IMAGES)} images" in warning
    for key in keys:
        assert f"{key} ({versions.DEPLOYED_IMAGES[key]})" in warning
    assert "Kubeflow" not in warning
    assert "kubeflow/manifests 26.03 pins them" in tag_only_warning(kubeflow=True)


def test_no_warning_when_every_image_has_a_digest(monkeypatch):
    monkeypatch.setattr(versions, "DEPLOYED_IMAGES", {"A": "r/a:v1" + DIGEST_SUFFIX})
    assert tag_only_warning(kubeflow=False, mpi_operator=False) == ""


@pytest.mark.parametrize("stack", ["lab"])
def test_the_preview_prints_the_warning(stack):
    from tests.builders import example_plan
    plan = example_plan(stack)
    warnings = plan.warnings
    assert any("pinned by tag only" in str(w) for w in warnings), warnings[:5]


def test_the_mpi_operator_image_is_the_vendored_manifest_s_and_the_warning_names_it():
    from components.addons.cluster_images import mpi_operator_images
    assert mpi_operator_images() == (versions.MPI_OPERATOR_IMAGE,)
    assert not DIGEST.fullmatch(versions.MPI_OPERATOR_IMAGE)
    assert f"MPI_OPERATOR_IMAGE ({versions.MPI_OPERATOR_IMAGE})" in tag_only_warning(False)
    assert "MPI_OPERATOR_IMAGE" not in tag_only_warning(False, mpi_operator=False)
