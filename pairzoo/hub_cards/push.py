"""Upload an export folder to the Hugging Face Hub (`--dry-run` lists what would be sent, offline)."""

import os
import re
from pathlib import Path

from ..fileio import write_text_atomic
from .export import read_card_inputs, verify_export, write_card_inputs

_SNIPPET_REPO = re.compile(r'(\.from_pretrained\(|model=)"[^"]*"')


def checked_card(folder: Path, repo_id: str) -> str:
    """The export's README.md as the Hub reads it (`huggingface_hub.ModelCard`), checked offline: `library_name`,
    `pipeline_tag` and `license` present, `base_model` a Hub id (`org/name`) when given, `model-index` parseable
    (`model_index_to_eval_results`); a problem is a `ValueError` naming the file and the field. Returns the card with
    its usage snippet pointing at `repo_id`."""
    from huggingface_hub import ModelCard
    from huggingface_hub.repocard_data import model_index_to_eval_results

    path = folder / "README.md"
    text = path.read_text()
    try:
        data = ModelCard(text, ignore_metadata_errors=False).data.to_dict()
    except Exception as err:  # huggingface_hub raises several types for a malformed card
        raise ValueError(f"{str(path)!r}: the Hub cannot parse this model card: {err}") from err
    problems = [f"`{key}` is missing" for key in ("library_name", "pipeline_tag", "license") if not data.get(key)]
    base = data.get("base_model")
    if base is not None and (not isinstance(base, str) or base.count("/") != 1):
        problems.append(f"`base_model` {base!r} is not a Hub id (org/name)")
    if data.get("model-index") is not None:
        try:
            model_index_to_eval_results(data["model-index"])
        except Exception as err:  # KeyError/TypeError/ValueError for a malformed entry
            problems.append(f"`model-index` does not parse ({type(err).__name__}: {err})")
    if problems:
        raise ValueError(f"{str(path)!r}: model card metadata: {'; '.join(problems)}.")
    return _SNIPPET_REPO.sub(lambda m: f'{m.group(1)}"{repo_id}"', text)


def push(folder: "str | os.PathLike", repo_id: str, dry_run: bool = False, private: bool = False) -> list[str]:
    """Upload `folder` to `repo_id`; returns the relative paths sent (or that would be sent with `dry_run`).

    The folder and its card are checked first (`verify_export`, `checked_card`), and the card's usage snippet is
    rewritten to name `repo_id` just before an upload (`dry_run` only says so), as is the repo id the export recorded
    (`CARD_INPUTS_FILE`), so a later `card` re-render keeps it; in offline mode an upload is an
    `OfflineModeIsEnabled` error (a `ConnectionError`) before any request is made or anything is written.
    """
    if not isinstance(repo_id, str) or repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise ValueError(f"`repo_id` must look like 'org/name', got {repo_id!r}.")
    folder = Path(folder)
    files = [str(p.relative_to(folder)) for p in verify_export(folder)]
    card = checked_card(folder, repo_id)
    if dry_run:
        if card != (folder / "README.md").read_text():
            print(f"README.md: the usage snippet would be rewritten to name {repo_id}")
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
    write_text_atomic(folder / "README.md", card)
    inputs = read_card_inputs(folder)
    if inputs:
        write_card_inputs(folder, {**inputs, "repo_id": repo_id})
    api = HfApi()
    api.create_repo(repo_id, private=private, exist_ok=True)
    api.upload_folder(folder_path=str(folder), repo_id=repo_id, commit_message="Upload pairzoo export")
    return files
