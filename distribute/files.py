"""Private files written atomically: a temporary file in the target's folder, renamed over
the target, so a reader (or a crash) never sees half a kubeconfig."""

import os
import stat
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from distribute import DistributeError

FILE_MODE = 0o600
DIR_MODE = 0o700


@dataclass
class Target:
    path: Path
    # The text found there, None when there is no file.
    text: Optional[str]
    mode: Optional[int]
    # Set when `path` was reached through a symbolic link (written through, not replaced).
    link: Optional[Path] = None


def inspect(path_arg: str) -> Target:
    path = Path(path_arg).expanduser()
    link = None
    if path.is_symlink():
        link, path = path, Path(os.path.realpath(path))
    if path.exists() and not path.is_file():
        raise DistributeError(f"{path} exists and is not a regular file")
    if not path.exists():
        return Target(path, None, None, link)
    try:
        text = path.read_text()
        mode = stat.S_IMODE(path.stat().st_mode)
    except (OSError, UnicodeDecodeError) as error:
        raise DistributeError(f"cannot read {path}: {_reason(error)}") from None
    return Target(path, text, mode, link)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Holds `<file>.lock`, the lock kubectl (client-go) takes while it writes a kubeconfig,
    so neither overwrites the other's change."""
    if not path.parent.is_dir():
        # A folder still to be created: no one else writes in it.
        yield
        return
    lock = path.with_name(path.name + ".lock")
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE))
    except FileExistsError:
        raise DistributeError(f"{lock} exists: another program (kubectl) is writing {path}; "
                              "retry, or remove the lock if it is stale") from None
    except OSError as error:
        raise DistributeError(f"cannot lock {path}: {_reason(error)}") from None
    try:
        yield
    finally:
        try:
            os.unlink(lock)
        except OSError:
            pass


def _make_dirs(folder: Path) -> list[Path]:
    """Creates the missing folders, each 0700 whatever the umask; returns them."""
    missing = []
    current = folder
    while not current.exists():
        missing.append(current)
        current = current.parent
    for created in reversed(missing):
        try:
            created.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass
        os.chmod(created, DIR_MODE)
    return list(reversed(missing))


def write_private(target: Target, text: str) -> list[str]:
    """Writes `text` to the target with mode 0600, atomically. Returns notes for the user
    (created folders, a mode that was narrowed)."""
    notes = []
    try:
        for created in _make_dirs(target.path.parent):
            notes.append(f"created {created} (mode 0700)")
        handle, temporary = tempfile.mkstemp(dir=target.path.parent,
                                             prefix=f".{target.path.name}.", suffix=".tmp")
    except OSError as error:
        raise DistributeError(f"cannot write in {target.path.parent}: {_reason(error)}") from None
    try:
        with os.fdopen(handle, "w") as stream:
            # mkstemp creates the file 0600; fchmod makes sure whatever the platform does.
            os.fchmod(stream.fileno(), FILE_MODE)
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        if target.text is not None:
            _keep_owner(temporary, target.path)
        os.replace(temporary, target.path)
    except BaseException as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(error, OSError):
            raise DistributeError(f"cannot write {target.path}: {_reason(error)}; "
                                  "the file is unchanged") from None
        raise
    _sync_dir(target.path.parent)
    if target.mode is not None and target.mode != FILE_MODE:
        notes.append(f"{target.path} had mode {target.mode:04o}, now {FILE_MODE:04o}")
    return notes


def _keep_owner(temporary: str, path: Path) -> None:
    """The replaced file's owner, when it is not ours (e.g. run with sudo for a user)."""
    found = path.stat()
    if (found.st_uid, found.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.chown(temporary, found.st_uid, found.st_gid)
        except PermissionError:
            pass


def _sync_dir(folder: Path) -> None:
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return type(error).__name__
