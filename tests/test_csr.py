"""CSR (condition-specified routers): harness for tri and bi, the router equations recomputed from the backbone's own
projections, the cache path, the baselines, the pipeline encodings and bad input (KG training: test_kg.py)."""

import math

import pytest
import torch
from model_harness import ROWS, ModelHarness, assert_close_after_reload
from transformers import set_seed

from pairzoo import CsrConfig, create_model, load_tokenizer
from pairzoo.backbones import TINY_ARCHITECTURES, backbone_config
from pairzoo.csr_cache import load_cache, save_cache
from pairzoo.hub_cards import export_model, score_in_fresh_process
from pairzoo.modeling.encoders import encoder_architecture
from pairzoo.pipelines.pipeline_conditional_similarity import encode_bi_inputs, encode_tri_inputs
from pairzoo.training.collators import BiEncoderCollator, TriEncoderCollator, make_collator

S1 = [r["sentence1"] for r in ROWS]
S2 = [r["sentence2"] for r in ROWS]
COND = [r["condition"] for r in ROWS]


class _CsrHarness(ModelHarness):
    model_name = "csr"

    def make_inputs(self, tokenizer, rows, model):
        encode = encode_tri_inputs if model.input_format == "tri" else encode_bi_inputs
        batch = encode(
            tokenizer, [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], [r["condition"] for r in rows]
        )
        batch["labels"] = torch.tensor([r["label"] for r in rows])
        return batch


class TestCsrTri(_CsrHarness):
    config_overrides = {"architecture": "tri", "router_layers": [0, 1]}


class TestCsrBi(_CsrHarness):
    config_overrides = {"architecture": "bi", "router_layers": [0, 1]}


def _model(backbone: str = "tiny-bert", **overrides):
    set_seed(0)
    return create_model("csr", backbone=backbone, **overrides).eval()


def _masked_softmax(scores, mask):
    scores = scores.masked_fill(mask == 0, -math.inf)
    return torch.softmax(scores, -1)


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
@pytest.mark.parametrize("architecture", ["tri", "bi"])
def test_without_router_equals_plain_backbone_mean_pooling(backbone, architecture):
    model = _model(backbone, architecture=architecture, use_router=False)
    tokenizer = load_tokenizer(backbone)
    with torch.no_grad():
        if architecture == "tri":
            batch = encode_tri_inputs(tokenizer, S1, None, COND)
            out = model(**batch)
            hidden = model.backbone(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            mask = batch["attention_mask"]
        else:
            batch = encode_bi_inputs(tokenizer, S1, None, COND)
            out = model(**batch)
            hidden = model.backbone(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            mask = batch["sentence_mask"]
    m = mask.unsqueeze(-1).float()
    expected = (hidden.last_hidden_state * m).sum(1) / m.sum(1)
    torch.testing.assert_close(out.embeddings, expected, rtol=0, atol=0)


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
@pytest.mark.parametrize("router_scale", ["head", "hidden"])
def test_tri_router_recomputed_from_backbone_projections(backbone, router_scale):
    """w = softmax(q_c . K / sqrt(d_k)) and h = (1 + w) * h' in the last layer, recomputed by hand."""
    model = _model(backbone, router_scale=router_scale)
    tokenizer = load_tokenizer(backbone)
    batch = encode_tri_inputs(tokenizer, S1, S2, COND)
    with torch.no_grad():
        out = model(**batch, output_internals=True)
        layer = model.backbone.encoder.layer[-1]
        attn = layer.attention.self
        cond = model.backbone(
            input_ids=batch["input_ids_3"], attention_mask=batch["attention_mask_3"], output_hidden_states=True
        )
        q_c = attn.query(cond.hidden_states[-2][:, 0])  # (B, d), full width
        sent = model.backbone(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True
        )
        h_in = sent.hidden_states[-2]
        keys = attn.key(h_in)
        d_k = attn.attention_head_size if router_scale == "head" else model.config.backbone_config.hidden_size
        w = _masked_softmax((keys * q_c[:, None]).sum(-1) / math.sqrt(d_k), batch["attention_mask"])
        torch.testing.assert_close(out.router_weights[0], w, atol=1e-6, rtol=1e-5)
        # the whole routed block by hand: eager attention per head, context * (1 + w), output projection, FFN
        b, length, d = h_in.shape
        heads, size = attn.num_attention_heads, attn.attention_head_size

        def split(x):
            return x.view(b, length, heads, size).transpose(1, 2)

        q, k, v = split(attn.query(h_in)), split(keys), split(attn.value(h_in))
        probs = _masked_softmax(q @ k.transpose(-1, -2) / math.sqrt(size), batch["attention_mask"][:, None, None])
        context = (probs @ v).transpose(1, 2).reshape(b, length, d) * (1 + w).unsqueeze(-1)
        attn_out = layer.attention.output.LayerNorm(layer.attention.output.dense(context) + h_in)
        last = layer.output.LayerNorm(layer.output.dense(layer.intermediate(attn_out)) + attn_out)
        m = batch["attention_mask"].unsqueeze(-1).float()
        torch.testing.assert_close(out.embeddings, (last * m).sum(1) / m.sum(1), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
def test_bi_router_weights_are_head_averaged_eager_attention(backbone):
    model = _model(backbone, architecture="bi")
    tokenizer = load_tokenizer(backbone)
    batch = encode_bi_inputs(tokenizer, S1, None, COND)
    with torch.no_grad():
        out = model(**batch, output_internals=True)  # default sdpa attention
        model.backbone.set_attn_implementation("eager")
        eager = model.backbone(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_attentions=True
        )
    first_condition = batch["condition_mask"].argmax(1)
    rows = torch.arange(len(first_condition))
    attention = eager.attentions[-1].mean(1)[rows, first_condition]  # (B, L) over all tokens
    attention = attention * batch["sentence_mask"]
    expected = attention / attention.sum(-1, keepdim=True)
    torch.testing.assert_close(out.router_weights[0], expected, atol=1e-6, rtol=1e-5)
    assert torch.allclose(out.router_weights[0].sum(-1), torch.ones(len(rows)))
    assert (out.router_weights[0][batch["sentence_mask"] == 0] == 0).all()


@pytest.mark.parametrize("weighting", ["only", "one_plus"])
def test_weighting_only_and_heavy_router_change_the_embedding(weighting):
    tokenizer = load_tokenizer("tiny-bert")
    batch = encode_tri_inputs(tokenizer, S1, S2, COND)
    plain = _model(use_router=False)
    routed = _model(weighting=weighting, router="heavy" if weighting == "one_plus" else "key")
    routed.backbone.load_state_dict(plain.backbone.state_dict())
    with torch.no_grad():
        a, b = plain(**batch).embeddings, routed(**batch).embeddings
    assert not torch.allclose(a, b, atol=1e-4)
    if weighting == "one_plus":
        assert {n.split(".")[0] for n, _ in routed.named_parameters()} >= {"router_query", "router_key"}


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
def test_cache_path_equals_direct_forward(backbone, tmp_path):
    model = _model(backbone, router_layers=[1], tri_head="hadamard")
    tokenizer = load_tokenizer(backbone)
    sentences = S1 + S2
    conditions = [*COND, "The colour of the clothes."]
    cache_s = model.encode_sentences(sentences, tokenizer, batch_size=2)
    cache_c = model.encode_conditions(conditions, tokenizer, batch_size=3)
    cached = model.embed(cache_s, cache_c, batch_size=5)
    assert cached.shape == (len(sentences), len(conditions), model.config.backbone_config.hidden_size)
    with torch.no_grad():
        for j, condition in enumerate(conditions):
            direct = model(**encode_tri_inputs(tokenizer, sentences, None, [condition] * len(sentences))).embeddings
            torch.testing.assert_close(cached[:, j], direct, atol=1e-5, rtol=0)
    reloaded = model.embed(load_cache(save_cache(cache_s, tmp_path / "s.safetensors")), cache_c)
    assert_close_after_reload(reloaded, cached)
    assert load_cache(save_cache(cache_c, tmp_path / "c.safetensors")).metadata == cache_c.metadata


def test_cache_reads_long_and_left_padded_texts_as_the_forward_does():
    """The cache reads a sentence over 128 tokens (cut, as in the forward, at the tokenizer's limit) and a
    left-padding tokenizer as the forward does: the forward's embeddings, in the callers' order."""
    model = _model(router_layers=[1], tri_head="hadamard")
    tokenizer = load_tokenizer("tiny-bert")
    long = " ".join(["the red car parked near the old station"] * 40)
    assert len(tokenizer(long)["input_ids"]) > 150
    sentences = [S1[0], long, S2[1], S1[2]]
    condition = COND[0]
    with torch.no_grad():
        direct = model(**encode_tri_inputs(tokenizer, sentences, None, [condition] * len(sentences))).embeddings
    tokenizer.padding_side = "left"
    cache_s = model.encode_sentences(sentences, tokenizer, batch_size=3)
    cache_c = model.encode_conditions([condition], tokenizer)
    assert cache_s.attention_mask.sum(1).tolist() == [len(tokenizer(t)["input_ids"]) for t in sentences]
    torch.testing.assert_close(model.embed(cache_s, cache_c)[:, 0], direct, atol=1e-5, rtol=0)
    with torch.no_grad():  # the forward's own encoding pads on the right whatever the tokenizer's side
        left = model(**encode_tri_inputs(tokenizer, sentences, None, [condition] * len(sentences))).embeddings
    torch.testing.assert_close(left, direct, atol=1e-5, rtol=0)
    flipped = type(cache_s)(cache_s.hidden_states, cache_s.attention_mask.flip(1), cache_s.metadata)
    with pytest.raises(ValueError, match="not right-padded"):
        model.embed(flipped, cache_c)
    for bad in (0, True, 10_000):
        with pytest.raises(ValueError, match="max_length|batch_size"):
            model.encode_sentences(sentences, tokenizer, max_length=bad)
    with pytest.raises(ValueError, match="batch_size"):
        model.encode_conditions([condition], tokenizer, batch_size=0)


def test_cache_limits_texts_to_the_positions_an_offset_backbone_can_hold():
    """RoBERTa's 514 position embeddings hold 512 tokens (positions start after the padding index): the cache cuts
    a long text there even when the tokenizer states no limit, and refuses a larger `max_length` by name."""
    model = _model("tiny-roberta", router_layers=[1])
    tokenizer = load_tokenizer("tiny-roberta")
    long = " ".join(["word"] * 1000)
    at_limit = model.encode_sentences([long, S1[0]], tokenizer, max_length=512)
    tokenizer.model_max_length = int(1e30)  # what a tokenizer saved without a limit reports
    unlimited = model.encode_sentences([long, S1[0]], tokenizer)
    assert unlimited.attention_mask.sum(1).tolist() == at_limit.attention_mask.sum(1).tolist()
    assert int(unlimited.attention_mask.sum(1)[0]) == 512
    torch.testing.assert_close(unlimited.hidden_states, at_limit.hidden_states)
    for bad in (513, 514):
        with pytest.raises(ValueError, match="`max_length` must be at most 512"):
            model.encode_conditions([long], tokenizer, max_length=bad)


def test_cache_bad_input_is_rejected(tmp_path):
    tokenizer = load_tokenizer("tiny-bert")
    model = _model(router_layers=[1])
    cache_s, cache_c = model.encode_sentences(S1, tokenizer), model.encode_conditions(COND, tokenizer)
    with pytest.raises(ValueError, match="empty"):
        model.encode_sentences([], tokenizer)
    with pytest.raises(ValueError, match="empty"):
        model.encode_conditions([], tokenizer)
    with pytest.raises(ValueError, match="router_layers"):
        _model(router_layers=[0]).embed(cache_s, cache_c)
    other = _model(router_layers=[1])
    with torch.no_grad():
        other.backbone.embeddings.word_embeddings.weight.add_(0.1)
    with pytest.raises(ValueError, match="weights"):
        other.embed(cache_s, cache_c)
    with pytest.raises(ValueError, match="expected a ConditionCache"):
        model.embed(cache_s, cache_s)
    with pytest.raises(ValueError, match="architecture='tri'"):
        _model(architecture="bi").encode_sentences(S1, tokenizer)
    with pytest.raises(ValueError, match="out of range"):
        _model(router_layers=[2])
    with pytest.raises(ValueError, match="not a CSR cache"):
        from safetensors.torch import save_file

        save_file({"x": torch.zeros(1)}, str(tmp_path / "x.safetensors"))
        load_cache(tmp_path / "x.safetensors")


def _pooled(model, ids, mask):
    hidden = model.backbone(input_ids=ids, attention_mask=mask).last_hidden_state
    return (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)


def test_tri_heads_follow_the_c_sts_fusion():
    tokenizer = load_tokenizer("tiny-bert")
    batch = encode_tri_inputs(tokenizer, S1, None, COND)
    for head in ("hadamard", "concat"):
        model = _model(use_router=False, tri_head=head)
        with torch.no_grad():
            out = model(**batch).embeddings
            s = _pooled(model, batch["input_ids"], batch["attention_mask"])
            c = _pooled(model, batch["input_ids_3"], batch["attention_mask_3"])
            if head == "hadamard":
                linear = model.condition_transform[1]
                expected = s * (c @ linear.weight.T + linear.bias)
            else:
                linear = model.concat_transform[1]
                expected = model.concat_transform[2](torch.cat([s, c], -1) @ linear.weight.T + linear.bias)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_scores_and_loss_use_cosine_on_the_label_scale():
    tokenizer = load_tokenizer("tiny-bert")
    model = _model(label_min=0.0, label_max=5.0)
    labels = torch.tensor([r["label"] for r in ROWS])
    with torch.no_grad():
        out = model(**encode_tri_inputs(tokenizer, S1, S2, COND), labels=labels)
    cos = torch.nn.functional.cosine_similarity(out.embeddings, out.embeddings_2)
    torch.testing.assert_close(out.scores, 5 * cos)
    torch.testing.assert_close(out.loss, torch.mean((cos - labels / 5) ** 2))


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"architecture": "cross"}, "architecture"),
        ({"router": "mlp"}, "router"),
        ({"weighting": "half"}, "weighting"),
        ({"pooling": "max"}, "pooling"),
        ({"tri_head": "sum"}, "tri_head"),
        ({"architecture": "bi", "tri_head": "concat"}, "tri_head"),
        ({"router_layers": 1}, "router_layers"),
        ({"router_layers": []}, "router_layers"),
        ({"router_layers": [-1]}, "router_layers"),
        ({"router_layers": [6], "backbone_config": {"model_type": "bert", "num_hidden_layers": 6}}, "router_layers"),
        ({"router_scale": "none"}, "router_scale"),
        ({"label_min": 5.0, "label_max": 1.0}, "label_max"),
        ({"num_labels": 3}, "num_labels"),
        ({"id2label": {0: "a", 1: "b"}}, "num_labels"),
    ],
)
def test_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        CsrConfig(**kwargs)


def test_encoders_collators_and_errors():
    tokenizer = load_tokenizer("tiny-bert")
    tri = encode_tri_inputs(tokenizer, S1, S2, COND)
    assert set(tri) == {f"{k}{s}" for k in ("input_ids", "attention_mask") for s in ("", "_2", "_3")}
    bi = encode_bi_inputs(tokenizer, S1, S2, COND)
    assert (bi["sentence_mask"] + bi["condition_mask"] == bi["attention_mask"]).all()
    assert (bi["input_ids"][:, 0] == tokenizer.cls_token_id).all()
    with pytest.raises(ValueError, match="condition"):
        encode_bi_inputs(tokenizer, S1, S2, None)
    with pytest.raises(ValueError, match="sentence2"):
        encode_tri_inputs(tokenizer, S1, S2[:1], COND)
    for encode in (encode_tri_inputs, encode_bi_inputs):
        with pytest.raises(ValueError, match="empty"):
            encode(tokenizer, [], None, [])
    with pytest.raises(ValueError, match="condition"):
        encode_tri_inputs(tokenizer, S1, None, ["A place.", " ", "x"])
    assert isinstance(make_collator(_model(), tokenizer, 64), TriEncoderCollator)
    collator = make_collator(_model(architecture="bi"), tokenizer, 64, (1.0, 5.0))
    assert isinstance(collator, BiEncoderCollator)
    assert torch.equal(collator(ROWS)["labels"], torch.tensor([r["label"] for r in ROWS]))
    with pytest.raises(ValueError, match="outside"):
        collator([{**ROWS[0], "label": 7.0}])
    with pytest.raises(ValueError, match="input_ids_3"):
        _model()(**{k: v for k, v in tri.items() if not k.endswith("_3")})


@pytest.mark.parametrize("architecture", ["tri", "bi"])
def test_pipeline_in_fresh_process_matches_model(architecture, tmp_path):
    tokenizer = load_tokenizer("tiny-bert")
    model = _model(architecture=architecture)
    folder = export_model(model, tokenizer, tmp_path / "export", eval_results=[])
    examples = [{k: r[k] for k in ("sentence1", "sentence2", "condition")} for r in ROWS[:2]]
    result = score_in_fresh_process(folder, examples)
    encode = encode_tri_inputs if architecture == "tri" else encode_bi_inputs
    with torch.no_grad():
        for example, got in zip(examples, result["outputs"]):
            expected = model(**encode(tokenizer, *example.values())).scores
            assert abs(got["score"] - float(expected)) < 1e-5


def test_router_weight_plot(tmp_path):
    from pairzoo.visualize import plot_router_weights

    path = plot_router_weights(
        _model(), load_tokenizer("tiny-bert"), ROWS[0]["sentence1"], COND, tmp_path / "router.png"
    )
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("backbone", TINY_ARCHITECTURES)
def test_every_architecture_routes_and_trains(backbone):
    """On each encoder architecture: the tri- and bi-encoder routers (and the reference router where positions are
    absolute) run forward and backward with a finite gradient on every parameter; without routers the embedding is
    the backbone's own mean-pooled output."""
    tokenizer = load_tokenizer(backbone)
    labels = torch.tensor([r["label"] for r in ROWS[:2]])
    variants = [
        ({"router_layers": [0, 1], "tri_head": "hadamard"}, encode_tri_inputs),
        ({"architecture": "bi", "router_layers": [0, 1]}, encode_bi_inputs),
    ]
    if encoder_architecture(backbone_config(backbone)).positions == "absolute":
        variants.append(({"router": "reference", "router_layers": [1]}, encode_tri_inputs))
    for overrides, encode in variants:
        model = _model(backbone, **overrides).train()
        out = model(**encode(tokenizer, S1[:2], S2[:2], COND[:2]), labels=labels, output_internals=True)
        out.loss.backward()
        for name, param in model.named_parameters():
            assert param.grad is not None and torch.isfinite(param.grad).all(), (overrides, name)
        assert len(out.router_weights) == len(model.routed_layers)
        assert all(torch.isfinite(w).all() and (w[out.router_mask == 0] == 0).all() for w in out.router_weights)
    plain = _model(backbone, use_router=False)
    batch = encode_tri_inputs(tokenizer, S1[:2], None, COND[:2])
    with torch.no_grad():
        hidden = plain.backbone(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        m = batch["attention_mask"].unsqueeze(-1).float()
        torch.testing.assert_close(plain(**batch).embeddings, (hidden * m).sum(1) / m.sum(1), rtol=0, atol=0)


def _linear64(x, linear, rows=slice(None)):
    """`linear` (or the `rows` of its output) applied by hand."""
    y = x @ linear.weight[rows].T
    return y if linear.bias is None else y + linear.bias[rows]


def _norm64(x, norm):
    return torch.nn.functional.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


def _last_layer_by_hand(model):
    """The last layer of a BERT, DeBERTa-v2 or ModernBERT backbone written out: its query and key of a layer input
    (ModernBERT: of its attention norm, from the fused projection) and its block after the attention context (output
    projection, residual, norms, GELU feed-forward; ModernBERT's final norm), plus the module whose input is that
    context."""
    backbone, config = model.backbone, model.config.backbone_config
    d = config.hidden_size
    if config.model_type == "modernbert":
        assert config.hidden_activation == "gelu"
        layer = backbone.layers[-1]
        fused = layer.attn.Wqkv

        def query(h):
            return _linear64(_norm64(h, layer.attn_norm), fused, slice(0, d))

        def key(h):
            return _linear64(_norm64(h, layer.attn_norm), fused, slice(d, 2 * d))

        def rest(context, h):
            h = h + _linear64(context, layer.attn.Wo)
            x, gate = _linear64(_norm64(h, layer.mlp_norm), layer.mlp.Wi).chunk(2, -1)
            return _norm64(h + _linear64(torch.nn.functional.gelu(x) * gate, layer.mlp.Wo), backbone.final_norm)

        return query, key, rest, layer.attn.Wo
    assert config.hidden_act == "gelu"
    layer = backbone.encoder.layer[-1]
    attn, out = layer.attention.self, layer.attention.output
    names = ("query_proj", "key_proj") if config.model_type == "deberta-v2" else ("query", "key")

    def rest(context, h):
        a = _norm64(_linear64(context, out.dense) + h, out.LayerNorm)
        inner = torch.nn.functional.gelu(_linear64(a, layer.intermediate.dense))
        return _norm64(_linear64(inner, layer.output.dense) + a, layer.output.LayerNorm)

    return (
        lambda h: _linear64(h, getattr(attn, names[0])),
        lambda h: _linear64(h, getattr(attn, names[1])),
        rest,
        out.dense,
    )


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-deberta-v2", "tiny-modernbert"])
@pytest.mark.parametrize("architecture", ["tri", "bi"])
def test_routers_recomputed_in_float64(backbone, architecture):
    """The last-layer router recomputed from the backbone's own forward (relative and rotary positions included):
    tri `w = softmax(q_c . K / sqrt(d_k))`, `q_c` the last layer's query of the condition's first token and `K` its
    keys of the sentence; bi `w` the layer's own head-averaged attention of the condition's first token, renormalised
    over the sentence; then the block with its attention context times `(1 + w)`, mean-pooled."""
    model = _model(backbone, architecture=architecture).double()
    tokenizer = load_tokenizer(backbone)
    encode = encode_tri_inputs if architecture == "tri" else encode_bi_inputs
    batch = encode(tokenizer, S1, None, COND)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    query, key, rest, projection = _last_layer_by_hand(model)
    contexts = []
    handle = projection.register_forward_pre_hook(lambda module, args: contexts.append(args[0]))
    with torch.no_grad():
        out = model(**batch, output_internals=True)
        model.backbone.set_attn_implementation("eager")
        contexts.clear()
        sentence = model.backbone(
            input_ids=ids, attention_mask=mask, output_hidden_states=True, output_attentions=architecture == "bi"
        )
        handle.remove()
        h_in, context = sentence.hidden_states[-2], contexts[-1]
        size = model.config.backbone_config.hidden_size // model.config.backbone_config.num_attention_heads
        if architecture == "tri":
            condition = model.backbone(
                input_ids=batch["input_ids_3"], attention_mask=batch["attention_mask_3"], output_hidden_states=True
            )
            q_c = query(condition.hidden_states[-2][:, 0])
            w = _masked_softmax((key(h_in) * q_c[:, None]).sum(-1) / math.sqrt(size), mask)
            pool = mask
        else:
            rows = torch.arange(len(ids))
            attention = sentence.attentions[-1].mean(1)[rows, batch["condition_mask"].argmax(1)]
            attention = attention * batch["sentence_mask"]
            w = attention / attention.sum(-1, keepdim=True)
            pool = batch["sentence_mask"]
        torch.testing.assert_close(out.router_weights[0], w, atol=1e-12, rtol=1e-10)
        # eager ModernBERT leaves NaN on padding rows outside every sliding window in float64: pool by selection
        last = torch.where(pool[..., None].bool(), rest(context * (1 + w)[..., None], h_in), 0.0)
        pooled = last.sum(1) / pool.sum(1, keepdim=True)
        torch.testing.assert_close(out.embeddings, pooled, atol=1e-10, rtol=1e-10)
