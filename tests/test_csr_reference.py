"""CSR options `router="reference"` (the bigai-nlco/CSR tri-encoder reading) and
`bi_pooling="all"` (the princeton-nlp/c-sts bi-encoder form), recomputed by hand in float64 from the model's own
parameters; their bad input, config round trip and export."""

import math

import pytest
import torch
from model_harness import ROWS, assert_close_after_reload
from torch.nn import functional as F
from transformers import set_seed

from pairzoo import CsrConfig, create_model, load_tokenizer
from pairzoo.hub_cards import export_model, score_exports_in_fresh_process
from pairzoo.pipelines.pipeline_conditional_similarity import encode_bi_inputs, encode_tri_inputs

S1 = [r["sentence1"] for r in ROWS]
S2 = [r["sentence2"] for r in ROWS]
COND = [r["condition"] for r in ROWS]


def _model(backbone: str = "tiny-bert", **overrides):
    set_seed(0)
    return create_model("csr", backbone=backbone, **overrides).eval()


def _linear(x: torch.Tensor, linear: torch.nn.Linear) -> torch.Tensor:
    return x @ linear.weight.T + linear.bias


def _norm(x: torch.Tensor, norm: torch.nn.LayerNorm) -> torch.Tensor:
    return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


def _embeddings_by_hand(model, ids, mask, offset):
    """Sentence embeddings with positions after `offset` condition tokens: RoBERTa's positions start after its padding
    index, BERT's and DistilBERT's at 0; DistilBERT has no token types."""
    emb, config = model.backbone.embeddings, model.config.backbone_config
    first = config.pad_token_id + 1 if config.model_type == "roberta" else 0
    positions = (first + offset + torch.arange(ids.shape[1])) * mask + (1 - mask) * (first - 1 if first else 0)
    x = emb.word_embeddings.weight[ids] + emb.position_embeddings.weight[positions]
    if config.model_type != "distilbert":
        x = x + emb.token_type_embeddings.weight[0]
    return _norm(x, emb.LayerNorm)


def _layers_by_hand(model):
    """Per layer: its query/key/value projections and the rest of its block (output projection, residual and norm,
    GELU feed-forward) as a function of the attention context and the layer input."""
    backbone, config = model.backbone, model.config.backbone_config
    if config.model_type == "distilbert":
        assert config.activation == "gelu" and not config.sinusoidal_pos_embds
        for layer in backbone.transformer.layer:
            attn, ffn = layer.attention, layer.ffn

            def rest(context, x, attn=attn, ffn=ffn, layer=layer):
                a = _norm(_linear(context, attn.out_lin) + x, layer.sa_layer_norm)
                return _norm(_linear(F.gelu(_linear(a, ffn.lin1)), ffn.lin2) + a, layer.output_layer_norm)

            yield attn.q_lin, attn.k_lin, attn.v_lin, rest
        return
    assert config.hidden_act == "gelu"
    for layer in backbone.encoder.layer:
        attn = layer.attention.self

        def rest(context, x, layer=layer):
            a = _norm(_linear(context, layer.attention.output.dense) + x, layer.attention.output.LayerNorm)
            return _norm(
                _linear(F.gelu(_linear(a, layer.intermediate.dense)), layer.output.dense) + a, layer.output.LayerNorm
            )

        yield attn.query, attn.key, attn.value, rest


def _reference_by_hand(model, ids, mask, cond_states, cond_mask):
    """The reference reading written out: sentence positions after the condition's tokens, every layer attending to
    `[condition states; sentence]`, `w` = head-mean attention of the sentence's first token on the sentence keys, and
    `(1 + w) * context` in the router layers. Returns the mean-pooled embedding and the router weights."""
    x = _embeddings_by_hand(model, ids, mask, cond_mask.sum(1, keepdim=True))
    keep = torch.cat([cond_mask, mask], 1).bool()[:, None, None]
    b, length, d = x.shape
    heads = model.config.backbone_config.num_attention_heads
    size = d // heads
    weights = []
    for t, (query, key, value, rest) in enumerate(_layers_by_hand(model)):
        memory = torch.cat([cond_states, x], 1)
        q, k, v = (
            y.view(b, y.shape[1], heads, size).transpose(1, 2)
            for y in (_linear(x, query), _linear(memory, key), _linear(memory, value))
        )
        probs = torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(size)).masked_fill(~keep, -math.inf), -1)
        context = (probs @ v).transpose(1, 2).reshape(b, length, d)
        if t in model.routed_layers:
            w = probs[:, :, 0, cond_states.shape[1] :].mean(1)
            weights.append(w)
            context = context * (1 + w)[..., None]
        x = rest(context, x)
    m = mask[..., None].to(x.dtype)
    return (x * m).sum(1) / m.sum(1), weights


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta", "tiny-distilbert"])
@pytest.mark.parametrize("router_layers", [[1], [0, 1]])
def test_reference_router_recomputed_in_float64(backbone, router_layers):
    model = _model(backbone, router="reference", router_layers=router_layers).double()
    batch = encode_tri_inputs(load_tokenizer(backbone), S1, S2, COND)
    with torch.no_grad():
        out = model(**batch, output_internals=True)
        cond_mask = batch["attention_mask_3"]
        cond_states = model.backbone(input_ids=batch["input_ids_3"], attention_mask=cond_mask).last_hidden_state
        for suffix, embeddings, router_weights in (
            ("", out.embeddings, out.router_weights),
            ("_2", out.embeddings_2, out.router_weights_2),
        ):
            mask = batch["attention_mask" + suffix]
            expected, weights = _reference_by_hand(model, batch["input_ids" + suffix], mask, cond_states, cond_mask)
            torch.testing.assert_close(embeddings, expected, atol=1e-10, rtol=1e-10)
            assert len(router_weights) == len(router_layers)
            for got, want in zip(router_weights, weights):
                torch.testing.assert_close(got, want * mask, atol=1e-12, rtol=1e-10)
                assert (got.sum(-1) < 1).all() and (got[mask == 0] == 0).all()  # mass on the condition is left out
    assert out.router_mask is batch["attention_mask"]


def test_reference_router_is_conditioned_and_independent_of_its_batch():
    """Each pair's position offset is its own condition's length, so padding from a batchmate's longer condition
    changes nothing; another condition changes the embedding."""
    model = _model(router="reference", router_layers=[1])
    tokenizer = load_tokenizer("tiny-bert")
    with torch.no_grad():
        batched = model(**encode_tri_inputs(tokenizer, S1, S2, COND))
        for i in range(len(S1)):
            alone = model(**encode_tri_inputs(tokenizer, S1[i], S2[i], COND[i]))
            torch.testing.assert_close(alone.embeddings[0], batched.embeddings[i], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(alone.logits[0], batched.logits[i], atol=1e-5, rtol=1e-5)
        other = model(**encode_tri_inputs(tokenizer, S1, S2, [COND[-1]] * len(S1))).embeddings
    assert not torch.allclose(other[0], batched.embeddings[0], atol=1e-4)


def test_reference_router_bad_input():
    model = _model(router="reference")
    tokenizer = load_tokenizer("tiny-bert")
    for call in (
        lambda: model.encode_sentences(S1, tokenizer),
        lambda: model.encode_conditions(COND, tokenizer),
        lambda: model.embed(None, None),
    ):
        with pytest.raises(ValueError, match="router='reference'"):
            call()
    long = " ".join(["the red car parked near the old station"] * 40)  # ~320 tokens: fits alone, not twice
    with pytest.raises(ValueError, match="router='reference'.*position"):
        model(**encode_tri_inputs(tokenizer, long, long, long))


@pytest.mark.parametrize(
    "backbone, model_type, terms",
    [
        ("tiny-deberta-v2", "deberta-v2", "disentangled content-to-position"),
        ("tiny-mpnet", "mpnet", "relative-position bias"),
        ("tiny-modernbert", "modernbert", "rotary embeddings"),
    ],
)
def test_reference_router_is_refused_without_absolute_positions(backbone, model_type, terms):
    """The reference form attends to a separately encoded condition and shifts the sentence's absolute positions;
    backbones whose scores carry relative, bias or rotary position terms refuse it when the model is built."""
    with pytest.raises(ValueError, match=rf"router='reference' cannot run on a '{model_type}' backbone: .*{terms}"):
        _model(backbone, router="reference")
    assert _model(backbone, router="key").routed_layers == [1]  # the paper's routers run there


def _mean(hidden, mask):
    m = mask[..., None].to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1)


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
@pytest.mark.parametrize("use_router", [False, True])
def test_c_sts_bi_pooling_recomputed_in_float64(backbone, use_router):
    """`bi_pooling="all"`: every non-padding token pooled, token type 1 on `c SEP` when the backbone has types; for
    WordPiece the input is exactly c-sts's `tokenizer(sentence, condition)`."""
    tokenizer = load_tokenizer(backbone)
    model = _model(backbone, architecture="bi", use_router=use_router, bi_pooling="all", router_layers=[1]).double()
    sentence_form = _model(backbone, architecture="bi", use_router=use_router, router_layers=[1]).double()
    batch = encode_bi_inputs(tokenizer, S1, S2, COND)
    has_types = model.config.backbone_config.type_vocab_size > 1
    assert has_types == (backbone == "tiny-bert")
    if has_types:
        pair = tokenizer(S1, COND, padding=True, return_tensors="pt")
        assert torch.equal(pair["input_ids"], batch["input_ids"])
        assert torch.equal(pair["token_type_ids"], batch["condition_mask"])
    with torch.no_grad():
        out = model(**batch, output_internals=True)
        if not use_router:
            for suffix, embeddings in (("", out.embeddings), ("_2", out.embeddings_2)):
                ids, mask = batch["input_ids" + suffix], batch["attention_mask" + suffix]
                types = batch["condition_mask" + suffix] if has_types else torch.zeros_like(ids)
                hidden = model.backbone(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
                torch.testing.assert_close(embeddings, _mean(hidden, mask), atol=1e-10, rtol=1e-10)
        else:  # the router reads the sentence span as before; the pooling covers every token
            assert out.router_mask is batch["sentence_mask"]
            inputs = {k: v for k, v in batch.items() if not k.endswith("_2")}
            if has_types:
                inputs["token_type_ids"] = batch["condition_mask"]
            sentence = sentence_form(**inputs, output_internals=True)
            torch.testing.assert_close(out.router_weights[0], sentence.router_weights[0], atol=1e-12, rtol=1e-10)
        plain = sentence_form(**batch).embeddings
    assert not torch.allclose(out.embeddings, plain, atol=1e-4)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"architecture": "bi", "router": "reference"}, "router"),
        ({"use_router": False, "router": "reference"}, "router"),
        ({"router": "reference", "router_scale": "hidden"}, "router_scale"),
        ({"router": "Reference"}, "router"),
        ({"architecture": "bi", "bi_pooling": "condition"}, "bi_pooling"),
        ({"architecture": "bi", "bi_pooling": None}, "bi_pooling"),
        ({"bi_pooling": "all"}, "bi_pooling"),
    ],
)
def test_config_rejects_bad_new_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        CsrConfig(**kwargs)


def test_config_and_model_round_trip(tmp_path):
    tokenizer = load_tokenizer("tiny-bert")
    for name, overrides, encode in (
        ("reference", {"router": "reference", "router_layers": [0, 1], "tri_head": "hadamard"}, encode_tri_inputs),
        ("c-sts", {"architecture": "bi", "bi_pooling": "all", "pooling": "cls"}, encode_bi_inputs),
    ):
        model = _model(**overrides)
        model.save_pretrained(tmp_path / name)
        config = CsrConfig.from_pretrained(tmp_path / name)
        for key, value in overrides.items():
            assert getattr(config, key) == value
        assert config.to_dict() == model.config.to_dict()
        reloaded = type(model).from_pretrained(tmp_path / name).eval()
        batch = encode(tokenizer, S1, S2, COND)
        with torch.no_grad():
            assert_close_after_reload(reloaded(**batch).scores, model(**batch).scores)


def test_exports_with_the_new_options_score_without_pairzoo(tmp_path):
    tokenizer = load_tokenizer("tiny-bert")
    examples = [{k: r[k] for k in ("sentence1", "sentence2", "condition")} for r in ROWS[:2]]
    models = {
        "reference": (_model(router="reference", router_layers=[1]), encode_tri_inputs),
        "c-sts": (_model(architecture="bi", bi_pooling="all"), encode_bi_inputs),
    }
    jobs = [
        {
            "folder": str(export_model(model, tokenizer, tmp_path / name, eval_results=[])),
            "examples": examples,
            "pipeline_task": "conditional-similarity",
            "auto_classes": [],
        }
        for name, (model, _) in models.items()
    ]
    for (model, encode), result in zip(models.values(), score_exports_in_fresh_process(jobs)):
        with torch.no_grad():
            for example, got in zip(examples, result["outputs"]):
                expected = model(**encode(tokenizer, *example.values())).scores
                assert_close_after_reload(torch.tensor(got["score"]), expected[0])
