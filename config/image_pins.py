"""Images pinned by digest (`repo:tag@sha256:<64 hex>`, the tag kept for people) or by tag
only: a tag can be moved to other content by whoever can push to the repository, a digest
cannot. The preview names the ones still pinned by tag (components/cluster.py)."""

import re

from config import versions

DIGEST = re.compile(r"[^\s@]+:[^\s@:/]+@sha256:[0-9a-f]{64}")


def tag_only(images: dict[str, str]) -> list[str]:
    """The keys of `images` (config/versions.py names) whose image has no digest."""
    return sorted(key for key, image in images.items() if not DIGEST.fullmatch(image))


def tag_only_warning(kubeflow: bool, mpi_operator: bool = True) -> str:
    """The preview's warning, or "" when every image is pinned by digest."""
    keys = tag_only(versions.DEPLOYED_IMAGES)
    parts = []
    if keys:
        parts.append(f"{len(keys)} of the {len(versions.DEPLOYED_IMAGES)} images the program "
                     "deploys are pinned by tag only, which their registry can move to other "
                     "content: "
                     + ", ".join(f"{key} ({versions.DEPLOYED_IMAGES[key]})" for key in keys)
                     + "; `python -m pins` reads their digests from the registries into "
                     "config/versions.py's IMAGE_DIGESTS")
    if mpi_operator:
        # Applied from the vendored release manifest as upstream wrote it, so by its tag.
        parts.append(f"MPI_OPERATOR_IMAGE ({versions.MPI_OPERATOR_IMAGE}) is as its vendored "
                     "release manifest writes it (by tag)")
    if kubeflow:
        parts.append("Kubeflow's images are as kubeflow/manifests " + versions.KUBEFLOW_MANIFESTS
                     + " pins them (tags; images.mirror can serve reviewed copies)")
    return "; ".join(parts)


def chart_tag(image: str, repository: str) -> str:
    """What a chart that renders `repository:tag` needs as its tag for `image`: the tag,
    with the digest when it has one (`v1@sha256:...` makes `repository:v1@sha256:...`)."""
    if not image.startswith(repository + ":"):
        raise ValueError(f"{image} is not of {repository}")
    return image[len(repository) + 1:]
