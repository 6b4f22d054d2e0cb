"""The step bundle: every file a machine runs (components/scripts/ but local/), as one
content-addressed artifact. It holds no secret and no per-host value, so one bundle serves
every machine of every stack made from this checkout.

Its digest is the sha256 of its manifest, one `MODE SHA256 PATH` line a file in path
order (MODE in octal, as `find -printf %m` prints it): bundle/install.sh and
bundle/run-step.sh compute the same on the host, so what a machine holds is checked
against the name it is kept under (/var/lib/gpu-cluster/bundles/<digest>/).

It travels as a reproducible .tar.gz (the same files always give the same bytes): over
SSH a CopyToRemote uploads it and one step per machine installs it (components/hosts/
bundle_step.py); on EC2 the boot fetches it from S3 (components/aws/boot.py). Either way
only its path and hash are kept in Pulumi's state, never its text."""

import functools
import gzip
import hashlib
import io
import os
import re
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# Where every script lives: the one place (step_text reads steps from here, script_inputs
# their headers); a test points it elsewhere by patching this name.
SCRIPTS_DIR = Path(__file__).parent.parent / "scripts"
PROJECT_DIR = Path(__file__).resolve().parent.parent.parent
# Run on the machine that runs Pulumi (local.Command), never on a host.
_NOT_SHIPPED = ("local/",)
# Paths a host's shell handles unquoted (bundle/install.sh checks the same).
_PATH = re.compile(r"[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*")
# Where the program keeps the tarballs it hands to Pulumi as FileAssets, in the project:
# Pulumi runs the program there, and the asset's path, relative to it, is part of the
# state, so it is the same on every machine that runs `pulumi up`.
TARBALL_DIR = PROJECT_DIR / ".bundles"
# Where a machine keeps its bundles, one folder per digest, and `current`.
HOST_BUNDLES = "/var/lib/gpu-cluster/bundles"


@dataclass(frozen=True)
class BundleFile:
    path: str
    mode: int
    data: bytes

    @functools.cached_property
    def sha256(self) -> str:
        # Asked once a step and file: computed once.
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class Bundle:
    files: tuple[BundleFile, ...]

    @functools.cached_property
    def by_path(self) -> dict[str, BundleFile]:
        return {file.path: file for file in self.files}

    @functools.cached_property
    def manifest(self) -> str:
        return "".join(f"{file.mode:o} {file.sha256} {file.path}\n" for file in self.files)

    @functools.cached_property
    def digest(self) -> str:
        return hashlib.sha256(self.manifest.encode()).hexdigest()

    def sha256(self, path: str) -> str:
        return self.by_path[path].sha256

    def text(self, path: str) -> str:
        return self.by_path[path].data.decode()

    @functools.cached_property
    def tarball(self) -> bytes:
        """The files as a .tar.gz that is the same bytes for the same files: sorted, owned
        by root, no timestamps (gzip's included), directories 0755."""
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            folders = sorted({str(parent) for file in self.files
                              for parent in Path(file.path).parents if str(parent) != "."})
            for folder in folders:
                tar.addfile(_entry(folder, tarfile.DIRTYPE, 0o755, 0))
            for file in self.files:
                tar.addfile(_entry(file.path, tarfile.REGTYPE, file.mode, len(file.data)),
                            io.BytesIO(file.data))
        return gzip.compress(raw.getvalue(), compresslevel=9, mtime=0)

    @functools.cached_property
    def tarball_sha256(self) -> str:
        return hashlib.sha256(self.tarball).hexdigest()

    def tarball_path(self, folder: Path = TARBALL_DIR) -> str:
        """The tarball written to `folder` (once a run: every machine's upload asks; a copy
        already there is checked), its path relative to the working folder (the project,
        under Pulumi)."""
        target = folder / f"{self.digest}.tar.gz"
        if target not in _WRITTEN:
            if not (target.exists() and hashlib.sha256(target.read_bytes()).hexdigest()
                    == self.tarball_sha256):
                target.parent.mkdir(parents=True, exist_ok=True)
                # Atomic: previews run in parallel processes.
                handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
                with os.fdopen(handle, "wb") as out:
                    out.write(self.tarball)
                os.replace(temporary, target)
            _WRITTEN.add(target)
        return os.path.relpath(target)


# The tarballs this run has written or checked.
_WRITTEN: set[Path] = set()


def _entry(name: str, kind: bytes, mode: int, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size = kind, mode, size
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = 0
    return info


def script_path(relative: str) -> Path:
    """A file under components/scripts/ (or wherever SCRIPTS_DIR points)."""
    return SCRIPTS_DIR / relative


def collect(scripts_dir: Optional[Path] = None) -> Bundle:
    """Every file below `scripts_dir` (SCRIPTS_DIR by default) but local/, 0755 where the
    checkout marks it executable, else 0644."""
    scripts_dir = scripts_dir or SCRIPTS_DIR
    files = []
    # In the byte order of the paths, as the machines list them for the digest
    # (bundle/run-step.sh gpu_cluster_bundle_manifest: LC_ALL=C sort): Path objects sort
    # part by part, which puts k0s/etcd/lib.sh before k0s/etcd-quorum.sh.
    for path in sorted(scripts_dir.rglob("*"),
                       key=lambda path: path.relative_to(scripts_dir).as_posix().encode()):
        relative = path.relative_to(scripts_dir).as_posix()
        if path.is_dir() or "__pycache__" in relative or relative.startswith(_NOT_SHIPPED):
            continue
        if not _PATH.fullmatch(relative):
            raise ValueError(f"components/scripts/{relative}: a bundle path must match "
                             f"{_PATH.pattern}")
        mode = 0o755 if path.stat().st_mode & 0o100 else 0o644
        files.append(BundleFile(relative, mode, path.read_bytes()))
    return Bundle(tuple(files))


def step_bundle() -> Bundle:
    """This checkout's bundle, read once per run."""
    return _collected(SCRIPTS_DIR)


@functools.lru_cache(maxsize=2)
def _collected(scripts_dir: Path) -> Bundle:
    return collect(scripts_dir)
