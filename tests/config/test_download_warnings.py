"""The preview's warnings about the site's download places (config/download_warnings.py):
what still comes from upstream when only some of them are set, each naming its key."""

from config.warnings import preview_warnings
from tests.config.loading import loads
from tests.builders import bare_metal_config

MIRROR = {"mirror": {"registry": "harbor.example.internal/proxy"}}


def place_warnings(values: dict) -> list[str]:
    # time.ntpServers' warning names aptMirror too (tests/hosts/test_configure_time.py).
    return [w for w in preview_warnings(loads(values))
            if ("aptMirror" in w or "airgapBundleSha256" in w) and "time.ntpServers" not in w]


def test_none_without_the_sites_places():
    assert place_warnings(bare_metal_config(workers=1)) == []


def test_the_ubuntu_mirror_alone_names_the_nvidia_repository_and_the_images():
    values = bare_metal_config(workers=1)
    values["packages"] = {"aptMirror": "https://apt.example.internal/ubuntu"}
    nvidia, images = place_warnings(values)
    assert nvidia.startswith("gpu-cluster:packages.aptMirror covers Ubuntu's archive only: "
                             "install-nvidia on gpu000 still reads")
    assert "set gpu-cluster:nvidia.aptMirror" in nvidia
    assert "gpu-cluster:images.mirror, or gpu-cluster:versions.airgapBundleSha256" in images
    values["nvidia"] = {"aptMirror": "https://apt.example.internal/nvidia"}
    values["images"] = MIRROR
    assert place_warnings(values) == []


def test_the_bundle_without_an_image_mirror_says_it_is_the_distributions_images_only():
    values = bare_metal_config(workers=1)
    values["versions"] = {"airgapBundleSha256": {"amd64": "a" * 64}}
    [warning] = place_warnings(values)
    assert "preloads k0s's own images only" in warning
    assert "set gpu-cluster:images.mirror" in warning
    values["images"] = MIRROR
    assert place_warnings(values) == []


def epel_warnings(values: dict) -> list[str]:
    return [w for w in preview_warnings(loads(values)) if "packages.epel" in w]


def test_epel_names_the_community_repository_its_key_and_crb():
    values = bare_metal_config(workers=1)
    assert epel_warnings(values) == []
    values["packages"] = {"epel": True}
    [warning] = epel_warnings(values)
    assert warning.startswith("gpu-cluster:packages.epel is true: configure-dnf adds EPEL 9, "
                              "the Fedora community's repository")
    assert "from Fedora's mirror list" in warning
    assert "trusting its key FF8AD1344597106ECE813B918A3872BF3228467C" in warning
    assert "enables CRB" in warning
    values["packages"]["epelMirror"] = "https://rpm.example.internal/epel"
    [warning] = epel_warnings(values)
    assert "from https://rpm.example.internal/epel, trusting" in warning
