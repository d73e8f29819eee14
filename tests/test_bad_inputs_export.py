"""Bad input at the pipeline, export, Hub-card and remote-code entry points.

Same contract as `test_bad_inputs.py` (whose helpers and shared tiny model/export this file reuses): a bad input
raises, before anything is written, the exception in the table with a message naming the offending field, argument,
key or file, and `tmp_path` is unchanged afterwards. Exports loaded the way Hub users load them (plain transformers,
`trust_remote_code=True`, pairzoo not importable) refuse damaged weights in the same way. Exports and metrics files
get the modes of plain `mkdir`/`open` under the process umask.
"""

import json
import math
import os
import re
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from test_bad_inputs import OK, TINY, Case, Ctx, _call, _damage, _nan_weights, _snapshot, shared  # noqa: F401
from transformers import AutoConfig, pipeline

from pairzoo import create_model, encode_conditional_inputs
from pairzoo.backbones import minilm_path
from pairzoo.configuration import CrossEncoderConfig
from pairzoo.fileio import write_text_atomic
from pairzoo.hub_cards import export_model, push, render_model_card, run_without_pairzoo
from pairzoo.hub_cards.__main__ import main as hub_cards_main
from pairzoo.modeling import CrossEncoderForConditionalSimilarity
from pairzoo.training.cli import main as train_main

RESULT = {"dataset": "synthetic", "split": "validation", "metrics": {"validation_spearman": 81.2}}


def _csr_scorer(c: Ctx):
    return pipeline(
        "conditional-similarity", model=create_model("csr", backbone="tiny-bert").eval(), tokenizer=c.tokenizer
    )


PAIR = {"text": "A man is walking.", "text_pair": "A man walks in the park."}


def _pair_scorer(c: Ctx):
    return pipeline("pair-similarity", model=c.model, tokenizer=c.tokenizer)


def _export_with(results: object) -> Callable[[Ctx], Callable[[], object]]:
    """The bad call `export_model(..., eval_results=results)` into a new folder."""
    return _call(lambda c: export_model(c.model, c.tokenizer, c.tmp / "out", eval_results=results))


def _without(key: str):
    def prepare(folder: Path) -> None:
        tensors = load_file(folder / "model.safetensors")
        del tensors[key]
        save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})

    return prepare


def _layers(n: int):
    def prepare(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        config["backbone_config"]["num_hidden_layers"] = n
        (folder / "config.json").write_text(json.dumps(config))

    return prepare


def _truncate(folder: Path) -> None:
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])


def _from_pretrained(prepare):
    """Copy the shared export, damage it, then the bad call is the pairzoo class's own `from_pretrained`."""

    def setup(c: Ctx):
        folder = c.export_copy()
        prepare(folder)
        return lambda: type(c.model).from_pretrained(folder)

    return setup


def _offline_push(c: Ctx):
    folder = c.export_copy()
    return lambda: push(folder, "org/name")


CASES = [
    # ---------------------------------------------------------------- the conditional-similarity pipeline (item 12)
    Case("pipe-empty-list", _call(lambda c: c.scorer([])), ValueError, "`inputs` is an empty list"),
    Case("pipe-empty-tuple", _call(lambda c: c.scorer(())), ValueError, "`inputs` is an empty list"),
    Case("pipe-csr-without-sentence2",
         _call(lambda c: _csr_scorer(c)({"sentence1": "A man walks.", "condition": "The activity."})),
         ValueError, "missing `sentence2`: CsrModel embeds each sentence"),
    Case("pipe-misspelt-max-length", _call(lambda c: c.scorer(OK, max_lenght=8)), ValueError,
         "unknown argument `max_lenght`.*did you mean `max_length`"),
    Case("pipe-foreign-argument", _call(lambda c: c.scorer(OK, top_k=3)), ValueError,
         "unknown argument `top_k`.*known: max_length"),
    Case("pipe-misspelt-batch-size", _call(lambda c: c.scorer([OK], batch_sise=2)), ValueError,
         "unknown argument `batch_sise`.*did you mean `batch_size`"),
    Case("pipe-misspelt-argument-at-construction",
         _call(lambda c: pipeline("conditional-similarity", model=c.model, tokenizer=c.tokenizer, max_lenght=8)),
         ValueError, "unknown argument `max_lenght`.*did you mean `max_length`"),
    Case("pipe-positional-argument", _call(lambda c: c.scorer(OK, 8)), ValueError,
         r"unexpected positional arguments \[8\]"),
    Case("pipe-zero-width-sentence1", _call(lambda c: c.scorer({**OK, "sentence1": "\u200b\u200b\u200b"})),
         ValueError, r"`sentence1`\[0\] is empty: it has no visible character"),
    Case("pipe-invisible-condition", _call(lambda c: c.scorer({**OK, "condition": "\u2060\ufeff \u200d\u200c"})),
         ValueError, r"`condition`\[0\] is empty: it has no visible character"),
    Case("pipe-invisible-sentence2-in-batch",
         _call(lambda c: c.scorer([OK, {**OK, "sentence2": "\u00ad\u180e\u3164\ufe0f"}])),
         ValueError, r"`sentence2`\[0\] is empty"),
    Case("proc-control-characters", _call(lambda c: encode_conditional_inputs(c.tokenizer, "a", "\x00\x07\x1b", "c")),
         ValueError, r"`sentence2`\[0\] is empty: it has no visible character"),
    Case("proc-direction-marks",
         _call(lambda c: encode_conditional_inputs(c.tokenizer, "\u200e\u202a\u202c", "b", "c")),
         ValueError, r"`sentence1`\[0\] is empty"),
    # ---------------------------------------------------------------- the pair-similarity pipeline
    Case("pair-missing-text-pair", _call(lambda c: _pair_scorer(c)({"text": "A man walks."})), ValueError,
         "Input is missing `text_pair`"),
    Case("pair-with-a-condition", _call(lambda c: _pair_scorer(c)({**PAIR, "condition": "The speed."})),
         ValueError, r"unknown fields \['condition'\]; expected `text`, `text_pair`"),
    Case("pair-conditional-keys", _call(lambda c: _pair_scorer(c)({"sentence1": "a", "sentence2": "b"})),
         ValueError, "Input is missing `text`"),
    Case("pair-list-in-one-dict", _call(lambda c: _pair_scorer(c)({**PAIR, "text_pair": ["a", "b"]})), ValueError,
         "`text_pair` must be a string, got list"),
    Case("pair-invisible-text-pair", _call(lambda c: _pair_scorer(c)({**PAIR, "text_pair": "\u200b\u2060"})),
         ValueError, r"`text_pair`\[0\] is empty: it has no visible character"),
    Case("pair-a-string", _call(lambda c: _pair_scorer(c)("A man walks.")), ValueError,
         "pair-similarity inputs must be dicts with `text`, `text_pair`"),
    Case("pair-batch-size-zero", _call(lambda c: _pair_scorer(c)([PAIR, PAIR], batch_size=0)), ValueError,
         "`batch_size` must be a positive integer, got 0"),
    Case("pipe-batch-size-text", _call(lambda c: c.scorer([OK, OK], batch_size="8")), ValueError,
         "`batch_size` must be a positive integer, got '8'"),
    Case("export-task-misspelt",
         _call(lambda c: export_model(c.model, c.tokenizer, c.tmp / "out", task="pair-regresion")),
         ValueError, "`task` 'pair-regresion' is not one cross-encoder trains on; known: .*'pair-regression'"),
    Case("export-seaver-on-a-pair-task",
         _call(lambda c: export_model(create_model("seaver", backbone="tiny-bert"), c.tokenizer, c.tmp / "out",
                                      task="pair-regression")),
         ValueError, "`task` 'pair-regression' is not one seaver trains on"),
    # ---------------------------------------------------------------- export eval_results (item 13)
    Case("export-eval-results-without-metrics", _export_with([{"dataset": "x"}]), ValueError,
         r"`eval_results`\[0\] has keys \['dataset'\]: missing \['split', 'metrics'\]"),
    Case("export-eval-results-misspelt-key", _export_with([{**RESULT, "splt": "test"}]), ValueError,
         r"`eval_results`\[0\] .*unknown \['splt'\]"),
    Case("export-eval-results-a-dict", _export_with(RESULT), ValueError, "`eval_results` must be a list of dicts"),
    Case("export-eval-results-entry-a-string", _export_with([RESULT, "x"]), ValueError,
         r"`eval_results`\[1\] must be a dict, got str"),
    Case("export-eval-results-nan-metric",
         _export_with([{**RESULT, "metrics": {"validation_spearman": math.nan}}]), ValueError,
         r"`eval_results`\[0\]\['metrics'\]\['validation_spearman'\] must be a finite number, got nan"),
    Case("export-eval-results-text-metric", _export_with([{**RESULT, "metrics": {"validation_f1": "0.8"}}]),
         ValueError, r"\['metrics'\]\['validation_f1'\] must be a finite number, got '0.8'"),
    Case("export-eval-results-bool-metric", _export_with([{**RESULT, "metrics": {"validation_accuracy": True}}]),
         ValueError, r"\['metrics'\]\['validation_accuracy'\] must be a finite number"),
    Case("export-eval-results-metrics-a-list", _export_with([{**RESULT, "metrics": [0.8]}]), ValueError,
         r"`eval_results`\[0\]\['metrics'\] must be a dict"),
    Case("export-eval-results-empty-dataset", _export_with([{**RESULT, "dataset": " "}]), ValueError,
         r"`eval_results`\[0\]\['dataset'\] must be a non-empty string"),
    Case("export-eval-results-split-none", _export_with([{**RESULT, "split": None}]), ValueError,
         r"`eval_results`\[0\]\['split'\] must be a non-empty string, got None"),
    Case("card-eval-results-without-metrics",
         _call(lambda c: render_model_card(c.model, [{"dataset": "x", "split": "y"}], "minilm", "org/name")),
         ValueError, r"`eval_results`\[0\] .*missing \['metrics'\]"),
    # ---------------------------------------------------------------- Hub push offline (item 13)
    Case("push-offline", _offline_push, ConnectionError, "cannot upload .*export' to org/name: .*offline mode is on"),
    # ---------------------------------------------------------------- the models' own from_pretrained (item 15)
    Case("from-pretrained-nan-weight", _from_pretrained(_nan_weights), ValueError,
         r"export/model.safetensors' is corrupt: tensors \[.*\] hold non-finite"),
    Case("from-pretrained-grown-layers", _from_pretrained(_layers(3)), ValueError,
         r"export/config.json' does not match model.safetensors in "
         r".*missing_keys \(16\): \['backbone.encoder.layer.2"),
    Case("from-pretrained-shrunk-layers", _from_pretrained(_layers(1)), ValueError,
         r"does not match model.safetensors.*unexpected_keys \(16\): \['backbone.encoder.layer.1"),
    Case("from-pretrained-missing-classifier", _from_pretrained(_without("head.classifier.weight")), ValueError,
         r"does not match model.safetensors.*missing_keys \(1\): \['head.classifier.weight'\]"),
    Case("from-pretrained-truncated-weights", _from_pretrained(_truncate), ValueError,
         "weights file '.*export/model.safetensors' is corrupt or unreadable"),
    Case("from-pretrained-garbage-weights",
         _from_pretrained(_damage("model.safetensors", lambda b: b"\0garbage" * 10)), ValueError,
         "weights file '.*export/model.safetensors' is corrupt or unreadable"),
]  # fmt: skip


def test_the_table_is_large_and_ids_are_unique():
    assert len(CASES) >= 30
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_raises_documented_error_naming_the_culprit_and_writes_nothing(case, shared, tmp_path):  # noqa: F811
    ctx = Ctx(tmp_path, *shared)
    bad_call = case.setup(ctx)
    before = _snapshot(tmp_path)
    with pytest.raises(case.error, match=case.match):
        bad_call()
    assert _snapshot(tmp_path) == before, "a failing call must leave the disk as it found it"


def test_texts_with_a_visible_character_among_invisible_ones_are_scored(shared):  # noqa: F811
    """Only texts with nothing visible are refused: zero-width characters beside letters, a combining accent, an
    emoji or a letter outside the Latin script are text."""
    tokenizer, model, scorer = shared[:3]
    for text in ("a\u200bb", "\u200bcafe\u0301\u200d", "\U0001f600", "\u4e00", "\u00a0x\u3000"):
        out = scorer({**OK, "sentence1": text})
        assert math.isfinite(out["score"]), text
    both = scorer([OK, OK], batch_size=2, max_length=16)
    assert len(both) == 2 and both[0]["score"] == pytest.approx(both[1]["score"], abs=1e-6)


# ------------------------------------------------------------------------------------------- the hub_cards CLI


def test_hub_cards_cli_user_errors_are_one_line_and_exit_2(shared, tmp_path, capsys):  # noqa: F811
    export = shared[3]
    calls = {
        "offline mode is on": ["push", str(export), "org/name"],
        "does not exist": ["push", str(tmp_path / "missing"), "org/name", "--dry-run"],
        "`repo_id` must look like 'org/name'": ["push", str(export), "no-slash", "--dry-run"],
        "not an export folder": ["card", str(tmp_path), "--results", str(tmp_path)],
    }
    before = _snapshot(tmp_path)
    for message, argv in calls.items():
        assert hub_cards_main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("pairzoo.hub_cards: error: ") and message in err and "\n" not in err, err
    assert _snapshot(tmp_path) == before


def test_push_offline_from_the_command_line_exits_non_zero_without_a_traceback(shared, tmp_path):  # noqa: F811
    """`python -m pairzoo.hub_cards push DIR org/name` offline, as a user runs it: one line, exit code 2."""
    import subprocess

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run(
        [sys.executable, "-m", "pairzoo.hub_cards", "push", str(shared[3]), "org/name"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("pairzoo.hub_cards: error: cannot upload")
    assert "--dry-run" in proc.stderr and list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------ exports loaded by Hub users

_LOAD_EACH = r"""
import json, sys, transformers
results = {}
for folder in sys.argv[1:]:
    try:
        model = transformers.AutoModel.from_pretrained(folder, trust_remote_code=True)
        results[folder] = ["loaded", type(model).__module__ + "." + type(model).__name__]
    except Exception as err:
        results[folder] = [type(err).__name__, str(err)]
assert "pairzoo" not in sys.modules
print("PAIRZOO_RESULT " + json.dumps(results))
"""

DAMAGED = {
    "nan-weight": (_nan_weights, r"nan-weight/model.safetensors' is corrupt: tensors \[.*\] hold non-finite"),
    "grown-layers": (_layers(3), r"grown-layers/config.json' does not match model.safetensors in "
                                 r".*missing_keys \(16\): \['backbone.encoder.layer.2"),
    "shrunk-layers": (_layers(1), r"does not match model.safetensors.*unexpected_keys \(16\)"),
    "missing-classifier": (_without("head.classifier.weight"),
                           r"missing-classifier/config.json' does not match model.safetensors in "
                           r".*missing_keys \(1\): \['head.classifier.weight'\]"),
    "truncated-weights": (_truncate, r"weights file '.*truncated-weights/model.safetensors' is corrupt or unreadable"),
}  # fmt: skip


def test_damaged_exports_are_refused_by_plain_transformers_without_pairzoo(shared, tmp_path):  # noqa: F811
    """The exported modeling code makes the checks `load_export` makes: a NaN weight, a config with a layer more or
    less than the weights, a lost classifier and a truncated weights file are a `ValueError` naming the file, where
    transformers alone would load random or NaN weights (or raise safetensors' error without a file name)."""
    import shutil

    folders = {}
    for name, (prepare, _) in DAMAGED.items():
        folders[name] = tmp_path / name
        shutil.copytree(shared[3], folders[name])
        prepare(folders[name])
    folders["intact"] = tmp_path / "intact"
    shutil.copytree(shared[3], folders["intact"])
    before = _snapshot(tmp_path)
    proc = run_without_pairzoo(_LOAD_EACH, [str(f) for f in folders.values()])
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PAIRZOO_RESULT ")]
    assert lines, proc.stderr[-3000:]
    results = json.loads(lines[0][len("PAIRZOO_RESULT ") :])
    kind, loaded_class = results[str(folders["intact"])]
    assert kind == "loaded" and loaded_class.endswith("modeling_cross_encoder.CrossEncoderForConditionalSimilarity")
    assert not loaded_class.startswith("pairzoo")
    for name, (_, message) in DAMAGED.items():
        kind, text = results[str(folders[name])]
        assert kind == "ValueError", (name, kind, text)
        assert re.search(message, text), (name, text)
    assert _snapshot(tmp_path) == before, "loading must not write into the export folders"


def test_a_plain_backbone_still_loads_into_a_method_class_with_a_new_head():
    """The strict check applies to saves of the method only: a plain encoder checkpoint has no method parameters, so
    they are new (reported, initialised), as transformers does and `from_backbone` relies on."""
    config = CrossEncoderConfig(backbone_config=AutoConfig.from_pretrained(minilm_path()))
    model, info = CrossEncoderForConditionalSimilarity.from_pretrained(
        minilm_path(), config=config, output_loading_info=True
    )
    assert info["missing_keys"] == {"head.classifier.weight", "head.classifier.bias"}
    assert not any(key.startswith("backbone.") for key in info["missing_keys"])
    assert torch.isfinite(model.head.classifier.weight).all()


def test_a_save_reloads_with_loading_info_and_its_weights(tmp_path):
    model = create_model("cross-encoder", backbone="tiny-bert").eval()
    model.save_pretrained(tmp_path)
    reloaded, info = type(model).from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    for (name, theirs), ours in zip(reloaded.state_dict().items(), model.state_dict().values()):
        torch.testing.assert_close(theirs, ours, rtol=0, atol=0, msg=name)  # the same stored bytes, read back


# ------------------------------------------------------------------------------------------- file modes


@pytest.fixture(params=[0o022, 0o027, 0o077], ids=["umask022", "umask027", "umask077"])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_exports_and_atomic_writes_get_plain_modes(shared, tmp_path, umask):  # noqa: F811
    """What `mkdir`/`open` give under the umask (0755/0644 for 022), not mkdtemp's 0700 or mkstemp's (and
    safetensors') 0600; an overwritten export and a replaced file too."""
    tokenizer, model = shared[0], shared[1]
    folder_mode, file_mode = 0o777 & ~umask, 0o666 & ~umask
    for overwrite in (False, True):
        folder = export_model(model, tokenizer, tmp_path / "export", eval_results=[RESULT], overwrite=overwrite)
        assert _mode(folder) == folder_mode
        files = [p for p in folder.rglob("*") if p.is_file()]
        assert "model.safetensors" in {p.name for p in files}
        assert {p.name: _mode(p) for p in files} == {p.name: file_mode for p in files}
    for text in ('{"a": 1}', '{"a": 2}'):
        write_text_atomic(tmp_path / "metrics.json", text)
        assert _mode(tmp_path / "metrics.json") == file_mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "metrics.json"]


def test_a_training_run_writes_readable_metrics_and_export(tmp_path):
    old = os.umask(0o022)
    try:
        train_main(["--output_dir", str(tmp_path / "run"), *TINY])
    finally:
        os.umask(old)
    run = tmp_path / "run"
    assert _mode(run / "metrics.json") == 0o644
    assert _mode(run / "export") == 0o755
    assert {p.name: _mode(p) for p in (run / "export").iterdir()} == {
        p.name: 0o644 for p in (run / "export").iterdir()
    }
