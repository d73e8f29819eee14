"""Training that survives and exports that are safe to load.

- A non-finite loss stops training with a `NonFiniteLossError` naming the step and the last good checkpoint, which is
  kept; weights that turned non-finite are never saved; nothing else (metrics.json, export) is written.
- A run killed with SIGKILL after a checkpoint and resumed with `--resume_from_checkpoint last` (which skips a
  half-written checkpoint) ends with the same metrics and weights as the uninterrupted run, up to float32 rounding.
- Two runs with the same seed in one process give identical metrics and weights.
- Exports hold safetensors only; `load_export` refuses pickle weights unless `allow_pickle=True`; every exported `.py`
  file of every registered model imports only torch, transformers, the standard library and its siblings.
- metrics.json and export folders are replaced atomically (`write_text_atomic`, `replace_folder`): a failure leaves
  the previous version intact.
"""

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from model_harness import assert_close_after_reload
from safetensors.torch import load_file

from pairzoo import create_model, fileio, get_model_spec, list_models, load_tokenizer
from pairzoo.fileio import write_text_atomic
from pairzoo.hub_cards import export as export_module
from pairzoo.hub_cards.export import PICKLE_SUFFIXES, export_code_files, export_model, load_export, verify_export
from pairzoo.hub_cards.sentence_transformers_files import sentence_transformers_files
from pairzoo.modeling import CrossEncoderForConditionalSimilarity
from pairzoo.training.cli import NonFiniteLossError, complete_checkpoints, main, resolve_resume_checkpoint

REPO = Path(__file__).resolve().parents[1]
# 32 rows, batch 4: 8 optimizer steps, a checkpoint every 3 (dropout on, so the RNG state matters on resume).
RUN = ["--model", "cross-encoder", "--backbone", "tiny-bert", "--dataset", "synthetic", "--synthetic_train_size", "32",
       "--synthetic_validation_size", "16", "--max_length", "48", "--num_train_epochs", "1",
       "--per_device_train_batch_size", "4", "--learning_rate", "1e-3", "--seed", "7", "--eval_strategy", "no",
       "--save_strategy", "steps", "--save_steps", "3", "--report_to", "none", "--disable_tqdm", "true"]  # fmt: skip
TIMING_KEYS = ("runtime", "per_second")
# A resumed run reloads its checkpoint, so its forward passes may round differently in the last bits (see
# `assert_close_after_reload`), and the steps after the checkpoint carry that on. Measured on RUN: 1e-7 relative noise
# added to every weight at step 3 moves the final weights by 4e-7 and the metrics by 3e-5 relative, while a resume
# that loses the RNG state (other dropout masks) moves the weights by 2e-3 and validation_pearson by 10%.
RESUME_WEIGHTS_TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}
RESUME_METRICS_TOLERANCE = {"rel": 1e-3, "abs": 1e-6}
# `os`: the `PAIRZOO_CHECK_INPUTS` debug option of modeling/common.py, inlined into every modeling file
# exported code imports torch, transformers and the standard library only
ALLOWED_IMPORTS = {"torch", "transformers", *sys.stdlib_module_names}

_KILL_AT = r"""
import os, signal, sys
from transformers import TrainerCallback
import pairzoo.training.cli as cli

class KillAt(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == int(os.environ["PAIRZOO_KILL_AT_STEP"]):
            os.kill(os.getpid(), signal.SIGKILL)  # no clean-up, no atexit: what an OOM killer or scheduler does

class Killable(cli.GuardedTrainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.add_callback(KillAt())

cli.GuardedTrainer = Killable
cli.main(sys.argv[1:])
"""


def _stable(metrics: dict) -> dict:
    """Metrics without wall-clock timings."""
    return {k: v for k, v in metrics.items() if not any(t in k for t in TIMING_KEYS)}


def _weights(run_dir: Path) -> dict:
    return load_file(run_dir / "export" / "model.safetensors")


def _assert_same_weights(a: dict, b: dict, atol: float = 0.0, rtol: float = 0.0) -> None:
    """Bitwise unless given a tolerance."""
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=atol, rtol=rtol, msg=name)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> "tuple[Path, dict]":
    out = tmp_path_factory.mktemp("uninterrupted") / "run"
    return out, main([*RUN, "--output_dir", str(out)])


# ------------------------------------------------------------------------------------------- determinism and resume


def test_same_seed_gives_identical_metrics_and_weights(uninterrupted, tmp_path):
    first_dir, first = uninterrupted
    second = main([*RUN, "--output_dir", str(tmp_path / "again")])
    assert first["train_steps"] == second["train_steps"] == 8
    assert _stable(second["metrics"]) == _stable(first["metrics"])
    _assert_same_weights(_weights(tmp_path / "again"), _weights(first_dir))


def test_sigkill_after_a_checkpoint_then_resume_matches_the_uninterrupted_run(uninterrupted, tmp_path):
    base_dir, base = uninterrupted
    out = tmp_path / "killed"
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_AT, *RUN, "--output_dir", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=600,
        # Same thread count as this process, which trains the runs compared with it: sums split over another
        # number of threads round differently.
        env={**os.environ, "PAIRZOO_KILL_AT_STEP": "5", "PYTHONPATH": str(REPO),
             "OMP_NUM_THREADS": str(torch.get_num_threads())},
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert [p.name for p in complete_checkpoints(out)] == ["checkpoint-3"]
    assert not (out / "metrics.json").exists() and not (out / "export").exists()
    # A kill while saving leaves a folder without trainer_state.json: `last` must not pick it.
    (out / "checkpoint-6").mkdir()
    (out / "checkpoint-6" / "model.safetensors").write_bytes(b"\0" * 64)
    assert resolve_resume_checkpoint("last", out) == str(out / "checkpoint-3")

    resumed = main([*RUN, "--output_dir", str(out), "--resume_from_checkpoint", "last"])
    assert resumed["train_steps"] == base["train_steps"] == 8
    # a resumed run reports no mean training loss (its Trainer saw only the steps after the checkpoint)
    assert "train_loss" in base["metrics"] and "train_loss" not in resumed["metrics"]
    base_metrics = {k: v for k, v in _stable(base["metrics"]).items() if k != "train_loss"}
    assert _stable(resumed["metrics"]) == pytest.approx(base_metrics, **RESUME_METRICS_TOLERANCE)
    _assert_same_weights(_weights(out), _weights(base_dir), **RESUME_WEIGHTS_TOLERANCE)


# ------------------------------------------------------------------------------------------- non-finite training


def _poison_forward(monkeypatch, at_call: int, kind: str) -> None:
    """From the `at_call`-th training forward on, make the loss NaN (`loss`) or keep it finite but make every
    gradient NaN (`grad`: 0 * sqrt(x - x) is 0 with an infinite derivative)."""
    real_forward = CrossEncoderForConditionalSimilarity.forward
    calls = {"n": 0}

    def forward(self, *args, **kwargs):
        out = real_forward(self, *args, **kwargs)
        if self.training and out.loss is not None:
            calls["n"] += 1
            if calls["n"] >= at_call:
                if kind == "loss":
                    out.loss = out.loss * float("nan")
                else:
                    weight = self.head.classifier.weight
                    out.loss = out.loss + 0.0 * torch.sqrt(weight.sum() - weight.sum())
        return out

    monkeypatch.setattr(CrossEncoderForConditionalSimilarity, "forward", forward)


def test_nan_loss_stops_training_and_keeps_the_last_good_checkpoint(monkeypatch, tmp_path):
    _poison_forward(monkeypatch, at_call=5, kind="loss")
    out = tmp_path / "nan"
    args = [*RUN, "--save_steps", "2", "--output_dir", str(out)]
    with pytest.raises(NonFiniteLossError, match=r"loss is nan at step 5 .*checkpoint-4.*--resume_from_checkpoint"):
        main(args)
    assert [p.name for p in complete_checkpoints(out)] == ["checkpoint-2", "checkpoint-4"]
    assert not (out / "metrics.json").exists() and not (out / "export").exists()
    weights = load_file(out / "checkpoint-4" / "model.safetensors")
    assert all(torch.isfinite(t).all() for t in weights.values())


def test_non_finite_weights_are_never_saved(monkeypatch, tmp_path):
    _poison_forward(monkeypatch, at_call=4, kind="grad")  # the update of step 4 makes the weights NaN
    out = tmp_path / "nan-weights"
    with pytest.raises(NonFiniteLossError, match=r"not finite after step 4.*checkpoint-2"):
        main([*RUN, "--save_steps", "2", "--output_dir", str(out)])
    assert [p.name for p in complete_checkpoints(out)] == ["checkpoint-2"]
    assert not (out / "checkpoint-4").exists()


# ------------------------------------------------------------------------------------------- safe exports


def _imports(source: str) -> "list[tuple[str, int]]":
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append(((node.module or "").split(".")[0], node.level))
    return found


def _exported_code(name: str) -> dict[str, str]:
    """`{file name: source}` of every `.py` file `export_model` writes for model `name` (the same generator)."""
    return export_code_files(get_model_spec(name))


@pytest.mark.parametrize("name", list_models())
def test_every_exported_py_file_imports_only_allowed_modules(name):
    code = _exported_code(name)
    assert code, "an export ships its configuration and modeling code"
    for filename, source in code.items():
        for root, level in _imports(source):
            if level:
                assert level == 1 and f"{root}.py" in code, (filename, root)
            else:
                assert root in ALLOWED_IMPORTS, f"{name}: {filename} imports {root!r}"


def test_an_export_holds_safetensors_only_and_exactly_the_scanned_code(tiny_export):
    folder = tiny_export[0]
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert not [p.name for p in files if p.suffix in PICKLE_SUFFIXES]
    assert (folder / "model.safetensors").is_file()
    exported = {p.name: p.read_text() for p in files if p.suffix == ".py"}
    # the family's generated code, plus the sentence-transformers input module and the pipeline files it imports
    st_code = {n: t for n, t in sentence_transformers_files(tiny_export[1]).items() if n.endswith(".py")}
    assert exported == _exported_code("cross-encoder") | st_code


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory) -> "tuple[Path, torch.nn.Module, object]":
    model = create_model("cross-encoder", backbone="tiny-bert").eval()
    tokenizer = load_tokenizer("tiny-bert")
    return export_model(model, tokenizer, tmp_path_factory.mktemp("tiny") / "export"), model, tokenizer


def _scores(model, tokenizer) -> torch.Tensor:
    from pairzoo import encode_conditional_inputs

    batch = encode_conditional_inputs(
        tokenizer, ["A man walks.", "Two dogs."], ["A man runs.", "A cat."], ["Speed.", "Count."]
    )
    with torch.no_grad():
        return model(**batch).logits


def test_load_export_round_trips_without_running_the_folder_code(tiny_export):
    folder, model, tokenizer = tiny_export
    loaded, loaded_tokenizer = load_export(folder)
    assert type(loaded) is type(model)  # the installed pairzoo class, not the folder's modeling file
    assert_close_after_reload(_scores(loaded.eval(), loaded_tokenizer), _scores(model, tokenizer))


def test_pickle_weights_are_refused_unless_explicitly_allowed(tiny_export, tmp_path):
    folder, model, tokenizer = tiny_export
    pickled = tmp_path / "pickled"
    shutil.copytree(folder, pickled)
    (pickled / "model.safetensors").unlink()
    torch.save(model.state_dict(), pickled / "pytorch_model.bin")  # what an old or hostile upload holds
    with pytest.raises(ValueError, match=r"pickle files \['pytorch_model.bin'\].*allow_pickle=True"):
        load_export(pickled)
    with pytest.raises(ValueError, match="pickle"):
        verify_export(pickled)
    loaded, loaded_tokenizer = load_export(pickled, allow_pickle=True)
    assert_close_after_reload(_scores(loaded.eval(), loaded_tokenizer), _scores(model, tokenizer))


# ------------------------------------------------------------------------------------------- atomic writes


def test_failed_overwrite_keeps_the_previous_export_intact(tiny_export, tmp_path, monkeypatch):
    folder, model, tokenizer = tiny_export
    target = export_model(model, tokenizer, tmp_path / "export")
    before = {p.name: p.read_bytes() for p in target.iterdir()}

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(export_module, "render_model_card", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        export_model(model, tokenizer, target, overwrite=True)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["export"], "no temporary folder may remain"
    monkeypatch.undo()
    export_model(model, tokenizer, target, overwrite=True)  # and a successful overwrite leaves one folder too
    assert [p.name for p in tmp_path.iterdir()] == ["export"]


def test_metrics_json_is_replaced_atomically(tmp_path, monkeypatch):
    path = tmp_path / "metrics.json"
    write_text_atomic(path, '{"old": 1}')

    def fail(src, dst):
        raise OSError("rename failed")

    monkeypatch.setattr(fileio.os, "replace", fail)
    with pytest.raises(OSError, match="rename failed"):
        write_text_atomic(path, '{"new": 2}')
    assert json.loads(path.read_text()) == {"old": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def _folder(path: Path, text: str) -> Path:
    path.mkdir()
    (path / "sub").mkdir()
    (path / "sub" / "file.txt").write_text(text)
    return path


def _contents(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()}


def test_replace_folder_replaces_an_existing_folder_or_puts_a_new_one_in_place(tmp_path):
    target = _folder(tmp_path / "target", "old")
    fileio.replace_folder(_folder(tmp_path / "new", "new"), target)
    assert _contents(target) == {"sub/file.txt": "new"}
    assert [p.name for p in tmp_path.iterdir()] == ["target"], "the old folder is removed"

    fresh = tmp_path / "fresh"
    fileio.replace_folder(_folder(tmp_path / "new", "first"), fresh)
    assert _contents(fresh) == {"sub/file.txt": "first"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "target"]


def test_a_failed_folder_swap_keeps_the_old_folder_and_raises(tmp_path, monkeypatch):
    target = _folder(tmp_path / "target", "old")
    new = _folder(tmp_path / "new", "new")
    real_replace, calls = os.replace, []

    def fail_second(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # the first moves the old folder aside, the second would put the new one in place
            raise OSError("rename failed")
        real_replace(src, dst)

    monkeypatch.setattr(fileio.os, "replace", fail_second)
    with pytest.raises(OSError, match="rename failed"):
        fileio.replace_folder(new, target)
    assert len(calls) == 3, "the old folder is renamed back"
    assert _contents(target) == {"sub/file.txt": "old"}
    assert _contents(new) == {"sub/file.txt": "new"}, "the new folder is left for the caller to remove"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "target"]
