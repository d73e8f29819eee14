"""Bad config values and keys of every method config: the contract of tests/test_bad_inputs.py.

A misspelt or mistyped hyper-parameter, given to `create_model`, to a config class, through `--config_overrides` or in
a config.json, raises a ValueError naming the field (and its close match, for a misspelling) before anything is
written. The checks come from each config's typed fields and `validate_*` hooks (`PairzooConfig` in
pairzoo/configuration/common.py); transformers' generic config keys stay allowed and every method's config still
round-trips through save_pretrained/from_pretrained. Also here: the tiny 2-layer backbones build Comateformer and
neighbor attention with their defaults (the paper's placement clamped to the depth).
"""

import copy
import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from test_bad_inputs import TINY
from transformers import BertConfig, PretrainedConfig

from pairzoo import create_model, list_models
from pairzoo.configuration import (
    ComateformerConfig,
    CrossEncoderConfig,
    CsrConfig,
    NeighborAttentionConfig,
    SeaverConfig,
    SiameseMatcherConfig,
)
from pairzoo.configuration.common import TRANSFORMERS_CONFIG_KEYS
from pairzoo.configuration.configuration_neighbor_attention import default_neighbor_layers
from pairzoo.registry import get_model_spec
from pairzoo.training.cli import main as train_main


@dataclass
class Case:
    """`setup(tmp_path)` writes what the case needs and returns the bad call; it must raise ValueError matching
    `match`."""

    id: str
    setup: Callable[[Path], Callable[[], object]]
    match: str


def _model(name: str, **overrides) -> Callable[[Path], Callable[[], object]]:
    return lambda tmp: lambda: create_model(name, backbone="tiny-bert", **overrides)


def _config(config_class: type, **values) -> Callable[[Path], Callable[[], object]]:
    return lambda tmp: lambda: config_class(**values)


def _cli(overrides: dict) -> Callable[[Path], Callable[[], object]]:
    return lambda tmp: (
        lambda: train_main(["--output_dir", str(tmp / "out"), *TINY, "--config_overrides", json.dumps(overrides)])
    )


def _saved_config(**changes) -> Callable[[Path], Callable[[], object]]:
    """Save a tiny cross-encoder's config, edit its config.json, then the bad call reloads it."""

    def setup(tmp: Path):
        folder = tmp / "saved"
        create_model("cross-encoder", backbone="tiny-bert").config.save_pretrained(folder)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, **changes}))
        return lambda: CrossEncoderConfig.from_pretrained(folder)

    return setup


CASES = [
    # ---------------------------------------------------------------- unknown keys
    Case("typo-create-model", _model("cross-encoder", use_transfrom=True),
         r"Unknown CrossEncoderConfig field `use_transfrom`; did you mean `use_transform`\?"),
    Case("typo-cli-overrides", _cli({"use_transfrom": True}),
         r"Unknown CrossEncoderConfig field `use_transfrom`; did you mean `use_transform`\?"),
    Case("typo-generic-key", _model("seaver", num_label=3), r"Unknown SeaverConfig field `num_label`; did you mean "
         r"`num_labels`\?"),
    Case("typo-config-class", _config(ComateformerConfig, diference_fn="tanh"), r"did you mean `difference_fn`\?"),
    Case("typo-saved-config-json", _saved_config(poolng="mean"), r"`poolng`; did you mean `pooling`\?"),
    Case("unknown-key-lists-fields", _model("csr", zzz=1), r"Unknown CsrConfig field `zzz`; the CsrConfig fields are "
         r"\['backbone_config', 'label_min', 'label_max', 'architecture', 'use_router'"),
    Case("backbone-key-given-to-method", _model("cross-encoder", hidden_dropout_prob=0.3),
         r"`hidden_dropout_prob`: it is a field of the backbone's config \(`backbone_config.hidden_dropout_prob`\)"),
    Case("backbone-config-override", _model("cross-encoder", backbone_config={"model_type": "bert"}),
         "`backbone_config` cannot be overridden"),
    # ---------------------------------------------------------------- wrong types
    Case("bool-given-yes", _model("cross-encoder", use_transform="yes"),
         r"CrossEncoderConfig field `use_transform` must be `bool`, got 'yes' \(str\)"),
    Case("bool-given-no", _model("seaver", use_transform="no"), r"`use_transform` must be `bool`, got 'no' \(str\)"),
    Case("bool-given-int", _model("csr", use_router=1), r"`use_router` must be `bool`, got 1 \(int\)"),
    Case("bool-given-none", _config(NeighborAttentionConfig, connecting_tokens=None),
         r"`connecting_tokens` must be `bool`, got None"),
    Case("bool-via-cli", _cli({"use_transform": "no"}), r"`use_transform` must be `bool`, got 'no'"),
    Case("int-given-string", _config(SiameseMatcherConfig, hidden_size="150"),
         r"`hidden_size` must be `int`, got '150' \(str\)"),
    Case("int-given-bool", _config(SiameseMatcherConfig, sfa_branches=True),
         r"`sfa_branches` must be `int \| None`, got True"),
    Case("int-given-float", _config(NeighborAttentionConfig, num_candidates=100.0),
         r"`num_candidates` must be `int`, got 100.0 \(float\)"),
    Case("optional-int-given-string", _config(SeaverConfig, pooling="flatten", flatten_length="128"),
         r"`flatten_length` must be `int \| None`, got '128'"),
    Case("float-given-string", _config(SeaverConfig, alpha="2"), r"`alpha` must be `float`, got '2' \(str\)"),
    Case("float-given-bool", _config(CrossEncoderConfig, label_min=False), r"`label_min` must be `float`, got False"),
    Case("float-given-nan", _config(ComateformerConfig, beta=float("nan")),
         r"`beta` must be `float` with finite numbers, got nan"),
    Case("optional-float-given-string", _config(CsrConfig, classifier_dropout="0.1"),
         r"`classifier_dropout` must be `float \| None`, got '0.1'"),
    Case("list-given-float", _config(CsrConfig, router_layers=1.5),
         r"`router_layers` must be `list\[int\] \| None`, got 1.5 \(float\)"),
    Case("list-given-float-via-cli", _cli({"pooling": "cls", "label_max": [5.0]}), r"`label_max` must be `float`"),
    Case("layer-list-given-int", _model("comateformer", combined_layers=1), r"`combined_layers` must be `list\[int\]"),
    Case("list-with-a-float", _config(NeighborAttentionConfig, neighbor_layers=[3.0]),
         r"`neighbor_layers` must be `list\[int\] \| None`, got \[3.0\]"),
    Case("list-with-a-string", _config(SeaverConfig, reweight_heads=[0, "1"]), r"`reweight_heads` must be"),
    Case("string-list-given-string", _config(NeighborAttentionConfig, label_words="yes"),
         r"`label_words` must be `list\[str\] \| None`, got 'yes'"),
    Case("fraction-list-with-nan", _config(ComateformerConfig, combined_head_fraction=[0.5, float("nan"), 0.3]),
         r"`combined_head_fraction` must be .* with finite numbers"),
    Case("pair-given-string", _config(SiameseMatcherConfig, sfa_reductions="22"), r"`sfa_reductions` must be"),
    Case("string-given-none", _config(CsrConfig, pooling=None), r"`pooling` must be `str`, got None"),
    Case("string-given-int", _model("siamese-matcher", matcher=1), r"`matcher` must be `str`, got 1 \(int\)"),
    Case("type-in-saved-config-json", _saved_config(use_transform="no"), r"`use_transform` must be `bool`, got 'no'"),
    # ---------------------------------------------------------------- layer placement on a shallow backbone
    Case("comateformer-layer-beyond-depth", _model("comateformer", combined_layers=[2], combined_head_fraction=0.5),
         r"`combined_layers` holds layer 2, outside the 0-based layers of a 2-layer backbone; leave "
         r"`combined_layers` None for the paper's placement on this depth \(\[0, 1\]\)"),
    Case("comateformer-paper-fractions-on-two-layers", _model("comateformer", combined_head_fraction=[0.5, 0.4, 0.3]),
         r"`combined_head_fraction` must be a number or one number per combined layer \(2\)"),
    Case("neighbor-layer-is-the-last", _model("neighbor-attention", neighbor_layers=[1]),
         r"`neighbor_layers` must be 0-based layers in \[0, 0\].*`None` gives \[0\] on this 2-layer encoder"),
    Case("neighbor-one-layer-encoder",
         _config(NeighborAttentionConfig, backbone_config=BertConfig(num_hidden_layers=1)),
         r"`neighbor_layers` is empty for a 1-layer encoder.*`training_mode='full'`"),
    # ---------------------------------------------------------------- the registry
    Case("list-models-non-string", lambda tmp: lambda: list_models(3), "`pattern` must be a shell-style pattern"),
]  # fmt: skip


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_config_raises_value_error_naming_the_field_and_writes_nothing(case, tmp_path):
    bad_call = case.setup(tmp_path)
    before = _snapshot(tmp_path)
    with pytest.raises(ValueError, match=case.match):
        bad_call()
    assert _snapshot(tmp_path) == before, "a failing call must leave the disk as it found it"
    assert not (tmp_path / "out").exists(), "the training CLI must fail before it creates --output_dir"


def test_case_ids_are_unique():
    assert len({case.id for case in CASES}) == len(CASES)


# ------------------------------------------------------------------------------------------- what stays accepted

# Values for transformers' generic keys that every method config accepts (no label keys: CSR and neighbor attention
# fix their number of labels).
GENERIC = {
    "architectures": ["SomeModel"],
    "auto_map": {"AutoConfig": "configuration_x.XConfig"},
    "custom_pipelines": {},
    "transformers_version": "5.0.0",
    "torch_dtype": "float32",
    "dtype": "float32",
    "model_type": "ignored",
    "_name_or_path": "somewhere",
    "name_or_path": "somewhere",
    "output_attentions": False,
    "output_hidden_states": False,
    "return_dict": True,
    "attn_implementation": "eager",
    "tie_word_embeddings": True,
    "chunk_size_feed_forward": 0,
    "is_encoder_decoder": False,
    "use_cache": False,
    "pad_token_id": 0,
    "bos_token_id": None,
    "eos_token_id": None,
    "_commit_hash": None,
}
CONFIG_CLASSES = [get_model_spec(name).config_class for name in list_models()]


def test_generic_keys_come_from_transformers_own_config():
    """The allowed set follows the installed transformers: every parameter and serialised key of its base config."""
    assert set(PretrainedConfig().to_dict()) <= TRANSFORMERS_CONFIG_KEYS
    assert set(GENERIC) <= TRANSFORMERS_CONFIG_KEYS


@pytest.mark.parametrize("config_class", CONFIG_CLASSES, ids=lambda c: c.__name__)
def test_transformers_generic_keys_are_accepted(config_class):
    config = config_class(**GENERIC)
    assert config.pad_token_id == 0 and config.architectures == ["SomeModel"]  # (transformers drops `use_cache`)


def test_label_keys_are_accepted():
    labels = {0: "no", 1: "maybe", 2: "yes"}
    config = CrossEncoderConfig(
        id2label=labels, label2id={v: k for k, v in labels.items()}, problem_type="single_label_classification"
    )
    assert config.num_labels == 3
    assert CrossEncoderConfig(num_labels=4).num_labels == 4


@pytest.mark.parametrize("name", list_models())
def test_every_method_config_round_trips_through_save_pretrained(name, tmp_path):
    config = create_model(name, backbone="tiny-bert").config
    config.save_pretrained(tmp_path)
    reloaded = get_model_spec(name).config_class.from_pretrained(tmp_path)
    assert reloaded.to_dict() == config.to_dict()
    assert type(reloaded).from_dict(config.to_dict()).to_dict() == config.to_dict()  # every key, not only the diff


def test_a_trained_and_exported_config_json_still_loads(tmp_path):
    """The keys the Trainer (`use_cache`, special token ids) and an export (`auto_map`, `custom_pipelines`) write,
    and those of a transformers 5.0 config (`torch_dtype`, `tie_word_embeddings`), load."""
    config = create_model("cross-encoder", backbone="tiny-bert", use_transform=True).config
    config.save_pretrained(tmp_path)
    values = json.loads((tmp_path / "config.json").read_text())
    values.update(
        use_cache=False, pad_token_id=0, bos_token_id=None, eos_token_id=None, torch_dtype="float32",
        tie_word_embeddings=True, auto_map={"AutoConfig": "configuration_cross_encoder.CrossEncoderConfig"},
        custom_pipelines={"conditional-similarity": {"impl": "x.Y", "pt": ["AutoModel"]}},
    )  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(values))
    reloaded = CrossEncoderConfig.from_pretrained(tmp_path)
    assert reloaded.use_transform is True and reloaded.pad_token_id == 0


def test_tuples_for_lists_and_ints_for_floats_are_accepted():
    backbone = BertConfig(num_hidden_layers=2)
    comateformer = ComateformerConfig(backbone_config=backbone, combined_layers=(0, 1), combined_head_fraction=1)
    assert comateformer.combined_layers == [0, 1] and comateformer.combined_head_fraction == [1.0, 1.0]
    assert SiameseMatcherConfig(sfa_reductions=(3, 2), dropout=0).sfa_reductions == [3, 2]
    assert CsrConfig(backbone_config=backbone, router_layers=(1,), label_min=0).router_layers == [1]


class _ExtendedConfig(CrossEncoderConfig):
    """A config that adds a field, as a new option of a method config would."""

    new_option: int | None = None


def test_a_new_annotated_field_is_checked_with_the_inherited_ones():
    assert _ExtendedConfig(new_option=3, use_transform=True).new_option == 3
    with pytest.raises(ValueError, match=r"`new_option` must be `int \| None`, got 'x'"):
        _ExtendedConfig(new_option="x")
    with pytest.raises(ValueError, match=r"`use_transform` must be `bool`"):
        _ExtendedConfig(use_transform="no")
    with pytest.raises(ValueError, match=r"Unknown _ExtendedConfig field `new_opton`; did you mean `new_option`\?"):
        _ExtendedConfig(new_opton=3)


# a field set after construction, then a model built from the config: (model, field, bad value, message)
SET_AFTER_CONSTRUCTION = [
    ("seaver", "alpha", float("nan"), r"`alpha` must be `float` with finite numbers"),
    ("cross-encoder", "use_transform", "no", r"`use_transform` must be `bool`, got 'no'"),
    ("csr", "architecture", "quad", r"architecture"),
    ("comateformer", "integration", "blend", r"integration"),
    ("comateformer", "mix_scale", -1.0, r"mix_scale"),
    ("siamese-matcher", "feature_attention_residual", "maybe", r"feature_attention_residual"),
    ("neighbor-attention", "num_candidates", 0, r"num_candidates"),
]


@pytest.mark.parametrize(
    "name, field, value, message", SET_AFTER_CONSTRUCTION, ids=[c[1] for c in SET_AFTER_CONSTRUCTION]
)
def test_a_field_set_after_construction_is_checked_when_a_model_is_built(name, field, value, message):
    model = create_model(name, backbone="tiny-bert")
    config = model.config
    setattr(config, field, value)
    with pytest.raises(ValueError, match=message):
        type(model)(config)


@pytest.mark.parametrize("name", list_models())
def test_rechecking_a_valid_config_changes_nothing(name):
    model = create_model(name, backbone="tiny-bert")
    before = model.config.to_dict()
    model.config.validate()
    rebuilt = type(model)(model.config)
    assert model.config.to_dict() == before and rebuilt.config.to_dict() == before


@pytest.mark.parametrize("name", list_models())
def test_configs_copy_and_pickle(name):
    config = create_model(name, backbone="tiny-bert").config
    assert copy.deepcopy(config).to_dict() == config.to_dict()
    assert pickle.loads(pickle.dumps(config)).to_dict() == config.to_dict()


# ------------------------------------------------------------------------------------------- depth-aware defaults


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
def test_tiny_comateformer_builds_with_the_paper_placement_clamped_to_two_layers(backbone):
    model = create_model("comateformer", backbone=backbone)
    assert model.config.combined_layers == [0, 1] and model.config.combined_head_fraction == [0.5, 0.4]
    out = model.eval()(input_ids=torch.tensor([[2, 5, 6, 3]]), attention_mask=torch.ones(1, 4, dtype=torch.long))
    assert torch.isfinite(out.logits).all()


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
def test_tiny_neighbor_attention_builds_with_its_default_layers(backbone):
    model = create_model("neighbor-attention", backbone=backbone)
    assert model.config.neighbor_layers is None and model.config.resolved_neighbor_layers == [0]
    assert model.neighbor_layers == [0] and len(model.neighbor_projections) == 1


@pytest.mark.parametrize(
    "layers, combined, fractions, neighbor",
    [
        (12, [0, 1, 2], [0.5, 0.4, 0.3], [6, 7, 8, 9, 10]),  # BERT-base: the papers' own placements
        (6, [0, 1, 2], [0.5, 0.4, 0.3], [3, 4]),  # MiniLM: unchanged
        (3, [0, 1, 2], [0.5, 0.4, 0.3], [1]),
        (1, [0], [0.5], []),
    ],
)
def test_default_layers_follow_the_backbone_depth(layers, combined, fractions, neighbor):
    backbone = BertConfig(num_hidden_layers=layers)
    comateformer = ComateformerConfig(backbone_config=backbone)
    assert comateformer.combined_layers == combined and comateformer.combined_head_fraction == fractions
    assert default_neighbor_layers(layers) == neighbor
    if neighbor:
        assert NeighborAttentionConfig(backbone_config=backbone).resolved_neighbor_layers == neighbor


def test_saved_comateformer_config_lists_its_resolved_layers(tmp_path):
    create_model("comateformer", backbone="tiny-bert").config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["combined_layers"] == [0, 1] and saved["combined_head_fraction"] == [0.5, 0.4]


def test_list_models_none_lists_every_model():
    assert list_models(None) == list_models() == list_models("*")
    assert "cross-encoder" in list_models(None)
