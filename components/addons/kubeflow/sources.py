"""Where a Kubeflow stage's upstream folders come from: the vendored release (and, for the
vendored folders that name remote bases, a copy beside the stage folders with those bases
made local), a local copy, or a remote git ref."""

import os
from pathlib import Path

from components.addons.kubeflow import catalog
from config import vendored
from config.kubeflow import KubeflowSettings

KUSTOMIZATION = "kustomization.yaml"

# Beside the stage folders: the vendored folders that name remote bases, rewritten.
UPSTREAM_COPY = "upstream"


def uses_vendored(kubeflow: KubeflowSettings) -> bool:
    """The pinned release from vendor/ (a git mirror of the same tag holds the same files)."""
    return kubeflow.source.vendored


def base_reference(kubeflow: KubeflowSettings, path: str, overlay_dir: Path) -> str:
    """Where kustomize finds an upstream folder, relative to the overlay (kustomize refuses
    absolute roots): the vendored release (its rewritten copy beside the stage folders for
    the folders that name remote bases), a local copy, or a remote git URL for another ref."""
    source = kubeflow.source
    if source.path:
        return os.path.relpath(Path(source.path) / path, overlay_dir)
    if uses_vendored(kubeflow):
        root = vendored.PROJECT_DIR / catalog.VENDORED
        if _rewritten(path):
            root = overlay_dir.parent / UPSTREAM_COPY
        return os.path.relpath(root / path, overlay_dir)
    return f"{source.repository}//{path}?ref={source.ref}"


def _rewritten(path: str) -> bool:
    return any(path == folder or path.startswith(folder + "/") for folder in catalog.REWRITTEN)


def upstream_copy(kubeflow: KubeflowSettings, stages: list[catalog.Stage],
                  copy_dir: Path) -> dict[str, bytes]:
    """The files of the copy at `copy_dir` (name relative to it -> content): the vendored
    folders that name remote bases, each such URL replaced by the path of its vendored
    copy relative to the file (kustomize cannot be told to read a URL from elsewhere, and
    vendored files are never edited). Empty when no stage reads them."""
    if not uses_vendored(kubeflow) or not any(_rewritten(p) for s in stages for p in s.paths):
        return {}
    vendor = vendored.PROJECT_DIR / vendored.VENDOR_DIR
    prefix = os.path.relpath(vendored.PROJECT_DIR / catalog.VENDORED, vendor) + "/"
    files, replaced = {}, set()
    for name in vendored.pinned_sums():
        relative = name.removeprefix(prefix)
        if relative == name or not _rewritten(relative):
            continue
        data = (vendor / name).read_bytes()
        if relative.endswith(KUSTOMIZATION):
            text = data.decode()
            for url, target in catalog.LOCAL_BASES.items():
                if url in text:
                    local = os.path.relpath(vendored.PROJECT_DIR / target,
                                            (copy_dir / relative).parent)
                    text = text.replace(url, local)
                    replaced.add(url)
            for url, target in catalog.LOCAL_FILES.items():
                if url in text:
                    name = Path(target).name
                    text = text.replace(url, name)
                    # Checked against vendor/SHA256SUMS like every vendored file.
                    files[str(Path(relative).parent / name)] = (vendored.PROJECT_DIR / target).read_bytes()
                    replaced.add(url)
            data = text.encode()
        files[relative] = data
    unused = set(catalog.LOCAL_BASES) | set(catalog.LOCAL_FILES)
    if unused - replaced:
        raise ValueError(f"catalog names {sorted(unused - replaced)}, which no vendored "
                         f"kustomization under {catalog.REWRITTEN} reads")
    return files
