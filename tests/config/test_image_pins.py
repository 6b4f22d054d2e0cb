"""Images by digest with the tag kept for people; the preview names those pinned by tag only."""

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
                                 "PROMETHEUS_IMAGE", "KUBE_STATE_METRICS_IMAGE", "GRAFANA_IMAGE"])
def test_the_images_with_a_published_digest_are_pinned_by_it(key):
    image = versions.DEPLOYED_IMAGES[key]
    assert DIGEST.fullmatch(image), image
    assert versions.IMAGE_DIGESTS[image.split("@")[0]] == image.split("@")[1]


def test_every_digest_in_the_table_pins_an_image_and_none_is_written_elsewhere():
    images = {**versions.DEPLOYED_IMAGES, **versions.VALIDATE_IMAGES}
    pinned = {image.split("@")[0] for image in images.values() if "@" in image}
    assert pinned == set(versions.IMAGE_DIGESTS)
    assert all(DIGEST.fullmatch(f"{image}@{digest}")
               for image, digest in versions.IMAGE_DIGESTS.items())
    # Digests live in the table only: the versions file names none outside it.
    text = Path(versions.__file__).read_text()
    table = text[text.index("# --- pins: digests ---"):text.index("# --- end of pins ---")]
    assert text.count("sha256:") == table.count("sha256:") + text.count("@sha256:...")


def test_the_warning_names_every_image_pinned_by_tag_only():
    keys = tag_only(versions.DEPLOYED_IMAGES)
    assert "KUBE_STATE_METRICS_IMAGE" not in keys
    assert "BUSYBOX_IMAGE" in keys
    warning = tag_only_warning(kubeflow=False)
    assert f"{len(keys)} of the {len(versions.DEPLOYED_IMAGES)} images" in warning
    for key in keys:
        assert f"{key} ({versions.DEPLOYED_IMAGES[key]})" in warning
    assert "Kubeflow" not in warning
    assert "kubeflow/manifests 26.03 pins them" in tag_only_warning(kubeflow=True)


def test_no_warning_when_every_image_has_a_digest(monkeypatch):
    monkeypatch.setattr(versions, "DEPLOYED_IMAGES", {"A": "r/a:v1" + DIGEST_SUFFIX})
    assert tag_only_warning(kubeflow=False) == ""


@pytest.mark.parametrize("stack", ["lab"])
def test_the_preview_prints_the_warning(stack):
    from tests.builders import example_plan
    plan = example_plan(stack)
    warnings = plan.warnings
    assert any("pinned by tag only" in str(w) for w in warnings), warnings[:5]
