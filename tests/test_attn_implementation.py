"""`attn_implementation` reaches the backbone encoder: `create_model`, `from_pretrained`, `set_attn_implementation`
and an export loaded with `trust_remote_code` in a process without pairzoo."""

import json

import pytest
import torch
from model_harness import ROWS, assert_close_after_reload
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoModel, set_seed

from pairzoo import create_model, encode_conditional_inputs, get_model_spec, load_tokenizer
from pairzoo.backbones import tiny_backbone_config
from pairzoo.hub_cards import export_model, run_without_pairzoo

MODELS = ["cross-encoder", "seaver"]
BACKBONES = ["tiny-bert", "tiny-roberta"]


def _inputs(backbone: str) -> dict:
    return encode_conditional_inputs(
        load_tokenizer(backbone),
        [r["sentence1"] for r in ROWS],
        [r["sentence2"] for r in ROWS],
        [r["condition"] for r in ROWS],
    )


def _model(name: str, backbone: str, **kwargs):
    set_seed(0)
    return create_model(name, backbone=backbone, **kwargs).eval()


def _assert_attention_probabilities(attentions, backbone_config, batch: dict) -> None:
    """`attentions`: one (B, H, L, L) tensor per backbone layer, each row a distribution over the keys."""
    size, length = batch["input_ids"].shape
    assert isinstance(attentions, tuple) and len(attentions) == backbone_config.num_hidden_layers
    for attention in attentions:
        assert attention.shape == (size, backbone_config.num_attention_heads, length, length)
        torch.testing.assert_close(attention.sum(-1), torch.ones(attention.shape[:-1]))


def _assert_returns_attentions(model, batch: dict) -> None:
    with torch.no_grad():
        out = model(**batch, output_attentions=True)
    _assert_attention_probabilities(out.attentions, model.config.backbone_config, batch)


def _assert_implementation(model, implementation: str) -> None:
    assert model.config._attn_implementation == implementation
    assert model.config.backbone_config._attn_implementation == implementation
    assert model.backbone.config._attn_implementation == implementation


@pytest.mark.parametrize("backbone", BACKBONES)
@pytest.mark.parametrize("name", MODELS)
def test_create_model_eager_reaches_the_backbone(name, backbone):
    model = _model(name, backbone, attn_implementation="eager")
    _assert_implementation(model, "eager")
    _assert_returns_attentions(model, _inputs(backbone))


@pytest.mark.parametrize("backbone", BACKBONES)
def test_create_model_on_a_pretrained_backbone_folder(backbone, tmp_path):
    set_seed(0)
    encoder = AutoModel.from_config(tiny_backbone_config(backbone))
    encoder.save_pretrained(tmp_path / "encoder")
    batch = _inputs(backbone)
    eager = _model("cross-encoder", str(tmp_path / "encoder"), attn_implementation="eager")
    _assert_implementation(eager, "eager")
    _assert_returns_attentions(eager, batch)
    for key, value in eager.backbone.state_dict().items():  # the pretrained weights, not a random encoder
        torch.testing.assert_close(value, encoder.state_dict()[key], rtol=0, atol=0)
    sdpa = _model("cross-encoder", str(tmp_path / "encoder"), attn_implementation="sdpa")
    _assert_implementation(sdpa, "sdpa")
    with torch.no_grad():
        torch.testing.assert_close(sdpa(**batch).logits, eager(**batch).logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", MODELS)
def test_create_model_sdpa_is_the_backbones_implementation(name):
    _assert_implementation(_model(name, "tiny-bert", attn_implementation="sdpa"), "sdpa")


def test_a_dict_sets_the_backbone_apart_from_the_model():
    model = _model("cross-encoder", "tiny-roberta", attn_implementation={"": "sdpa", "backbone_config": "eager"})
    assert model.config._attn_implementation == "sdpa"
    assert model.backbone.config._attn_implementation == "eager"
    _assert_returns_attentions(model, _inputs("tiny-roberta"))


@pytest.mark.parametrize("backbone", BACKBONES)
@pytest.mark.parametrize("name", MODELS)
def test_from_pretrained_eager_reaches_the_backbone(name, backbone, tmp_path):
    model = _model(name, backbone)
    _assert_implementation(model, "sdpa")
    model.save_pretrained(tmp_path / "model")
    reloaded = type(model).from_pretrained(tmp_path / "model", attn_implementation="eager").eval()
    _assert_implementation(reloaded, "eager")
    _assert_returns_attentions(reloaded, _inputs(backbone))
    # saving and reloading keeps the choice as transformers does for its own models
    reloaded.save_pretrained(tmp_path / "eager")
    plain = AutoModel.from_config(tiny_backbone_config(backbone), attn_implementation="eager")
    plain.save_pretrained(tmp_path / "plain")
    kept = AutoModel.from_pretrained(tmp_path / "plain").config._attn_implementation
    _assert_implementation(type(model).from_pretrained(tmp_path / "eager"), kept)


@pytest.mark.parametrize("backbone", BACKBONES)
@pytest.mark.parametrize("name", MODELS)
def test_set_attn_implementation_switches_the_backbone(name, backbone):
    model = _model(name, backbone)
    batch = _inputs(backbone)
    with torch.no_grad():
        expected = model(**batch).logits
    model.set_attn_implementation("eager")
    _assert_implementation(model, "eager")
    _assert_returns_attentions(model, batch)
    model.set_attn_implementation("sdpa")
    _assert_implementation(model, "sdpa")
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).logits, expected, rtol=0, atol=1e-5)


def test_unknown_attn_implementation_is_refused(tmp_path):
    with pytest.raises(ValueError, match="attn_implementation"):
        create_model("cross-encoder", backbone="tiny-bert", attn_implementation="fastest")
    with pytest.raises(ValueError, match="attn_implementation"):
        create_model("seaver", backbone="tiny-roberta", attn_implementation=2)
    AutoModel.from_config(tiny_backbone_config("tiny-bert")).save_pretrained(tmp_path / "encoder")
    with pytest.raises(ValueError, match="attn_implementation"):
        create_model("cross-encoder", backbone=str(tmp_path / "encoder"), attn_implementation="fastest")
    model = _model("seaver", "tiny-bert")
    model.save_pretrained(tmp_path / "model")
    with pytest.raises(ValueError, match="attn_implementation"):
        type(model).from_pretrained(tmp_path / "model", attn_implementation="fastest")
    with pytest.raises(ValueError, match="attn_implementation"):
        model.set_attn_implementation("fastest")
    _assert_implementation(model, "sdpa")


_FRESH_EAGER = r"""
import json, sys
import torch, transformers
from safetensors.torch import load_file, save_file
jobs, outputs_file = json.loads(sys.argv[1]), sys.argv[2]
tensors, implementations = {}, []
for index, (folder, auto_class, inputs_file) in enumerate(jobs):
    auto = getattr(transformers, auto_class)
    model = auto.from_pretrained(folder, trust_remote_code=True, attn_implementation="eager").eval()
    implementations.append([model.config._attn_implementation, model.backbone.config._attn_implementation])
    with torch.no_grad():
        out = model(**load_file(inputs_file), output_attentions=True)
    for layer, attention in enumerate(out.attentions or ()):
        tensors[f"{index}.{layer}"] = attention.contiguous()
assert "pairzoo" not in sys.modules
save_file(tensors, outputs_file, metadata={"implementations": json.dumps(implementations)})
"""


def test_export_loaded_with_eager_returns_attentions_without_pairzoo(tmp_path):
    cases = [("cross-encoder", "tiny-bert"), ("seaver", "tiny-roberta")]
    models, batches, jobs = [], [], []
    for index, (name, backbone) in enumerate(cases):
        model = _model(name, backbone)
        folder = export_model(model, load_tokenizer(backbone), tmp_path / f"export{index}", eval_results=[])
        batch = _inputs(backbone)
        save_file({k: v.contiguous() for k, v in batch.items()}, str(tmp_path / f"inputs{index}.safetensors"))
        jobs.append([str(folder), get_model_spec(name).auto_class, str(tmp_path / f"inputs{index}.safetensors")])
        models.append(model)
        batches.append(batch)
    outputs = str(tmp_path / "attentions.safetensors")
    proc = run_without_pairzoo(_FRESH_EAGER, [json.dumps(jobs), outputs])
    assert proc.returncode == 0, proc.stderr[-3000:]
    with safe_open(outputs, "pt") as saved:
        assert json.loads(saved.metadata()["implementations"]) == [["eager", "eager"]] * len(cases)
        loaded = {key: saved.get_tensor(key) for key in saved.keys()}
    for index, (model, batch) in enumerate(zip(models, batches)):
        attentions = tuple(
            loaded[f"{index}.{layer}"] for layer in range(model.config.backbone_config.num_hidden_layers)
        )
        _assert_attention_probabilities(attentions, model.config.backbone_config, batch)
        model.set_attn_implementation("eager")
        with torch.no_grad():
            expected = model(**batch, output_attentions=True).attentions
        for actual, wanted in zip(attentions, expected):
            assert_close_after_reload(actual, wanted)
