"""Atomic file writes: a reader (or a crash) never sees a half-written metrics file, model card, benchmark result or
export folder.

Temporary files and folders are created with the modes a plain `open`/`mkdir` gives (0644/0755 under the usual umask
0022), not the private 0600/0700 of `tempfile.mkstemp`/`mkdtemp`, which a rename would carry into place and so hide
the result from the other users of a shared file system.

A run's output folder is claimed with `folder_lock` (a `.pairzoo.lock` file naming the process and host), so a second
run into it is refused while the first runs; `remove_leftovers` clears what a writer killed mid-write left behind.
"""

import json
import os
import re
import shutil
import socket
import stat
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from transformers.utils import logging

try:  # advisory locks (POSIX); without them (Windows) the lock file's content decides alone
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None

logger = logging.get_logger(__name__)

LOCK_NAME = ".pairzoo.lock"
# `temporary_sibling`'s names: `.NAME.TAG.<32 hex digits>`
_SIBLING = re.compile(r"^\.(?P<name>.+)\.(?P<tag>tmp|old)\.[0-9a-f]{32}$")


def temporary_sibling(path: "str | os.PathLike", tag: str = "tmp") -> Path:
    """An unused hidden name beside `path` (`.NAME.TAG.RANDOM`), for a file or folder later renamed to `path`."""
    path = Path(path)
    return path.parent / f".{path.name}.{tag}.{uuid.uuid4().hex}"


def make_temporary_folder(path: "str | os.PathLike") -> Path:
    """Create an empty folder beside `path` (see `temporary_sibling`) with a plain `mkdir`'s mode (umask applies)."""
    tmp = temporary_sibling(path)
    tmp.mkdir()
    return tmp


def give_plain_modes(folder: "str | os.PathLike") -> None:
    """Give every file under `folder` the mode a plain `open` gives (0644 under umask 0022), as some writers create
    private files (safetensors writes 0600). The mode comes from `folder`'s own, which `mkdir` derived from the umask
    (and the file system's defaults), so no umask has to be read."""
    folder = Path(folder)
    mode = stat.S_IMODE(folder.stat().st_mode) & 0o666
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(mode)


def replace_folder(new: "str | os.PathLike", target: "str | os.PathLike") -> None:
    """Put the complete folder `new` in place of `target` (which may not exist), so that at every moment either the
    old or the new complete folder is at `target`.

    An existing `target` is first renamed aside (`temporary_sibling(target, "old")`); if renaming `new` into place
    then fails, the old folder is renamed back and the error propagates, with `new` left where it is for the caller
    to remove. After a successful swap the old folder is deleted (a failure to delete it is ignored: the swap is
    done). `new` must be on `target`'s file system, as a folder from `make_temporary_folder(target)` is.
    """
    new, target = Path(new), Path(target)
    if not os.path.lexists(target):
        os.replace(new, target)
        return
    old = temporary_sibling(target, "old")
    os.replace(target, old)
    try:
        os.replace(new, target)
    except BaseException:
        os.replace(old, target)
        raise
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old, ignore_errors=True)
    else:  # a file or a link where the folder goes: remove it, never what a link points at
        old.unlink(missing_ok=True)


def write_text_atomic(path: "str | os.PathLike", text: str) -> None:
    """Write `text` to a temporary file beside `path`, flush it to disk, then rename it into place; on any failure the
    old file (if any) stays as it was and no temporary file is left behind. The file gets a plain `open`'s mode."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    handle = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_output_folder(path: "str | os.PathLike", flag: str = "--output_dir") -> Path:
    """A ValueError naming `flag` unless `path` is a folder this process can write into, or a folder it can create
    (every existing parent a writable folder); nothing is created. Returns `path` as a Path."""
    path = Path(path)
    for folder in (path, *path.parents):
        if not os.path.lexists(folder):
            continue
        if not folder.is_dir():
            where = "is a file" if folder == path else f"is under {str(folder)!r}, which is a file"
            raise ValueError(f"`{flag}` {str(path)!r} {where}, not a folder.")
        if not os.access(folder, os.W_OK | os.X_OK):
            where = "is not writable" if folder == path else f"cannot be created: {str(folder)!r} is not writable"
            raise ValueError(f"`{flag}` {str(path)!r} {where}.")
        return path
    return path


class FolderInUseError(FileExistsError):
    """The folder's lock is held by a run that is still running (or by a run on another host)."""


def _lock_owner(path: Path) -> "dict | None":
    """The `{"pid", "host", "started"}` a lock file records; None when it is missing, empty or unreadable."""
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int) or not isinstance(owner.get("host"), str):
        return None
    return owner


def _is_running(owner: dict) -> bool:
    """Whether the process a lock names may still run: alive on this host, or on another host (which this process
    cannot see, so it counts as running; so does any process on Windows, where `os.kill` cannot probe one)."""
    if owner["host"] != socket.gethostname() or os.name == "nt":
        return True
    try:
        os.kill(owner["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _in_use(folder: Path, flag: str, owner: "dict | None") -> FolderInUseError:
    who = "another run"
    if owner is not None:
        started = f", started {owner['started']}" if owner.get("started") else ""
        who += f" (pid {owner['pid']} on host {owner['host']!r}{started})"
    return FolderInUseError(
        f"`{flag}` {str(folder)!r} is in use by {who}: wait for it to end or choose another {flag}. If no run "
        f"uses it any more, delete {str(folder / LOCK_NAME)!r}."
    )


def check_folder_free(folder: "str | os.PathLike", flag: str = "--output_dir") -> None:
    """A `FolderInUseError` naming `flag`, the folder and the other run's process id when `folder`'s lock names a run
    that is still running (see `folder_lock`); reads only, creates nothing."""
    folder = Path(folder)
    owner = _lock_owner(folder / LOCK_NAME)
    if owner is not None and _is_running(owner):
        raise _in_use(folder, flag, owner)


def _created_folders(folder: Path) -> list[Path]:
    """The folders, innermost first, that creating `folder` would create."""
    created = []
    for path in (folder, *folder.parents):
        if os.path.lexists(path):
            break
        created.append(path)
    return created


@contextmanager
def folder_lock(folder: "str | os.PathLike", flag: str = "--output_dir") -> Iterator[Path]:
    """Hold `folder`'s lock for the block: the file `folder/.pairzoo.lock` records this process's id, host and start
    time, and an advisory lock (`flock`) is held on it. While a run holds it (or its file names a process that still
    runs on this host, or one on another host), entering raises a `FolderInUseError` naming `flag`, the folder and
    that process, and nothing is created. A lock whose process no longer runs on this host (a killed run) is taken
    over, with a warning. Creates `folder` if needed; at the end, also on an exception, the lock file is removed, and
    so are the folders entering created when the block left them empty; an existing folder whose entries the block
    left as they were (a failed run that removed what it wrote) gets its timestamps back. Yields `folder` as a
    Path."""
    folder = Path(folder)
    created = _created_folders(folder)
    folder.mkdir(parents=True, exist_ok=True)
    entries, times = (None, None) if created else (_entries(folder), folder.stat())
    path = folder / LOCK_NAME
    try:
        handle = _take_lock(folder, path, flag)
    except BaseException:
        _remove_empty(created)
        raise
    try:
        yield folder
    finally:
        path.unlink(missing_ok=True)  # before unlocking: a run waiting on this file then retries on a new one
        os.close(handle)
        _remove_empty(created)
        if times is not None and _entries(folder) == entries:
            os.utime(folder, ns=(times.st_atime_ns, times.st_mtime_ns))


def _entries(folder: Path) -> "set[tuple[str, int]]":
    """The names and inodes of `folder`'s entries (a file replaced by a rename has a new inode)."""
    with os.scandir(folder) as found:
        return {(entry.name, entry.inode()) for entry in found}


def _take_lock(folder: Path, path: Path, flag: str) -> int:
    """The open, locked lock file of `folder`, now naming this process (see `folder_lock`)."""
    while True:
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise _in_use(folder, flag, _lock_owner(path)) from None
                try:
                    current = os.stat(path)
                except FileNotFoundError:
                    current = None
                if current is None or not os.path.samestat(os.fstat(handle), current):
                    os.close(handle)  # its holder released (removed) it while this process waited: open the new one
                    continue
            owner = _lock_owner(path)
            if owner is not None and _is_running(owner):
                raise _in_use(folder, flag, owner)
            if owner is not None:
                logger.warning(
                    "%s %r: taking over the lock of run pid %d on host %r, which is no longer running.",
                    flag,
                    str(folder),
                    owner["pid"],
                    owner["host"],
                )
            record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
            os.ftruncate(handle, 0)
            os.write(handle, json.dumps(record).encode())  # at offset 0: nothing was read through `handle`
            os.fsync(handle)
            return handle
        except BaseException:
            os.close(handle)
            raise


def _remove_empty(folders: list[Path]) -> None:
    """Remove `folders` (innermost first) while they are empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def remove_leftovers(folder: "str | os.PathLike") -> "tuple[list[str], list[str]]":
    """Clear what writers killed mid-write left in `folder`: the hidden `.NAME.tmp.*` and `.NAME.old.*` siblings of
    `temporary_sibling` (a half-written export or metrics file; an export moved aside to be replaced). An `.old`
    folder whose `NAME` is missing is the last complete version, killed before its replacement was renamed into
    place: it is renamed back to `NAME` (the newest one, when there are several); every other leftover is removed.
    Call it while holding `folder_lock`, so no other writer is mid-write. Returns the names removed and restored."""
    folder = Path(folder)
    if not folder.is_dir():
        return [], []
    found = [(entry, match) for entry in folder.iterdir() if (match := _SIBLING.match(entry.name))]
    removed, restored = [], []
    for entry, match in sorted(found, key=lambda item: -item[0].lstat().st_mtime_ns):
        target = folder / match["name"]
        if match["tag"] == "old" and not os.path.lexists(target):
            os.replace(entry, target)
            restored.append(match["name"])
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed.append(entry.name)
    return sorted(removed), restored


__all__ = [
    "LOCK_NAME",
    "FolderInUseError",
    "check_folder_free",
    "check_output_folder",
    "folder_lock",
    "give_plain_modes",
    "make_temporary_folder",
    "remove_leftovers",
    "replace_folder",
    "temporary_sibling",
    "write_text_atomic",
]
