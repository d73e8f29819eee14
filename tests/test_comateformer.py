"""Comateformer: harness on tiny BERT/RoBERTa, the combined-attention equations recomputed from the layer's own
projections, the head-selection rule, padding, gradients of the L1 term, config validation, export and the plot."""

import copy
import inspect
import json

import pytest
import torch
from model_harness import ROWS, ModelHarness, assert_close_after_reload
from transformers import AutoModel, EvalPrediction, set_seed

from pairzoo import ComateformerConfig, ComateformerModel, create_model, load_tokenizer
from pairzoo.backbones import TINY_ARCHITECTURES
from pairzoo.hub_cards import export_model, run_without_pairzoo
from pairzoo.modeling.encoders import (
    attention_module,
    attention_probabilities,
    attention_scores,
    head_shape,
    output_projection,
    project,
    projection_modules,
)
from pairzoo.modeling.modeling_comateformer import combined_attention_maps, num_combined_heads
from pairzoo.training.collators import SentencePairCollator, make_collator

TINY = {"combined_layers": [0, 1], "combined_head_fraction": [0.5, 0.3]}  # tiny backbones: 2 layers, 4 heads


def pair_inputs(tokenizer, rows: list[dict], num_labels: int = 1) -> dict:
    """The tokenizer's pair encoding of `rows` (padded), with labels, as the training collator builds it."""
    batch = dict(
        tokenizer([r["sentence1"] for r in rows], [r["sentence2"] for r in rows], padding=True, return_tensors="pt")
    )
    labels = [r["label"] for r in rows]
    if num_labels > 1:
        labels = [int(label) % num_labels for label in labels]
    batch["labels"] = torch.tensor(labels)
    return batch


class TestComateformer(ModelHarness):
    model_name = "comateformer"
    config_overrides = TINY

    def make_inputs(self, tokenizer, rows, model):
        return pair_inputs(tokenizer, rows, model.config.num_labels)


class TestComateformerClassificationAblation(ModelHarness):
    """Classification with every ablation switch moved off its default; RoBERTa only (BERT is covered above)."""

    model_name = "comateformer"
    config_overrides = {
        "combined_layers": [1],
        "combined_head_fraction": 1.0,
        "num_labels": 3,
        "gate": "center",
        "affinity_fn": "sigmoid",
        "difference_fn": "arctan",
        "center_affinity": True,
        "alpha": 0.5,
        "beta": 2.0,
    }

    @pytest.fixture(params=["tiny-roberta"])
    def backbone(self, request) -> str:
        return request.param

    def make_inputs(self, tokenizer, rows, model):
        return pair_inputs(tokenizer, rows, model.config.num_labels)


class TestComateformerGentleIntegration(ModelHarness):
    """Regression with every non-paper option on (mix, L1 key normalisation, gate bias, no dropout on M, mean pooling,
    BCE); BERT only (the options do not depend on the backbone family)."""

    model_name = "comateformer"
    config_overrides = {
        **TINY,
        "integration": "mix",
        "mix_scale": 10.0,
        "key_normalization": "l1",
        "gate_bias": 1.0,
        "combined_dropout": False,
        "pooling": "mean",
        "regression_loss": "bce",
    }

    @pytest.fixture(params=["tiny-bert"])
    def backbone(self, request) -> str:
        return request.param

    def make_inputs(self, tokenizer, rows, model):
        return pair_inputs(tokenizer, rows, model.config.num_labels)


# ------------------------------------------------------------------------------------------- independent references


def reference_maps(
    q,
    k,
    keep,
    alpha=1.0,
    beta=1.0,
    gate="double_sigmoid",
    affinity_fn="tanh",
    difference_fn="sigmoid",
    center_affinity=False,
    center_difference=False,
    gate_bias=0.0,
    key_normalization="none",
    scores=None,
    **_,
):
    """E, N, gate, M written out naively: the (..., L, L, d) difference tensor, explicit masked row means and sums;
    with `scores` (a layer's own attention scores, position terms included) E = alpha * scores."""
    d = q.shape[-1]
    e = alpha * torch.einsum("...id,...jd->...ij", q, k) / d**0.5 if scores is None else alpha * scores
    n = -beta * (q[..., :, None, :] - k[..., None, :, :]).abs().sum(-1) / d**0.5
    w = torch.ones_like(e) if keep is None else keep.expand_as(e).to(e.dtype)

    def centre(x):
        return x - (x * w).sum(-1, keepdim=True) / w.sum(-1, keepdim=True)

    e_in = centre(e) if center_affinity else e
    n_in = centre(n) if center_difference or gate == "center" else n
    phi = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "arctan": torch.atan}[difference_fn]
    psi = {"tanh": torch.tanh, "sigmoid": torch.sigmoid}[affinity_fn]
    g = phi(n_in + gate_bias) * (2 if gate == "double_sigmoid" else 1)
    m = psi(e_in) * g * w
    if key_normalization == "count":
        m = m / w.sum(-1, keepdim=True)
    elif key_normalization == "l1":
        m = m / (m.abs().sum(-1, keepdim=True) + 1e-6)
    return e, n, g, m


def capture_self_attention(model, layer: int, inputs: dict):
    """Input hidden states and output (before the output projection) of `layer`'s self-attention module."""
    seen = {}
    module = model.backbone.encoder.layer[layer].attention.self
    pre = module.register_forward_pre_hook(lambda m, args, kwargs: seen.update(hidden=args[0]), with_kwargs=True)
    post = module.register_forward_hook(lambda m, args, output: seen.update(output=output[0]))
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        pre.remove()
        post.remove()
    return module, seen["hidden"], seen["output"]


def reference_heads(module, hidden, attention_mask, config):
    """Every head's output (B, H, L, d) of a combined layer, from the module's own parameters in float64: combined
    heads by `reference_maps` (mixed with the softmax head by g = mix_scale * combined_mix under "mix"), the others
    softmax attention. Also returns the combined heads' C, their softmax outputs S and their gates."""
    heads, size = module.num_attention_heads, module.attention_head_size
    hidden = hidden.double()

    def project(linear):
        out = hidden @ linear.weight.double().T + linear.bias.double()
        return out.view(*hidden.shape[:2], heads, size).transpose(1, 2)

    q, k, v = project(module.query), project(module.key), project(module.value)
    keep = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, Lk)
    scores = (q @ k.transpose(-1, -2)) / size**0.5
    softmax = scores.masked_fill(~keep, float("-inf")).softmax(-1) @ v
    h = module.num_combined_heads
    _, _, gate, m = reference_maps(q[:, :h], k[:, :h], keep, **config.to_dict())
    combined = m @ v[:, :h]
    out = softmax.clone()
    if config.integration == "mix":
        g = config.mix_scale * module.combined_mix.detach().double()[None, :, None, None]
        out[:, :h] = softmax[:, :h] + g * (combined - softmax[:, :h])
    else:
        out[:, :h] = combined
    return out, combined, softmax[:, :h], gate


INTEGRATION_OPTIONS = [
    {},
    {"key_normalization": "count", "gate_bias": 2.0},
    {"key_normalization": "l1", "center_difference": True},
    {"integration": "mix"},
    {"integration": "mix", "key_normalization": "l1", "mix_scale": 3.0, "gate": "center", "gate_bias": -0.5},
]


@pytest.mark.parametrize("settings", INTEGRATION_OPTIONS)
@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
def test_heads_recomputed_from_the_layers_own_projections(backbone, settings):
    """Every head of a combined layer recomputed in float64 from the layer's own W_Q, W_K, W_V (and mix parameter):
    combined heads M V (normalised, biased, mixed as configured), the others softmax attention; padding keys
    contribute nothing; the number of combined heads is ceil(f * H)."""
    set_seed(0)
    model = create_model(
        "comateformer",
        backbone=backbone,
        combined_layers=[1],
        combined_head_fraction=0.3,
        alpha=1.3,
        beta=0.7,
        **settings,
    ).eval()
    tokenizer = load_tokenizer(backbone)
    inputs = pair_inputs(tokenizer, ROWS)
    inputs.pop("labels")
    assert inputs["attention_mask"].min() == 0, "the batch must contain padding"
    module = model.backbone.encoder.layer[1].attention.self
    assert module.num_combined_heads == 2 == num_combined_heads(0.3, module.num_attention_heads)  # ceil(0.3 * 4)
    if model.config.integration == "mix":
        assert not module.combined_mix.any(), "the mix starts at zero"
        with torch.no_grad():
            module.combined_mix.copy_(torch.tensor([0.4, -0.9]) / model.config.mix_scale)
    module, hidden, output = capture_self_attention(model, 1, inputs)
    expected, *_ = reference_heads(module, hidden, inputs["attention_mask"], model.config)
    got = output.view(*hidden.shape[:2], module.num_attention_heads, -1).transpose(1, 2)
    for h in range(module.num_attention_heads):
        torch.testing.assert_close(got[:, h].double(), expected[:, h], rtol=0, atol=1e-5, msg=f"head {h}")


def attention_calls(backbone, layer: int, run) -> list[dict]:
    """What layer `layer`'s attention module received (its forward's arguments, by name) and the context entering
    its output projection (B, L, H, d), per call of `run()`: one call, or one per depth where the module is shared
    (ALBERT)."""
    module, projection = attention_module(backbone, layer), output_projection(backbone, layer)
    signature = inspect.signature(module.forward)
    heads, size = head_shape(backbone.config)
    calls, contexts = [], []

    def before_module(m, args, kwargs):
        calls.append(dict(signature.bind(*args, **kwargs).arguments))

    def before_projection(m, args):
        contexts.append(args[0].unflatten(-1, (heads, size)))

    handles = [
        module.register_forward_pre_hook(before_module, with_kwargs=True),
        projection.register_forward_pre_hook(before_projection),
    ]
    try:
        with torch.no_grad():
            run()
    finally:
        for handle in handles:
            handle.remove()
    return [{**call, "context": context} for call, context in zip(calls, contexts, strict=True)]


def rotate_half(x):
    return torch.cat([-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]], dim=-1)


def reference_layer(backbone, layer: int, call: dict, config, count: int, mix=None):
    """Every head's output (B, H, L, d) of a combined layer in float64 from its own weights and the inputs of its
    attention module's call: the projections (fused ones split), the architecture's position information (ModernBERT's
    rotation of q and k, MPNet's bias and DeBERTa's c2p/p2c terms added to the score), softmax heads and, in the first
    `count` heads, `reference_maps` on the layer's scores, mixed with weight g under "mix". Also returns the keep
    mask."""
    model_type = backbone.config.model_type
    heads, size = head_shape(backbone.config)
    hidden = call["hidden_states"].double()
    linears = projection_modules(backbone, layer)

    def linear(module):
        out = hidden @ module.weight.double().T
        return out if module.bias is None else out + module.bias.double()

    if len(linears) == 1:
        q, k, v = linear(linears[0]).unflatten(-1, (3, heads, size)).unbind(2)
    else:
        q, k, v = (linear(module).unflatten(-1, (heads, size)) for module in linears)
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    if model_type == "modernbert":
        cos, sin = (t.double().unsqueeze(1) for t in call["position_embeddings"])
        q, k = (x * cos + rotate_half(x) * sin for x in (q, k))
    if model_type == "deberta-v2":  # DeBERTa's own disentangled terms, in float64, on the same q and k
        attention = copy.deepcopy(attention_module(backbone, layer)).double()
        flat_q, flat_k = (x.reshape(-1, *x.shape[-2:]) for x in (q, k))
        bias = attention.disentangled_attention_bias(
            flat_q, flat_k, call["relative_pos"], call["rel_embeddings"].double(), 3
        )
        scores = (q @ k.transpose(-1, -2)) / (3 * size) ** 0.5 + bias.view(*q.shape[:2], *bias.shape[-2:])
    else:
        scores = (q @ k.transpose(-1, -2)) / size**0.5
        if model_type == "mpnet":
            scores = scores + call["position_bias"].double()
    mask = call["attention_mask"]
    if mask.dtype == torch.bool:
        keep = mask
    elif mask.is_floating_point():
        keep = mask > torch.finfo(mask.dtype).min / 2
    else:
        keep = mask != 0
    softmax = scores.masked_fill(~keep, float("-inf")).softmax(-1) @ v
    h = count
    _, _, _, m = reference_maps(q[:, :h], k[:, :h], keep, scores=scores[:, :h], **config.to_dict())
    out = softmax.clone()
    out[:, :h] = m @ v[:, :h] if mix is None else softmax[:, :h] + mix[:, None, None] * (m @ v[:, :h] - softmax[:, :h])
    return out, keep


OTHER_ARCHITECTURES = ["tiny-distilbert", "tiny-electra-small", "tiny-modernbert", "tiny-mpnet", "tiny-deberta-v2"]


@pytest.mark.parametrize(
    "settings", [{}, {"integration": "mix", "key_normalization": "l1", "gate": "center", "gate_bias": -0.5}]
)
@pytest.mark.parametrize("backbone", [*OTHER_ARCHITECTURES, "tiny-albert"])
def test_heads_recomputed_on_other_architectures(backbone, settings):
    """On DistilBERT, ELECTRA-small, ModernBERT (rotary q and k, a sliding-window layer), MPNet (relative bias),
    DeBERTa-v3 (c2p/p2c terms) and ALBERT (one layer shared by every depth): every head of combined layer 1
    recomputed in float64 from the layer's own weights and the inputs its attention module received, and compared
    with the context entering its output projection. On ALBERT the shared layer stays plain at depth 0."""
    set_seed(0)
    model = create_model(
        "comateformer",
        backbone=backbone,
        combined_layers=[1],
        combined_head_fraction=0.3,
        alpha=1.3,
        beta=0.7,
        **settings,
    ).eval()
    inputs = pair_inputs(load_tokenizer(backbone), ROWS)
    inputs.pop("labels")
    assert inputs["attention_mask"].min() == 0, "the batch must contain padding"
    backbone_model = model.backbone
    module = attention_module(backbone_model, 1)
    assert module.num_combined_heads == 2  # ceil(0.3 * 4)
    mix = None
    if model.config.integration == "mix":
        assert not module.combined_mix.any(), "the mix starts at zero"
        mix = torch.tensor([0.4, -0.9], dtype=torch.float64)
        with torch.no_grad():
            module.combined_mix.copy_(mix / model.config.mix_scale)
    calls = attention_calls(backbone_model, 1, lambda: model(**inputs))
    shared = attention_module(backbone_model, 0) is module
    assert len(calls) == (2 if shared else 1)
    valid = inputs["attention_mask"].bool()  # padding query rows are compared nowhere: no token reads them
    if shared:  # depth 0 runs the same module with softmax attention on every head
        expected, _ = reference_layer(backbone_model, 0, calls[0], model.config, count=0)
        got = calls[0]["context"].transpose(1, 2).double()
        for h in range(4):
            torch.testing.assert_close(got[:, h][valid], expected[:, h][valid], rtol=0, atol=1e-5, msg=f"depth 0 {h}")
    expected, keep = reference_layer(backbone_model, 1, calls[-1], model.config, count=2, mix=mix)
    got = calls[-1]["context"].transpose(1, 2).double()
    if backbone == "tiny-modernbert":
        assert not keep[:, 0][valid].all(), "a sliding-window layer: rows miss keys"
    for h in range(4):
        torch.testing.assert_close(got[:, h][valid], expected[:, h][valid], rtol=0, atol=1e-5, msg=f"head {h}")


def test_albert_shared_layer_follows_the_depth():
    """ALBERT runs one layer at every depth: with combined heads at depths 0 and 2 only (2 and 1 heads), each call
    of the shared module gets its depth's heads (float64 recomputation per depth), the depths share one g per head,
    and every forward starts again at depth 0 (a second forward gives the same output)."""
    from pairzoo.backbones import tiny_backbone_config

    set_seed(0)
    backbone_config = tiny_backbone_config("tiny-albert")
    backbone_config.num_hidden_layers = 3
    config = ComateformerConfig(
        backbone_config=backbone_config,
        combined_layers=[0, 2],
        combined_head_fraction=[0.5, 0.25],
        integration="mix",
        key_normalization="l1",
    )
    model = ComateformerModel(config).eval()
    module = attention_module(model.backbone, 0)
    assert all(attention_module(model.backbone, depth) is module for depth in (1, 2))
    assert [name for name, _ in model.named_parameters() if name.endswith("combined_mix")] == [
        "backbone.encoder.albert_layer_groups.0.albert_layers.0.attention.combined_mix"
    ]
    mix = torch.tensor([0.4, -0.9], dtype=torch.float64)
    with torch.no_grad():
        module.combined_mix.copy_(mix / config.mix_scale)
    inputs = pair_inputs(load_tokenizer("tiny-albert"), ROWS)
    inputs.pop("labels")
    valid = inputs["attention_mask"].bool()
    outputs = []
    calls = attention_calls(model.backbone, 0, lambda: outputs.append(model(**inputs, output_internals=True)))
    assert [m.shape[1] for m in outputs[0].combined_attention] == [2, 1]
    assert len(calls) == 3
    for depth, count in enumerate((2, 0, 1)):
        expected, _ = reference_layer(model.backbone, 0, calls[depth], config, count, mix=mix[:count])
        got = calls[depth]["context"].transpose(1, 2).double()
        for h in range(4):
            torch.testing.assert_close(got[:, h][valid], expected[:, h][valid], rtol=0, atol=1e-5, msg=f"{depth} {h}")
    with torch.no_grad():
        again = model(**inputs).last_hidden_state
    torch.testing.assert_close(again, outputs[0].last_hidden_state, rtol=0, atol=0)


@pytest.mark.parametrize("backbone", TINY_ARCHITECTURES)
def test_affinity_is_the_layers_own_attention_score(backbone):
    """The layer's own attention scores, position terms included, are what E scales: with alpha = 1 the softmax of
    E (and of `encoders.attention_scores`) over the keys the layer attends to gives the layer's own probabilities
    (`encoders.attention_probabilities` on the plain backbone) in every head and non-padding query row."""
    set_seed(0)
    model = create_model("comateformer", backbone=backbone, combined_layers=[1], combined_head_fraction=1.0).eval()
    plain = create_model("comateformer", backbone=backbone, combined_layers=[], combined_head_fraction=[]).eval()
    plain.load_state_dict(model.state_dict())
    inputs = pair_inputs(load_tokenizer(backbone), ROWS)
    inputs.pop("labels")
    mask = inputs["attention_mask"]
    with torch.no_grad():
        affinity = model(**inputs, output_internals=True).affinity[0]
        hidden = plain(**inputs, output_hidden_states=True).hidden_states[1]
        probabilities = attention_probabilities(plain.backbone, 1, hidden, mask)
    call = attention_calls(plain.backbone, 1, lambda: plain(**inputs))[-1]
    heads, size = head_shape(plain.backbone.config)
    query, key = (
        project(plain.backbone, 1, which, call["hidden_states"]).unflatten(-1, (heads, size)).transpose(1, 2)
        for which in ("query", "key")
    )
    with torch.no_grad():
        scores = attention_scores(plain.backbone, 1, query, key, call)
    kept = probabilities > 0
    valid = mask.bool()
    assert not kept.all() and affinity.shape == probabilities.shape == scores.shape
    for name, logits in (("E", affinity), ("attention_scores", scores)):
        softmax = logits.masked_fill(~kept, float("-inf")).softmax(-1)
        torch.testing.assert_close(
            softmax.transpose(1, 2)[valid], probabilities.transpose(1, 2)[valid], rtol=0, atol=1e-6, msg=name
        )


@pytest.mark.parametrize("backbone", TINY_ARCHITECTURES)
def test_every_architecture_trains_with_combined_heads(backbone):
    """Create -> training forward on a pair batch -> backward: every parameter outside the embeddings (whose rows of
    absent tokens get none) gets a finite, nonzero gradient, the mix gates included; each combined layer logs its
    statistics."""
    set_seed(0)
    model = create_model("comateformer", backbone=backbone, **TINY, integration="mix").train()
    inputs = pair_inputs(load_tokenizer(backbone), ROWS[:2])
    out = model(**inputs, output_internals=True)
    assert [m.shape[1] for m in out.combined_attention] == [2, 2]
    out.loss.backward()
    gates = [name for name, _ in model.named_parameters() if name.endswith("combined_mix")]
    assert len(gates) == (1 if backbone == "tiny-albert" else 2)  # ALBERT's depths share their layer (and g)
    for name, parameter in model.named_parameters():
        if "embeddings" in name:
            continue
        assert parameter.grad is not None and parameter.grad.any(), f"no gradient reached {name}"
        assert torch.isfinite(parameter.grad).all(), name
    stats = model.training_stats()
    assert {f"comateformer/layer{i}/{n}" for i in (0, 1) for n in ("gate_mean", "mv_ratio", "mix_mean")} == set(stats)
    assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())


def test_an_architecture_pairzoo_does_not_know_is_refused_when_the_model_is_built():
    config = ComateformerConfig(backbone_config={"model_type": "squeezebert", **dict(num_hidden_layers=2)})
    with pytest.raises(ValueError, match="'squeezebert' is not supported"):
        ComateformerModel(config)


@pytest.mark.parametrize(
    "fraction, heads, expected",
    [(0.5, 12, 6), (0.4, 12, 5), (0.3, 12, 4), (0.3, 10, 3), (0.0, 12, 0), (1.0, 12, 12), (0.01, 12, 1)],
)
def test_number_of_combined_heads_is_ceil_of_fraction(fraction, heads, expected):
    assert num_combined_heads(fraction, heads) == expected


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"gate": "center"},
        {"affinity_fn": "sigmoid", "difference_fn": "tanh", "center_affinity": True},
        {"difference_fn": "arctan", "center_difference": True, "alpha": 2.0, "beta": 0.5},
        {"gate_bias": 3.0},
        {"key_normalization": "count", "gate": "center", "gate_bias": -1.5},
        {"key_normalization": "l1"},
        {"key_normalization": "l1", "affinity_fn": "sigmoid", "center_difference": True},
    ],
)
def test_combined_maps_match_the_naive_equations(settings):
    """The cdist-based maps equal the written-out equations for every ablation and option, with a padding mask."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 5, 4, dtype=torch.float64), torch.randn(2, 3, 5, 4, dtype=torch.float64)
    keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)[:, None, None, :]
    config = ComateformerConfig(**settings)
    for mask in (keep, None):
        got = combined_attention_maps(q, k, mask, config)
        for name, a, b in zip(["E", "N", "gate", "M"], got, reference_maps(q, k, mask, **settings)):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12, msg=name)
        only_m = combined_attention_maps(q, k, mask, config, return_all=False)
        assert only_m[:3] == (None, None, None) and torch.equal(only_m.combined, got.combined)
    assert (got.combined != 0).all() and (combined_attention_maps(q, k, keep, config).combined[1, ..., 3:] == 0).all()


def test_key_normalization_removes_the_growth_with_length():
    """Without normalisation the L1 mass of a row of M grows with the number of keys; "l1" makes it 1 and "count"
    makes it the mean |M| of the row, at every length."""
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 64, 8, dtype=torch.float64), torch.randn(1, 1, 64, 8, dtype=torch.float64)
    mass = {}
    for length in (8, 64):
        for norm in ("none", "count", "l1"):
            config = ComateformerConfig(key_normalization=norm, center_difference=True)
            maps = combined_attention_maps(q[..., :length, :], k[..., :length, :], None, config)
            mass[norm, length] = maps.combined.abs().sum(-1).mean().item()
    assert mass["none", 64] > 4 * mass["none", 8]
    for length in (8, 64):
        assert mass["l1", length] == pytest.approx(1.0, abs=1e-6)
        assert mass["count", length] == pytest.approx(mass["none", length] / length, rel=1e-12)


@pytest.mark.parametrize(
    "gate, key_normalization",
    [("double_sigmoid", "none"), ("center", "none"), ("double_sigmoid", "l1"), ("center", "count")],
)
def test_gradient_through_the_l1_term(gate, key_normalization):
    """gradcheck (float64) of output = M V w.r.t. queries, keys and values, padding mask included."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 3, dtype=torch.float64, requires_grad=True) for _ in range(3))
    keep = torch.tensor([1, 1, 1, 0], dtype=torch.bool)[None, None, None, :]
    config = ComateformerConfig(gate=gate, center_affinity=True, key_normalization=key_normalization, gate_bias=0.5)

    def output(q, k, v):
        return combined_attention_maps(q, k, keep, config).combined @ v

    assert torch.autograd.gradcheck(output, (q, k, v), eps=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------- the model


@pytest.mark.parametrize(
    "off", [{"combined_head_fraction": [0.0, 0.0]}, {"combined_layers": [], "combined_head_fraction": []}]
)
@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
def test_no_combined_heads_is_exactly_the_backbone(backbone, off):
    tokenizer = load_tokenizer(backbone)
    inputs = pair_inputs(tokenizer, ROWS)
    inputs.pop("labels")
    set_seed(0)
    model = create_model("comateformer", backbone=backbone, **{**TINY, **off}).eval()
    encoder = ComateformerModel(model.config).eval()
    encoder.load_state_dict(model.state_dict(), strict=False)
    plain = AutoModel.from_config(model.config.backbone_config, add_pooling_layer=False).eval()
    plain.load_state_dict(model.backbone.state_dict())
    combined = ComateformerModel(ComateformerConfig(backbone_config=model.config.backbone_config, **TINY)).eval()
    combined.backbone.load_state_dict(model.backbone.state_dict())
    with torch.no_grad():
        expected = plain(**inputs).last_hidden_state
        torch.testing.assert_close(encoder(**inputs).last_hidden_state, expected, rtol=0, atol=0)
        assert not torch.allclose(combined(**inputs).last_hidden_state, expected, atol=1e-3)


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
@pytest.mark.parametrize("key_normalization", ["none", "l1"])
@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
def test_mix_at_initialisation_is_exactly_the_backbone(backbone, key_normalization, attn_implementation):
    """`integration="mix"` starts with g = 0: logits and every gradient equal the `combined_layers=[]` model's."""
    inputs = pair_inputs(load_tokenizer(backbone), ROWS)
    set_seed(0)
    mix = create_model(
        "comateformer", backbone=backbone, **TINY, integration="mix", key_normalization=key_normalization
    ).eval()
    plain = type(mix)(
        ComateformerConfig(**{**mix.config.to_dict(), "combined_layers": [], "combined_head_fraction": []})
    )
    missing, unexpected = plain.load_state_dict(mix.state_dict(), strict=False)
    assert not missing and sorted(unexpected) == [
        f"backbone.encoder.layer.{i}.attention.self.combined_mix" for i in (0, 1)
    ]
    for model in (mix, plain):
        model.eval().set_attn_implementation(attn_implementation)
        model(**inputs).loss.backward()
    # The mix model runs the combined heads' softmax attention as a separate head subset; a CPU kernel may block the
    # heads differently, so float32 rounding (not an exact bit pattern) is what "starts as the backbone" can promise.
    torch.testing.assert_close(mix(**inputs).logits, plain(**inputs).logits, rtol=1e-5, atol=1e-6)
    grads = dict(plain.named_parameters())
    for name, parameter in mix.named_parameters():
        if name.endswith("combined_mix"):
            assert parameter.grad.abs().min() > 0, "g must get a gradient at zero"
        else:
            torch.testing.assert_close(parameter.grad, grads[name].grad, rtol=1e-5, atol=1e-7, msg=name)


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
def test_mix_without_combined_dropout_trains_on_the_plain_backbones_random_stream(backbone):
    """Built with one seed, the mix model and the plain (`combined_layers=[]`) model hold the same weights and head:
    building combined layers draws no random numbers. In training mode with `combined_dropout=False` a forward then
    draws the plain model's dropout masks too, so at g = 0 both give the same loss; dropout on M draws more numbers
    and shifts every later mask."""
    inputs = pair_inputs(load_tokenizer(backbone), ROWS)
    losses = {}
    for combined_dropout in (False, True):
        set_seed(0)
        mix = create_model(
            "comateformer", backbone=backbone, **TINY, integration="mix", combined_dropout=combined_dropout
        )
        set_seed(0)
        plain = create_model("comateformer", backbone=backbone, combined_layers=[], combined_head_fraction=[])
        plain_parameters = dict(plain.named_parameters())
        for name, parameter in mix.named_parameters():
            if not name.endswith("combined_mix"):
                torch.testing.assert_close(parameter, plain_parameters[name], rtol=0, atol=0, msg=name)
        for model in (mix, plain):
            model.train()
            set_seed(1)
            losses[combined_dropout, model is mix] = model(**inputs).loss.detach()
    torch.testing.assert_close(losses[False, True], losses[False, False], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(losses[True, False], losses[False, False], rtol=1e-6, atol=1e-7)
    assert not torch.allclose(losses[True, True], losses[True, False], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("key_normalization", ["none", "l1"])
def test_mix_trains_under_bf16_autocast_like_float32(key_normalization):
    """`Trainer(bf16=True)` runs the forward under autocast: the mix gate (a float32 parameter) meets bf16 head
    outputs. Loss and gradients, g's included, stay within bf16 rounding of the float32 model's."""
    inputs = pair_inputs(load_tokenizer("tiny-bert"), ROWS)
    set_seed(0)
    model = create_model(
        "comateformer", backbone="tiny-bert", **TINY, integration="mix", key_normalization=key_normalization
    )
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("combined_mix"):
                parameter.fill_(0.5 / model.config.mix_scale)  # g = 0.5: both heads contribute
    model.eval()
    results = {}
    for autocast in (False, True):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(**inputs).loss
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if n.endswith("combined_mix")}
        results[autocast] = loss.detach().float(), grads
    torch.testing.assert_close(results[True][0], results[False][0], rtol=0.05, atol=0.02)
    for name, grad in results[False][1].items():
        assert grad.abs().max() > 0, name
        torch.testing.assert_close(results[True][1][name], grad, rtol=0.1, atol=0.05 * grad.abs().max(), msg=name)


def test_mix_parameter_survives_save_and_load_and_backbone_checkpoints_load_into_mix(tmp_path):
    """The mix parameter is saved and reloaded; a plain backbone checkpoint (no mix parameter) loads strictly into a
    mix model, leaving g at zero, and rejects any other missing key."""
    from transformers import BertModel

    from pairzoo.backbones import tiny_backbone_config
    from pairzoo.modeling.modeling_comateformer import ComateformerForSequenceClassification

    inputs = pair_inputs(load_tokenizer("tiny-bert"), ROWS)
    inputs.pop("labels")
    set_seed(0)
    model = create_model("comateformer", backbone="tiny-bert", **TINY, integration="mix").eval()
    with torch.no_grad():
        model.backbone.encoder.layer[0].attention.self.combined_mix.copy_(torch.tensor([0.002, -0.004]))
    model.save_pretrained(tmp_path / "mix")
    reloaded = ComateformerForSequenceClassification.from_pretrained(tmp_path / "mix").eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**inputs).logits, model(**inputs).logits, rtol=1e-5, atol=1e-6)
    assert reloaded.backbone.encoder.layer[0].attention.self.combined_mix.tolist() == pytest.approx([0.002, -0.004])

    BertModel(tiny_backbone_config("tiny-bert"), add_pooling_layer=False).save_pretrained(tmp_path / "backbone")
    from_backbone = ComateformerForSequenceClassification.from_backbone(
        str(tmp_path / "backbone"), **TINY, integration="mix"
    )
    assert all(not p.any() for n, p in from_backbone.named_parameters() if n.endswith("combined_mix"))
    state = {
        k: v for k, v in model.backbone.state_dict().items() if not k.endswith("layer.0.attention.self.query.bias")
    }
    with pytest.raises(RuntimeError, match="query.bias"):
        model.backbone.load_state_dict(state)


def training_mode_without_dropout(model):
    """Training mode (statistics are recorded) with every dropout off, so outputs are deterministic."""
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model


@pytest.mark.parametrize("settings", INTEGRATION_OPTIONS)
def test_training_stats_equal_a_recomputation(settings):
    """gate_mean, mv_ratio (and mix_mean) of each combined layer equal float64 recomputations from the layer's own
    parameters, averaged over the forwards since the last read; nothing is recorded in eval mode or when off."""
    set_seed(0)
    model = create_model("comateformer", backbone="tiny-bert", **TINY, **settings)
    training_mode_without_dropout(model)
    mix = model.config.integration == "mix"
    if mix:
        with torch.no_grad():
            for layer in (0, 1):
                module = model.backbone.encoder.layer[layer].attention.self
                module.combined_mix.copy_(
                    torch.linspace(-0.5, 0.8, module.num_combined_heads) / model.config.mix_scale
                )
    tokenizer = load_tokenizer("tiny-bert")
    batches = [pair_inputs(tokenizer, ROWS), pair_inputs(tokenizer, ROWS[:1])]
    expected = {}
    for inputs in batches:
        inputs.pop("labels")
        for layer in (0, 1):
            module, hidden, _ = capture_self_attention(model, layer, inputs)
            mask = inputs["attention_mask"]
            _, combined, softmax, gate = reference_heads(module, hidden, mask, model.config)
            tokens = mask.double()
            pairs = tokens[:, None, :, None] * tokens[:, None, None, :]
            values = {
                "gate_mean": (gate * pairs).sum() / (pairs.sum() * gate.shape[1]),
                "mv_ratio": (combined.norm(dim=-1) * tokens[:, None]).sum()
                / (softmax.norm(dim=-1) * tokens[:, None]).sum(),
            }
            if mix:
                values["mix_mean"] = model.config.mix_scale * module.combined_mix.double().mean()
            for name, value in values.items():
                key = f"comateformer/layer{layer}/{name}"
                expected[key] = expected.get(key, 0.0) + value.item() / len(batches)
    assert all(torch.isfinite(torch.tensor(v)) for v in expected.values())
    got = model.training_stats()
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    assert model.training_stats() == {}, "reading resets the sums"
    with torch.no_grad():
        model.eval()(**batches[0])
    assert model.training_stats() == {}
    model.config.log_combined_stats = False
    with torch.no_grad():
        model.train()(**batches[0])
    assert model.training_stats() == {}


def test_callback_adds_the_stats_to_the_trainer_logs(tmp_path):
    """A few Trainer steps on tiny-bert: every training log (and its log_history entry) holds each combined layer's
    gate mean and ratio; evaluation logs do not."""
    from transformers import Trainer, TrainingArguments

    from pairzoo.training.cli import TrainingStatsCallback

    set_seed(0)
    model = create_model("comateformer", backbone="tiny-bert", **TINY, integration="mix", key_normalization="l1")
    tokenizer = load_tokenizer("tiny-bert")
    rows = [{k: r[k] for k in ("sentence1", "sentence2", "label")} for r in ROWS] * 2
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=3,
        logging_steps=1,
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        remove_unused_columns=False,
        disable_tqdm=True,
    )
    callback = TrainingStatsCallback()
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=rows,
        eval_dataset=rows,
        data_collator=make_collator(model, tokenizer, 64, (0.0, 5.0)),
        callbacks=[callback],
    )
    trainer.train()
    metrics = trainer.evaluate()
    names = {f"comateformer/layer{i}/{n}" for i in (0, 1) for n in ("gate_mean", "mv_ratio", "mix_mean")}
    training_logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(training_logs) == 3 and all(names <= entry.keys() for entry in training_logs)
    assert training_logs[-1]["comateformer/layer0/mix_mean"] != 0, "g moved during training"
    # the last step's log read the sums, so the end-of-training log has none; `latest` keeps the last ones logged
    assert callback.latest == {name: training_logs[-1][name] for name in names}
    assert not any(k.startswith("comateformer/") for k in trainer.state.log_history[-1]), "evaluation log"
    assert not any(k.startswith("comateformer/") for k in metrics)


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
def test_eager_and_sdpa_agree_and_padding_keys_get_zero_weight(backbone):
    """The padding mask reaches the combined heads as sdpa's boolean mask, eager's additive mask and None."""
    tokenizer = load_tokenizer(backbone)
    inputs = pair_inputs(tokenizer, ROWS)
    inputs.pop("labels")
    set_seed(0)
    model = ComateformerModel(create_model("comateformer", backbone=backbone, **TINY).config).eval()
    with torch.no_grad():
        sdpa = model(**inputs, output_internals=True)
        model.set_attn_implementation("eager")
        eager = model(**inputs, output_internals=True, output_attentions=True)
    torch.testing.assert_close(sdpa.last_hidden_state, eager.last_hidden_state, rtol=0, atol=1e-5)
    pad = inputs["attention_mask"] == 0
    assert [m.shape[1] for m in eager.combined_attention] == [2, 2]  # ceil(0.5 * 4), ceil(0.3 * 4)
    for m_sdpa, m_eager in zip(sdpa.combined_attention, eager.combined_attention):
        torch.testing.assert_close(m_sdpa, m_eager, rtol=0, atol=1e-5)
        assert (m_eager.permute(0, 3, 1, 2)[pad] == 0).all() and (m_eager.permute(0, 3, 1, 2)[~pad] != 0).any()
    # eager returns every head's weights: M in the combined slots, softmax probabilities in the others
    torch.testing.assert_close(eager.attentions[0][:, :2], eager.combined_attention[0], rtol=0, atol=0)
    torch.testing.assert_close(eager.attentions[0][:, 2:].sum(-1), torch.ones_like(eager.attentions[0][:, 2:, :, 0]))


def test_head_chunking_does_not_change_the_result(monkeypatch):
    """Long inputs run the combined heads in chunks; one head per chunk gives the same output and maps."""
    from pairzoo.modeling import modeling_comateformer

    set_seed(0)
    model = create_model("comateformer", backbone="tiny-bert", combined_layers=[0], combined_head_fraction=1.0).eval()
    inputs = pair_inputs(load_tokenizer("tiny-bert"), ROWS)
    with torch.no_grad():
        whole = model(**inputs, output_internals=True)
        monkeypatch.setattr(modeling_comateformer, "_CHUNK_ELEMENTS", 1)
        chunked = model(**inputs, output_internals=True)
    torch.testing.assert_close(chunked.logits, whole.logits, rtol=0, atol=1e-6)
    torch.testing.assert_close(chunked.combined_attention, whole.combined_attention, rtol=0, atol=1e-6)
    assert whole.combined_attention[0].shape[1] == 4


def test_combined_attention_outputs_and_ablation_switches_change_the_model():
    tokenizer = load_tokenizer("tiny-bert")
    inputs = pair_inputs(tokenizer, ROWS[:1])
    inputs.pop("labels")
    outputs = {}
    for name, settings in {"paper": {}, "center": {"gate": "center"}, "sigmoid": {"affinity_fn": "sigmoid"}}.items():
        set_seed(0)
        model = create_model("comateformer", backbone="tiny-bert", **TINY, **settings).eval()
        with torch.no_grad():
            out = model(**inputs, output_internals=True)
        length = inputs["input_ids"].shape[1]
        assert [tuple(t.shape) for t in out.combined_attention] == [(1, 2, length, length)] * 2
        e, n, m = out.affinity[0], out.difference[0], out.combined_attention[0]
        assert (n <= 0).all()
        if name == "paper":
            torch.testing.assert_close(m, torch.tanh(e) * 2 * torch.sigmoid(n))
        outputs[name] = out.logits
    assert not torch.allclose(outputs["paper"], outputs["center"]) and not torch.allclose(
        outputs["paper"], outputs["sigmoid"]
    )


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"combined_layers": [0, 0], "combined_head_fraction": 0.5}, "combined_layers"),
        (
            {
                "combined_layers": [2],
                "combined_head_fraction": 0.5,
                "backbone_config": {"model_type": "bert", "num_hidden_layers": 2},
            },
            "combined_layers",
        ),
        ({"combined_layers": [-1], "combined_head_fraction": 0.5}, "combined_layers"),
        ({"combined_layers": "0"}, "combined_layers"),
        ({"combined_head_fraction": [0.5, 0.4]}, "combined_head_fraction"),
        ({"combined_head_fraction": [0.5, 1.4, 0.3]}, "combined_head_fraction"),
        ({"combined_head_fraction": -0.1}, "combined_head_fraction"),
        ({"gate": "sigmoid"}, "gate"),
        ({"affinity_fn": "relu"}, "affinity_fn"),
        ({"difference_fn": "softmax"}, "difference_fn"),
        ({"center_affinity": "yes"}, "center_affinity"),
        ({"center_difference": None}, "center_difference"),
        ({"beta": -1.0}, "beta"),
        ({"alpha": "1"}, "alpha"),
        ({"label_min": 5.0, "label_max": 1.0}, "label_max"),
        ({"num_labels": 0}, "num_labels"),
        ({"num_labels": 3, "problem_type": "regression"}, "problem_type"),
        ({"problem_type": "multi_label_classification"}, "problem_type"),
        ({"backbone_config": {"model_type": "bert", "is_decoder": True}}, "is_decoder"),
        ({"integration": "replace"}, "integration"),
        ({"integration": None}, "integration"),
        ({"mix_scale": 0.0}, "mix_scale"),
        ({"mix_scale": -1.0}, "mix_scale"),
        ({"mix_scale": float("inf")}, "mix_scale"),
        ({"mix_scale": "10"}, "mix_scale"),
        ({"key_normalization": "softmax"}, "key_normalization"),
        ({"key_normalization": True}, "key_normalization"),
        ({"gate_bias": "8"}, "gate_bias"),
        ({"gate_bias": float("nan")}, "gate_bias"),
        ({"gate_bias": float("-inf")}, "gate_bias"),
        ({"gate_bias": True}, "gate_bias"),
        ({"combined_dropout": "no"}, "combined_dropout"),
        ({"combined_dropout": None}, "combined_dropout"),
        ({"log_combined_stats": "yes"}, "log_combined_stats"),
        ({"pooling": "max"}, "pooling"),
        ({"regression_loss": "l1"}, "regression_loss"),
        ({"regression_loss": "BCE"}, "regression_loss"),
    ],
)
def test_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        ComateformerConfig(**kwargs)


def test_training_cli_contract():
    """The CLI's regression/classification kwargs are accepted and the pair collator is chosen."""
    regression = create_model("comateformer", backbone="tiny-bert", **TINY, label_min=0.0, label_max=5.0)
    assert regression.config.problem_type == "regression" and regression.config.num_labels == 1
    labels = {0: "entailment", 1: "neutral", 2: "contradiction"}
    classifier = create_model(
        "comateformer", backbone="tiny-bert", **TINY, id2label=labels, label2id={v: k for k, v in labels.items()}
    )
    assert classifier.config.num_labels == 3 and classifier.config.problem_type == "single_label_classification"
    collator = make_collator(classifier, load_tokenizer("tiny-bert"), 64)
    assert isinstance(collator, SentencePairCollator)
    batch = collator(
        [{"sentence1": "a b", "sentence2": "c", "label": 2}, {"sentence1": "d", "sentence2": "e f g", "label": 0}]
    )
    out = classifier(**batch)
    expected = torch.nn.functional.cross_entropy(out.logits, torch.tensor([2, 0]))
    torch.testing.assert_close(out.loss, expected)
    assert out.scores is None


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("regression_loss", ["mse", "bce"])
def test_regression_head_on_labels_scaled_to_unit_range(regression_loss, pooling):
    """The head's raw output r, recomputed from the last hidden states and the head's weights: `logits` = r (mse) or
    sigmoid(r) (bce) on [0, 1], `scores` on the label scale, the loss against (y - min) / (max - min)."""
    set_seed(0)
    model = create_model(
        "comateformer",
        backbone="tiny-bert",
        **TINY,
        label_min=1.0,
        label_max=5.0,
        regression_loss=regression_loss,
        pooling=pooling,
    ).eval()
    inputs = pair_inputs(load_tokenizer("tiny-bert"), ROWS)
    labels = torch.tensor([2.0, 4.5, 1.0])
    with torch.no_grad():
        out = model(**{**inputs, "labels": labels}, output_hidden_states=True)
    hidden, mask = out.hidden_states[-1].double(), inputs["attention_mask"].double()
    features = hidden[:, 0] if pooling == "cls" else (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    head = model.classifier
    raw = torch.tanh(features @ head.dense.weight.double().T + head.dense.bias.double())
    raw = (raw @ head.out_proj.weight.double().T + head.out_proj.bias.double())[:, 0]
    target = (labels.double() - 1.0) / 4.0
    if regression_loss == "mse":
        prediction, loss = raw, ((raw - target) ** 2).mean()
    else:
        prediction = torch.sigmoid(raw)
        loss = -(target * prediction.log() + (1 - target) * (1 - prediction).log()).mean()
    assert out.logits.shape == (3, 1) and out.scores.shape == (3,)
    torch.testing.assert_close(out.logits[:, 0].double(), prediction, rtol=0, atol=1e-6)
    torch.testing.assert_close(out.scores.double(), 1.0 + 4.0 * prediction, rtol=0, atol=1e-5)
    torch.testing.assert_close(out.loss.double(), loss, rtol=0, atol=1e-6)


def test_trainer_predictions_give_label_scale_scores_to_the_metrics():
    """Regression outputs reach `compute_metrics` as (logits, scores): the metrics compare scores with the labels."""
    from transformers.trainer_pt_utils import nested_detach

    from pairzoo.training.metrics import compute_metrics_fn

    set_seed(0)
    model = create_model("comateformer", backbone="tiny-bert", **TINY, label_min=0.0, label_max=5.0).eval()
    inputs = pair_inputs(load_tokenizer("tiny-bert"), ROWS)
    with torch.no_grad():
        out = model(**inputs)
    predictions = nested_detach(tuple(v for k, v in out.items() if k != "loss"))  # as Trainer.prediction_step
    labels = inputs["labels"].numpy()
    metrics = compute_metrics_fn(1)(EvalPrediction(tuple(p.numpy() for p in predictions), labels))
    assert metrics["mse"] == pytest.approx(float(((out.scores - inputs["labels"]) ** 2).mean()), rel=1e-5)


def test_auto_model_gives_the_encoder_and_the_classifier(tmp_path):
    from transformers import AutoModelForSequenceClassification

    set_seed(0)
    create_model("comateformer", backbone="tiny-bert", **TINY).save_pretrained(tmp_path)
    encoder = AutoModel.from_pretrained(tmp_path)
    classifier = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert type(encoder) is ComateformerModel and type(classifier).__name__ == "ComateformerForSequenceClassification"
    inputs = pair_inputs(load_tokenizer("tiny-bert"), ROWS)
    inputs.pop("labels")
    with torch.no_grad():
        assert_close_after_reload(
            encoder.eval()(**inputs).last_hidden_state,
            classifier.eval()(**inputs, output_hidden_states=True).hidden_states[-1],
        )


@pytest.mark.integration
def test_pretrained_weights_load_unchanged_into_combined_layers():
    from pairzoo.backbones import minilm_path

    reference = AutoModel.from_pretrained(minilm_path(), add_pooling_layer=False)
    model = create_model("comateformer", backbone="minilm")
    assert [model.backbone.encoder.layer[i].attention.self.num_combined_heads for i in range(3)] == [6, 5, 4]
    assert not hasattr(model.backbone.encoder.layer[3].attention.self, "num_combined_heads")
    for name, param in reference.state_dict().items():
        torch.testing.assert_close(model.backbone.state_dict()[name], param, rtol=0, atol=0, msg=name)


_FRESH_PIPELINE = r"""
import json, sys
from transformers import pipeline
folder, pairs = sys.argv[1], json.loads(sys.argv[2])
classify = pipeline("text-classification", model=folder, trust_remote_code=True, device="cpu")
out = classify(pairs, top_k=None)
assert "pairzoo" not in sys.modules
print("RESULT " + json.dumps({"class": type(classify.model).__name__, "outputs": out}))
"""


def test_exported_classifier_runs_in_text_classification_pipeline_without_pairzoo(tmp_path):
    labels = {0: "not_paraphrase", 1: "paraphrase"}
    set_seed(0)
    model = create_model(
        "comateformer", backbone="tiny-bert", **TINY, id2label=labels, label2id={v: k for k, v in labels.items()}
    ).eval()
    tokenizer = load_tokenizer("tiny-bert")
    folder = export_model(model, tokenizer, tmp_path / "export", eval_results=[])
    pairs = [{"text": r["sentence1"], "text_pair": r["sentence2"]} for r in ROWS]
    proc = run_without_pairzoo(_FRESH_PIPELINE, [str(folder), json.dumps(pairs)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["class"] == "ComateformerForSequenceClassification"
    with torch.no_grad():
        expected = model(
            **tokenizer(*zip(*[(r["sentence1"], r["sentence2"]) for r in ROWS]), padding=True, return_tensors="pt")
        ).logits.softmax(-1)
    for row, scores in zip(expected, result["outputs"]):
        got = {s["label"]: s["score"] for s in scores}
        assert got.keys() == set(labels.values())
        for index, name in labels.items():
            assert abs(got[name] - row[index].item()) < 1e-5


def test_plot_of_one_combined_head_is_a_png(tmp_path):
    from pairzoo.visualize import plot_combined_attention

    model = create_model("comateformer", backbone="tiny-bert", **TINY)
    tokenizer = load_tokenizer("tiny-bert")
    path = plot_combined_attention(model, tokenizer, "hardware engineer", "software engineer", tmp_path / "f.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    with pytest.raises(ValueError, match="head"):
        plot_combined_attention(model, tokenizer, "a", "b", tmp_path / "g.png", layer=1, head=2)
    with pytest.raises(ValueError, match="layer"):
        plot_combined_attention(model, tokenizer, "a", "b", tmp_path / "g.png", layer=3)


@pytest.mark.parametrize("with_pooler", [True, False])
def test_head_starts_from_the_checkpoints_trained_pooler(tmp_path, with_pooler):
    """`from_backbone` copies a checkpoint's pooler into the head's Linear(d, d) (as `BertForSequenceClassification`
    starts from it); a checkpoint without pooler weights leaves the head freshly initialised."""
    from transformers import BertModel

    from pairzoo.backbones import tiny_backbone_config
    from pairzoo.modeling.modeling_comateformer import ComateformerForSequenceClassification

    set_seed(0)
    BertModel(tiny_backbone_config("tiny-bert"), add_pooling_layer=with_pooler).save_pretrained(tmp_path)
    set_seed(0)
    checkpoint = BertModel.from_pretrained(tmp_path)  # a pooler is built either way; trained only if saved
    model = ComateformerForSequenceClassification.from_backbone(str(tmp_path), **TINY)
    copied = torch.equal(model.classifier.dense.weight, checkpoint.pooler.dense.weight) and torch.equal(
        model.classifier.dense.bias, checkpoint.pooler.dense.bias
    )
    assert copied == with_pooler
    encoder = {k: v for k, v in checkpoint.state_dict().items() if not k.startswith("pooler.")}
    assert all(torch.equal(model.backbone.state_dict()[k], v) for k, v in encoder.items())
