"""Upload an export folder to the Hugging Face Hub (`--dry-run` lists what would be sent, offline)."""

import os
from pathlib import Path

from .export import verify_export


def push(folder: "str | os.PathLike", repo_id: str, dry_run: bool = False, private: bool = False) -> list[str]:
    """Upload `folder` to `repo_id`; returns the relative paths sent (or that would be sent with `dry_run`).

    The folder is checked first (`verify_export`); in offline mode an upload is an `OfflineModeIsEnabled` error
    (a `ConnectionError`) before any request is made.
    """
    if not isinstance(repo_id, str) or repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise ValueError(f"`repo_id` must look like 'org/name', got {repo_id!r}.")
    folder = Path(folder)
    files = [str(p.relative_to(folder)) for p in verify_export(folder)]
    if dry_run:
        for path in files:
            print(f"would upload {path} ({(folder / path).stat().st_size:,} bytes) to {repo_id}")
        return files
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import OfflineModeIsEnabled

    if constants.is_offline_mode():
        raise OfflineModeIsEnabled(
            f"cannot upload {str(folder)!r} to {repo_id}: Hugging Face Hub offline mode is on (HF_HUB_OFFLINE or "
            "TRANSFORMERS_OFFLINE is set); unset it to upload, or list what would be sent with --dry-run "
            "(dry_run=True)."
        )
    api = HfApi()
    api.create_repo(repo_id, private=private, exist_ok=True)
    api.upload_folder(folder_path=str(folder), repo_id=repo_id, commit_message="Upload pairzoo export")
    return files
