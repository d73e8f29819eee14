"""Upload an export folder to the Hugging Face Hub (`--dry-run` lists what would be sent, offline)."""

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from ..fileio import write_text_atomic
from .export import CARD_INPUTS_FILE, card_inputs_text, read_card_inputs, verify_export

# Where a usage snippet names the export: the first argument of `from_pretrained`, `CrossEncoder` and
# `SentenceTransformer`, and a pipeline's `model=`, each a double-quoted string (escapes included).
_SNIPPET_REPO = re.compile(r'(\.from_pretrained\(|\bmodel=|\bCrossEncoder\(|\bSentenceTransformer\()"(?:[^"\\]|\\.)*"')

# The card's paragraph saying that the snippets load the export folder, true only before a push.
_FOLDER_SENTENCE = re.compile(r"^The snippets load this export from the folder .* it uploads to\.\n\n", re.MULTILINE)


def checked_card(folder: Path, repo_id: str) -> str:
    """The export's README.md as the Hub reads it (`huggingface_hub.ModelCard`), checked offline: `library_name` and
    `license` present, `pipeline_tag` a string when given (a model no Hub task fits has none), `base_model` a Hub id
    (`org/name`) when given, `model-index` parseable (`model_index_to_eval_results`); a problem is a `ValueError`
    naming the file and the field. Returns the card with its usage snippets (transformers and sentence-transformers)
    loading from `repo_id` instead of the export folder."""
    from huggingface_hub import ModelCard
    from huggingface_hub.repocard_data import model_index_to_eval_results

    path = folder / "README.md"
    text = path.read_text()
    try:
        data = ModelCard(text, ignore_metadata_errors=False).data.to_dict()
    except Exception as err:  # huggingface_hub raises several types for a malformed card
        raise ValueError(f"{str(path)!r}: the Hub cannot parse this model card: {err}") from err
    problems = [f"`{key}` is missing" for key in ("library_name", "license") if not data.get(key)]
    if "pipeline_tag" in data and not isinstance(data["pipeline_tag"], str):
        problems.append(f"`pipeline_tag` {data['pipeline_tag']!r} is not a Hub task name")
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
    text = _FOLDER_SENTENCE.sub("", text)
    return _SNIPPET_REPO.sub(lambda m: m.group(1) + json.dumps(repo_id), text)


def push(folder: "str | os.PathLike", repo_id: str, dry_run: bool = False, private: bool = False) -> list[str]:
    """Upload `folder` to `repo_id`; returns the relative paths sent (or that would be sent with `dry_run`).

    The folder and its card are checked first (`verify_export`, which loads it as its users will; `checked_card`).
    The card's usage snippet is rewritten to name `repo_id` in what is uploaded (`dry_run` only says so), as is the
    repo id the export recorded (`CARD_INPUTS_FILE`): the upload is of a temporary copy of the folder with those two
    files rewritten (the other files hard-linked where the file system allows), and the folder's own two files are
    rewritten once the upload succeeded, so a later `card` re-render keeps the repo id. In offline mode an upload is an
    `OfflineModeIsEnabled` error (a `ConnectionError`) before any request is made; a Hub that cannot be reached or
    refuses the upload (network, authentication, permissions) is a one-line `ConnectionError` naming the folder and
    `repo_id`. Either way nothing in the folder is written.
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
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if constants.is_offline_mode():
        raise OfflineModeIsEnabled(
            f"cannot upload {str(folder)!r} to {repo_id}: Hugging Face Hub offline mode is on (HF_HUB_OFFLINE or "
            "TRANSFORMERS_OFFLINE is set); unset it to upload, or list what would be sent with --dry-run "
            "(dry_run=True)."
        )
    inputs = read_card_inputs(folder)
    rewritten = {"README.md": card}
    if inputs:
        rewritten[CARD_INPUTS_FILE] = card_inputs_text({**inputs, "repo_id": repo_id})
    api = HfApi()
    with tempfile.TemporaryDirectory(prefix="pairzoo-push-") as staging:
        for path in files:
            target = Path(staging) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if path in rewritten:
                target.write_text(rewritten[path])
            else:
                _link_or_copy(folder / path, target)
        try:
            api.create_repo(repo_id, private=private, exist_ok=True)
            api.upload_folder(folder_path=staging, repo_id=repo_id, commit_message="Upload pairzoo export")
        except (OSError, *HfHubHTTPError.__bases__) as err:  # its own errors (OSErrors) and its HTTP client's
            reason = " ".join(f"{type(err).__name__}: {err}".split())
            raise ConnectionError(f"cannot upload {str(folder)!r} to {repo_id}: {reason}") from err
    for path, text in rewritten.items():
        write_text_atomic(folder / path, text)
    return files


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or one without hard links
        shutil.copyfile(source, target)
