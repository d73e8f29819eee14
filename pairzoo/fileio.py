"""Atomic file writes: a reader (or a crash) never sees a half-written metrics file, model card or benchmark result."""

import os
import tempfile
from pathlib import Path


def write_text_atomic(path: "str | os.PathLike", text: str) -> None:
    """Write `text` to a temporary file beside `path`, flush it to disk, then rename it into place; on any failure the
    old file (if any) stays as it was and no temporary file is left behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = ["write_text_atomic"]
