"""Edges of exports, their verification, `push` and the CSR cache files.

Each bad input below is one clear error naming the field, class or file (a `ValueError` unless said otherwise), and
the disk is left as it was found: a saved regression config without its label scale, a pairzoo class reading another
family's export or a config.json without `model_type`, missing or corrupt weights, an export that does not load the
way its users load it (remote code that raises, no `auto_map`, no tokenizer vocabulary, ...), a `push` whose upload
fails (offline, no network, refused), and CSR cache files that are truncated, incomplete or hold a NaN.
"""

import importlib
import json
import re
import shutil
import tempfile
from pathlib import Path

import huggingface_hub
import pytest
import torch
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModel

import pairzoo.hub_cards.export as export_module
from pairzoo import create_model, load_tokenizer
from pairzoo.csr_cache import load_cache, save_cache
from pairzoo.hub_cards import export_model, load_export, push, verify_export
from pairzoo.hub_cards.__main__ import main as hub_cards_main
from pairzoo.registry import get_model_spec, list_models

FAMILIES = list_models()
REGRESSORS = [name for name in FAMILIES if name != "neighbor-attention"]  # neighbor attention only classifies


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny-bert")


@pytest.fixture(scope="module")
def exports(tmp_path_factory, tokenizer) -> "dict[str, Path]":
    """One tiny export per family, written by the current code (a regressor, except neighbor attention)."""
    root = tmp_path_factory.mktemp("exports")
    folders = {}
    for name in FAMILIES:
        overrides = {"num_labels": 3} if name == "neighbor-attention" else {}
        folders[name] = export_model(create_model(name, backbone="tiny-bert", **overrides), tokenizer, root / name)
    return folders


def _copy(source: Path, target: Path, drop: "tuple[str, ...]" = (), **changes) -> Path:
    """A copy of export `source` at `target` whose config.json lacks the keys `drop` and has `changes`."""
    shutil.copytree(source, target)
    config = json.loads((target / "config.json").read_text())
    for key in drop:
        del config[key]
    config.update(changes)
    (target / "config.json").write_text(json.dumps(config, indent=2))
    return target


# ------------------------------------------------------------------------------- the label scale of saved configs


@pytest.mark.parametrize("field", ["label_min", "label_max"])
@pytest.mark.parametrize("family", ["cross-encoder", "csr"])  # a LabelledConfig and the regression-only CsrConfig
def test_a_saved_regression_config_without_its_label_scale_is_refused(exports, tmp_path, family, field):
    saved = json.loads((exports[family] / "config.json").read_text())[field]
    folder = _copy(exports[family], tmp_path / "export", drop=(field,))
    spec = get_model_spec(family)
    named = re.escape(f"'{folder}/config.json' has no `{field}`")
    before = _snapshot(tmp_path)
    for load in (spec.model_class.from_pretrained, spec.config_class.from_pretrained, load_export):
        with pytest.raises(ValueError, match=named):
            load(folder)
    with pytest.raises(ValueError, match=rf"the saved config \(config.json\) has no `{field}`"):
        AutoConfig.from_pretrained(folder)  # pairzoo's registered class, which transformers hands the dict alone
    assert _snapshot(tmp_path) == before
    loaded = spec.model_class.from_pretrained(folder, **{field: saved})  # the scale given when loading
    assert getattr(loaded.config, field) == saved


def test_exports_write_the_label_scale_and_only_saved_regressions_need_it(exports, tmp_path):
    for name in REGRESSORS:  # defaults included: a later change of the default cannot move saved scores
        config = json.loads((exports[name] / "config.json").read_text())
        model = load_export(exports[name])[0]
        assert (config["label_min"], config["label_max"]) == (model.config.label_min, model.config.label_max), name
    fresh = create_model("cross-encoder", backbone="tiny-bert").config
    assert (fresh.label_min, fresh.label_max) == (1.0, 5.0)  # a new model keeps the documented defaults
    classifier = create_model("cross-encoder", backbone="tiny-bert", num_labels=3)
    classifier.save_pretrained(tmp_path / "classifier")
    folder = tmp_path / "classifier"
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({k: v for k, v in config.items() if not k.startswith("label_")}))
    assert type(classifier).from_pretrained(folder).config.num_labels == 3  # a classifier has no scale to lose


# ---------------------------------------------------------------------- loading paths of the pairzoo classes

CROSS_FAMILY = [
    (name, cls, other)
    for name in FAMILIES
    for cls in sorted({get_model_spec(name).model_class, *get_model_spec(name).auto_classes.values()}, key=str)
    for other in FAMILIES
    if other != name
]


@pytest.mark.parametrize(
    "family, cls, other", CROSS_FAMILY, ids=[f"{cls.__name__}<-{other}" for _, cls, other in CROSS_FAMILY]
)
def test_a_pairzoo_class_refuses_another_familys_export(exports, family, cls, other):
    before = _snapshot(exports[other])
    message = (
        f"'{exports[other]}/config.json' is the config of a '{other}' model (`model_type`), not of a '{family}' one: "
        f"{get_model_spec(family).config_class.__name__} and the {family} model classes cannot load it"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        cls.from_pretrained(exports[other])
    assert _snapshot(exports[other]) == before


@pytest.mark.parametrize("family", FAMILIES)
def test_a_config_without_model_type_is_refused_by_every_loader(exports, tmp_path, family):
    folder = _copy(exports[family], tmp_path / "export", drop=("model_type",))
    spec = get_model_spec(family)
    named = re.escape(f"'{folder}/config.json' has no `model_type`")
    before = _snapshot(tmp_path)
    for load in (spec.model_class.from_pretrained, load_export, verify_export):
        with pytest.raises(ValueError, match=named):
            load(folder)
    with pytest.raises(ValueError, match=named):  # the exported code, as a user without pairzoo loads it
        AutoModel.from_pretrained(folder, trust_remote_code=True)
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("family", FAMILIES)
def test_missing_or_empty_weights_are_named(exports, tmp_path, family):
    missing = shutil.copytree(exports[family], tmp_path / "missing")
    (missing / "model.safetensors").unlink()
    empty = shutil.copytree(exports[family], tmp_path / "empty")
    (empty / "model.safetensors").write_bytes(b"")
    model_class = get_model_spec(family).model_class
    before = _snapshot(tmp_path)
    with pytest.raises(OSError, match=re.escape(f"no file named model.safetensors, or pytorch_model.bin, found in "
                                                f"directory {missing}")):  # fmt: skip
        model_class.from_pretrained(missing)
    with pytest.raises(
        ValueError, match=re.escape(f"weights file '{empty}/model.safetensors' is corrupt or unreadable")
    ):
        model_class.from_pretrained(empty)
    assert _snapshot(tmp_path) == before


# ------------------------------------------------------------------ verify_export loads as the export's users do


def _append(name: str, text: str):
    def damage(folder: Path) -> None:
        path = folder / name
        path.write_text(path.read_text() + text)

    return damage


def _config_without(*keys: str, **changes):
    def damage(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        for key in keys:
            del config[key]
        config.update(changes)
        (folder / "config.json").write_text(json.dumps(config))

    return damage


def _auto_map_without(name: str):
    def damage(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        del config["auto_map"][name]
        (folder / "config.json").write_text(json.dumps(config))

    return damage


def _delete(name: str):
    return lambda folder: (folder / name).unlink()


BROKEN_EXPORTS = {
    "modeling-code-raises-at-import": (
        _append("modeling_cross_encoder.py", "\nraise RuntimeError('broken modeling file')\n"),
        ValueError,
        r"AutoModel.from_pretrained raised RuntimeError: broken modeling file \(in modeling_cross_encoder.py line \d",
    ),
    "configuration-code-raises-at-import": (
        _append("configuration_cross_encoder.py", "\nraise RuntimeError('broken configuration file')\n"),
        ValueError,
        r"AutoConfig.from_pretrained raised RuntimeError: broken configuration file \(in configuration_cross_encoder",
    ),
    "pipeline-code-raises-at-import": (
        _append("pipeline_conditional_similarity.py", "\nraise RuntimeError('broken pipeline file')\n"),
        ValueError,
        r"pipeline\('conditional-similarity'\) raised RuntimeError: broken pipeline file",
    ),
    "no-auto-map": (_config_without("auto_map"), ValueError, r"config.json' has no `auto_map` with an `AutoConfig`"),
    "auto-map-without-the-cards-class": (
        _auto_map_without("AutoModel"),
        ValueError,
        r"README.md': the usage snippet loads AutoModel, which `auto_map` of '.*config.json' lacks",
    ),
    "no-custom-pipelines": (
        _config_without("custom_pipelines"),
        ValueError,
        r"the usage snippet runs pipeline 'conditional-similarity', which `custom_pipelines` of .* lacks",
    ),
    "no-tokenizer-vocabulary": (
        _delete("tokenizer.json"),
        ValueError,
        r"the tokenizer raised ValueError: the tokenizer reads .* as unknown tokens only",
    ),
    "no-tokenizer-config": (_delete("tokenizer_config.json"), FileNotFoundError, r"is missing tokenizer_config.json"),
    "no-label-min": (
        _config_without("label_min"),
        ValueError,
        r"AutoConfig.from_pretrained raised ValueError: '.*/config.json' has no `label_min`",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN_EXPORTS))
def test_verify_export_names_what_does_not_load_in_one_line(exports, tmp_path, case):
    damage, error, message = BROKEN_EXPORTS[case]
    folder = shutil.copytree(exports["cross-encoder"], tmp_path / "export")
    damage(folder)
    before = _snapshot(tmp_path)
    with pytest.raises(error, match=message) as raised:
        verify_export(folder)
    assert str(folder) in str(raised.value) and "\n" not in str(raised.value)
    assert _snapshot(tmp_path) == before


def test_push_dry_run_refuses_an_export_that_does_not_load(exports, tmp_path, capsys):
    assert hub_cards_main(["push", str(exports["cross-encoder"]), "org/name", "--dry-run"]) == 0
    assert "would upload model.safetensors" in capsys.readouterr().out
    folder = shutil.copytree(exports["cross-encoder"], tmp_path / "export")
    _append("modeling_cross_encoder.py", "\nraise RuntimeError('broken modeling file')\n")(folder)
    before = _snapshot(tmp_path)
    assert hub_cards_main(["push", str(folder), "org/name", "--dry-run"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("pairzoo.hub_cards: error: export folder") and "\n" not in err, err
    assert "RuntimeError: broken modeling file" in err and "would upload" not in captured.out
    assert _snapshot(tmp_path) == before


# ------------------------------------------------------------------------------------------- push fails online


def _offline_error() -> OfflineModeIsEnabled:
    """What huggingface_hub raises for a request with HF_HUB_OFFLINE=1 (the tests run offline)."""
    try:
        huggingface_hub.HfApi().create_repo("org/name", exist_ok=True)
    except OfflineModeIsEnabled as err:
        return err
    raise AssertionError("huggingface_hub made a request in offline mode")


def _http_errors() -> "tuple[Exception, Exception]":
    """A connection error of huggingface_hub's HTTP client (no network) and a refused upload (bad token)."""
    http = importlib.import_module(HfHubHTTPError.__bases__[0].__module__.split(".")[0])
    url = "https://huggingface.co/api/models/org/name/commit/main"
    response = http.Response(401, request=http.Request("POST", url))
    refused = HfHubHTTPError(
        f"401 Client Error: Unauthorized for url: {url}\n\nInvalid credentials.", response=response
    )
    return http.ConnectError("[Errno -2] Name or service not known"), refused


@pytest.mark.parametrize("failure", ["offline", "no-network", "refused"])
def test_a_failed_upload_is_one_line_exit_2_and_writes_nothing(exports, tmp_path, monkeypatch, capsys, failure):
    no_network, refused = _http_errors()
    error, failing = {"offline": (_offline_error(), "create_repo"), "no-network": (no_network, "create_repo"),
                      "refused": (refused, "upload_folder")}[failure]  # fmt: skip

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(huggingface_hub.constants, "is_offline_mode", lambda: False)
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", lambda *args, **kwargs: None)
    monkeypatch.setattr(huggingface_hub.HfApi, failing, fail)
    monkeypatch.setattr(export_module, "check_loads_without_pairzoo", lambda *args, **kwargs: None)  # tested above
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    folder = shutil.copytree(exports["cross-encoder"], tmp_path / "export")
    before = _snapshot(folder)
    with pytest.raises(
        ConnectionError, match=re.escape(f"cannot upload '{folder}' to org/name: {type(error).__name__}")
    ):
        push(folder, "org/name")
    assert hub_cards_main(["push", str(folder), "org/name"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"pairzoo.hub_cards: error: cannot upload '{folder}' to org/name: ") and "\n" not in err
    assert " ".join(str(error).split()) in err
    assert _snapshot(folder) == before, "a failed push must not rewrite the card"
    assert list((tmp_path / "tmp").iterdir()) == [], "nor leave its staging copy"


def test_a_successful_push_uploads_the_rewritten_card_then_records_it(exports, tmp_path, monkeypatch):
    folder = shutil.copytree(exports["cross-encoder"], tmp_path / "export")
    seen = {}

    def upload_folder(self, folder_path, repo_id, commit_message):
        staged = Path(folder_path)
        seen["staged"] = (staged / "README.md").read_text()
        seen["own"] = (folder / "README.md").read_text()
        seen["files"] = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file())
        seen["weights"] = load_file(staged / "model.safetensors")

    monkeypatch.setattr(huggingface_hub.constants, "is_offline_mode", lambda: False)
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", lambda *args, **kwargs: None)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)
    monkeypatch.setattr(export_module, "check_loads_without_pairzoo", lambda *args, **kwargs: None)
    files = push(folder, "org/new-name")
    assert seen["files"] == sorted(files)
    assert 'from_pretrained("org/new-name"' in seen["staged"] and "org/new-name" not in seen["own"]
    assert 'from_pretrained("org/new-name"' in (folder / "README.md").read_text()
    for name, tensor in load_file(folder / "model.safetensors").items():
        assert torch.equal(seen["weights"][name], tensor), name


# ------------------------------------------------------------------------------------------- CSR cache files


@pytest.fixture(scope="module")
def csr_caches(tokenizer):
    model = create_model("csr", backbone="tiny-bert").eval()
    sentences = model.encode_sentences(["A man walks.", "A dog runs in the park."], tokenizer)
    return sentences, model.encode_conditions(["The activity."], tokenizer)


def _rewrite(path: Path, change) -> None:
    """Rewrite cache file `path` with `change(tensors)` applied, keeping its metadata."""
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata()
    tensors = load_file(path)
    change(tensors)
    save_file(tensors, str(path), metadata=metadata)


def _nan_at_first(name: str):
    def change(tensors: dict) -> None:
        tensors[name].view(-1)[0] = float("nan")

    return change


CACHE_DAMAGE = {
    "nan-hidden-state": (0, lambda p: _rewrite(p, _nan_at_first("hidden_states")),
                         r"is corrupt: tensors \['hidden_states'\] hold non-finite"),
    "nan-condition-query": (1, lambda p: _rewrite(p, _nan_at_first("queries")),
                            r"is corrupt: tensors \['queries'\] hold non-finite"),
    "truncated": (0, lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]), "is corrupt or unreadable"),
    "empty": (1, lambda p: p.write_bytes(b""), "is corrupt or unreadable"),
    "lost-tensor": (0, lambda p: _rewrite(p, lambda t: t.pop("attention_mask")),
                    r"holds tensors \['hidden_states'\]; a sentence cache holds \['attention_mask', 'hidden_st"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CACHE_DAMAGE))
def test_a_damaged_cache_file_is_a_value_error_naming_it(csr_caches, tmp_path, case):
    which, damage, message = CACHE_DAMAGE[case]
    path = save_cache(csr_caches[which], tmp_path / "cache.safetensors")
    assert load_cache(path).metadata == csr_caches[which].metadata  # the intact file loads
    damage(path)
    before = _snapshot(tmp_path)
    with pytest.raises(ValueError, match=re.escape(f"cache file '{path}' ") + message):
        load_cache(path)
    assert _snapshot(tmp_path) == before


def test_save_cache_refuses_a_non_finite_cache_and_writes_nothing(csr_caches, tmp_path):
    sentences = csr_caches[0]
    hidden = sentences.hidden_states.clone()
    hidden[0, 0, 0] = float("inf")
    bad = type(sentences)(hidden, sentences.attention_mask, sentences.metadata)
    with pytest.raises(ValueError, match=r"cannot save to '.*cache.safetensors': cache tensors \['hidden_states'\]"):
        save_cache(bad, tmp_path / "cache.safetensors")
    assert list(tmp_path.iterdir()) == []


def test_the_harness_process_without_pairzoo_reports_a_failed_load_and_keeps_serving(tmp_path):
    from model_harness import _fresh_forward_process, fresh_forward

    missing = str(tmp_path / "no-such-export")
    for _ in range(2):  # the same process answers again after a failure
        with pytest.raises(AssertionError, match="Traceback"):
            fresh_forward(
                missing, str(tmp_path / "in.safetensors"), str(tmp_path / "out.safetensors"), "AutoModel", "x"
            )
    assert _fresh_forward_process[0][0].poll() is None
