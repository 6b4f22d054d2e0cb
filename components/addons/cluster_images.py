"""Every image the cluster pulls, by where it comes from: the distribution's own (its pinned
release's list, config/versions.py release_images), the add-ons' (config/versions.py, the
vendored MPI operator), Kubeflow's (the vendored kubeflow/manifests folders of its stages) and
those of the checks users run (acceptance files, `python -m validate`). The image mirror
covers their registries (mirror_upstreams); the preview lists them in
build/<stack>/images.txt."""

import functools
import re
from collections.abc import Iterable, Sequence

import yaml

from components.addons.kubeflow import catalog
from config import versions
from config.images import COMMON_UPSTREAMS, ImageMirror, split_registry
from config.kubernetes import KubernetesSettings
from config.vendored import PROJECT_DIR, VENDOR_DIR

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Pods `python -m validate` starts (never applied by the program).
VALIDATE_IMAGES = (versions.DCGM_IMAGE, versions.FIO_IMAGE, versions.IPERF3_IMAGE)
# The vendored folders Kubeflow's stages and their remote bases are read from.
_KUBEFLOW_VENDORED = (catalog.VENDORED, f"{VENDOR_DIR}/argo-workflows-{versions.ARGO_WORKFLOWS}",
                      f"{VENDOR_DIR}/jobset-{versions.JOBSET}")


def images_in(documents: Iterable) -> set[str]:
    """Every `image` string in YAML documents (a schema's `image:` is an object, not text),
    and Helm-style {repository, tag} image values."""
    found: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "image" and isinstance(item, str) and item:
                    found.add(item)
                elif key == "image" and isinstance(item, dict) and isinstance(
                        item.get("repository"), str) and item.get("tag"):
                    found.add(f"{item['repository']}:{item['tag']}")
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
    for document in documents:
        walk(document)
    return found


def _name(image: str) -> str:
    """The repository of a reference, without tag or digest."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


# An `image:` field with a scalar value in YAML text (a schema's `image:` opens a mapping).
_IMAGE_FIELD = re.compile(r"""^[ \t-]*image:[ \t]*["']?([^\s"'{}#]+)["']?[ \t]*$""", re.M)


def images_in_text(text: str) -> set[str]:
    """The `image:` values of YAML text, without parsing it (large CRDs take seconds)."""
    return set(_IMAGE_FIELD.findall(text))


@functools.lru_cache(maxsize=None)
def _kubeflow_references() -> dict[str, str]:
    """Repository -> reference with tag (or digest), from the vendored files: kustomize's
    `images:` entries first (what the folders set), then `image:` fields with a real tag."""
    from_fields: dict[str, str] = {}
    from_kustomize: dict[str, str] = {}
    for folder in _KUBEFLOW_VENDORED:
        for path in sorted((PROJECT_DIR / folder).rglob("*.yaml")):
            text = path.read_text()
            for image in sorted(images_in_text(text)):
                name = _name(image)
                if image != name and not image.endswith(":dummy"):
                    from_fields.setdefault(name, image)
            if path.name != "kustomization.yaml" or "images:" not in text:
                continue
            for entry in (yaml.load(text, Loader=_LOADER) or {}).get("images") or []:
                if not isinstance(entry, dict) or not entry.get("name"):
                    continue
                name = entry.get("newName") or entry["name"]
                ref = (f"{name}@{entry['digest']}" if entry.get("digest") else
                       f"{name}:{entry['newTag']}" if entry.get("newTag") else None)
                if ref:
                    from_kustomize.setdefault(entry["name"], ref)
    return {**from_fields, **from_kustomize}


def kubeflow_images(stage_names: Iterable[str]) -> list[str]:
    """The images of the named stages, with the tag their folders set (the name alone
    where none is found: kustomize sets it at `pulumi up`)."""
    wanted = set(stage_names)
    references = _kubeflow_references()
    names = {name for stage in _all_stages() if stage.name in wanted
             for name in catalog.images_of(stage)}
    return sorted(references.get(name, name) for name in names)


def _all_stages() -> list[catalog.Stage]:
    return [value for value in vars(catalog).values() if isinstance(value, catalog.Stage)] + [
        stage for stage in catalog.stages_for(_EVERY_COMPONENT)]


@functools.lru_cache(maxsize=None)
def mpi_operator_images() -> tuple[str, ...]:
    return tuple(sorted(images_in_text((PROJECT_DIR / versions.MPI_OPERATOR_MANIFEST).read_text())))


def distribution_images(kubernetes: KubernetesSettings, cni: str,
                        nllb: bool = False) -> tuple[str, ...]:
    return versions.release_images(kubernetes.distribution, kubernetes.version, cni, nllb)


def known_images(kubernetes: KubernetesSettings, cni: str) -> list[str]:
    """Every image any part of a cluster of this distribution may pull, whatever is on."""
    every_kubeflow = {name for names in catalog.IMAGES.values() for name in names}
    return sorted({*distribution_images(kubernetes, cni, nllb=True),
                   *versions.DEPLOYED_IMAGES.values(),
                   *mpi_operator_images(), *every_kubeflow, *VALIDATE_IMAGES})


def mirror_upstreams(mirror: ImageMirror, images: Sequence[str]) -> tuple[str, ...]:
    """The registries nodes send through the mirror: the common ones, those of `images`,
    and those the mirror's config names."""
    return tuple(sorted({*COMMON_UPSTREAMS, *(split_registry(image)[0] for image in images),
                         *mirror.registries, *mirror.upstreams}))


def _every_component():
    from config.kubeflow import DEFAULT_COMPONENTS, KubeflowSettings
    return KubeflowSettings(components=DEFAULT_COMPONENTS)


_EVERY_COMPONENT = _every_component()
