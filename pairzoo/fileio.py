"""Atomic file writes: a reader (or a crash) never sees a half-written metrics file, model card, benchmark result or
export folder.

Temporary files and folders are created with the modes a plain `open`/`mkdir` gives (0644/0755 under the usual umask
0022), not the private 0600/0700 of `tempfile.mkstemp`/`mkdtemp`, which a rename would carry into place and so hide
the result from the other users of a shared file system.
"""

import os
import shutil
import stat
import uuid
from pathlib import Path


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


__all__ = [
    "check_output_folder",
    "give_plain_modes",
    "make_temporary_folder",
    "replace_folder",
    "temporary_sibling",
    "write_text_atomic",
]
