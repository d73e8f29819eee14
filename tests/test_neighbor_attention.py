"""Neighbor attention on a frozen MLM encoder: harness, frozen encoder, equations recomputed, errors, decoding, the
batch-normalised head (`classifier_norm="batch"`)."""

import math

import pytest
import torch
from model_harness import ROWS, ModelHarness, assert_close_after_reload
from transformers import AutoModel, AutoModelForMaskedLM, BertConfig, set_seed

from pairzoo import NeighborAttentionConfig, create_model, load_tokenizer
from pairzoo.backbones import TINY_ARCHITECTURES, tiny_backbone_config
from pairzoo.modeling.encoders import project
from pairzoo.modeling.modeling_neighbor_attention import (
    NeighborAttentionForSequenceClassification,
    encode_neighbor_attention_inputs,
    masked_lm_from_pretrained,
)
from pairzoo.training import expressiveness
from pairzoo.training.collators import make_collator
from pairzoo.training.expressiveness import (
    esnli_proxy_keywords,
    evaluate_expressiveness,
    keyword_token_ids,
    read_esnli_highlights,
)

WORDS = ["yes", "maybe", "no"]
TINY = {"neighbor_layers": [0], "num_candidates": 20, "num_neighbors": 4, "num_labels": 3, "label_words": WORDS}


def encode(tokenizer, rows, **kwargs) -> dict:
    kwargs.setdefault("label_words", WORDS)
    return encode_neighbor_attention_inputs(
        tokenizer, [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], **kwargs
    )


class TestNeighborAttention(ModelHarness):
    model_name = "neighbor-attention"
    config_overrides = TINY

    def make_inputs(self, tokenizer, rows, model):
        batch = encode(tokenizer, rows)
        batch["labels"] = torch.tensor([int(r["label"]) % model.config.num_labels for r in rows])
        return batch


def _randomise_classifier_norm(model: NeighborAttentionForSequenceClassification) -> None:
    """Give the head's BatchNorm non-trivial running statistics, scale and shift (fresh ones are nearly identity)."""
    norm = model.classifier_norm
    with torch.no_grad():
        norm.running_mean.normal_()
        norm.running_var.uniform_(0.5, 2.0)
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.normal_(std=0.1)


class TestNeighborAttentionBatchNormHead(TestNeighborAttention):
    """The whole harness (save/load, Auto class, export without pairzoo, ...) with the batch-normalised head."""

    config_overrides = {**TINY, "classifier_norm": "batch"}

    @pytest.fixture()
    def backbone(self) -> str:
        return "tiny-bert"

    def make_model(self, backbone: str, **overrides):
        model = super().make_model(backbone, **overrides)
        _randomise_classifier_norm(model)
        return model


def _three_layer_model(**overrides) -> NeighborAttentionForSequenceClassification:
    """A 3-layer tiny BERT with neighbor attention in layers 0 and 1 (so the neighbour update runs once)."""
    set_seed(0)
    backbone = BertConfig(
        vocab_size=load_tokenizer("tiny-bert").vocab_size,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=64,
    )
    settings = {**TINY, "neighbor_layers": [0, 1], "alpha": 0.5, **overrides}
    return NeighborAttentionForSequenceClassification(NeighborAttentionConfig(backbone_config=backbone, **settings))


def _naive_layer(layer, projections, hidden, valid, neighbors, alpha):
    """Token-by-token reference of one neighbor layer: frozen attention h_s, neighbour branch h_b, mixing, FFN."""
    attention, output = layer.attention.self, layer.attention.output
    heads, size = attention.num_attention_heads, attention.attention_head_size
    length = hidden.shape[0]

    def mha(query_vector, keys, values):
        parts = []
        for head in range(heads):
            cut = slice(head * size, (head + 1) * size)
            weights = torch.softmax(torch.stack([query_vector[cut] @ k[cut] / math.sqrt(size) for k in keys]), 0)
            parts.append(sum(w * v[cut] for w, v in zip(weights, values)))
        return output.dense(torch.cat(parts))

    rows = []
    for i in range(length):
        q = attention.query(hidden[i])
        h_s = mha(
            q,
            [attention.key(hidden[j]) for j in range(length) if valid[j]],
            [attention.value(hidden[j]) for j in range(length) if valid[j]],
        )
        r = [hidden[i], *neighbors[i]]
        h_b = mha(q, [projections.key(x) for x in r], [projections.value(x) for x in r])
        a = output.LayerNorm((1 - alpha) * h_s + alpha * h_b + hidden[i])
        ffn = layer.output.dense(layer.intermediate.intermediate_act_fn(layer.intermediate.dense(a)))
        rows.append(layer.output.LayerNorm(ffn + a))
    return torch.stack(rows), mha


@pytest.mark.parametrize("mask_state", ["layer_input", "layer_output"])
def test_neighbor_attention_recomputed_token_by_token_from_the_modules_parameters(mask_state):
    """Selection, m_ij, both neighbor layers, the neighbour update and the regularisers, one token at a time; L_m on
    h^(l)_[MASK], the layer's input (the paper), or on the state after the layer (the kept earlier form)."""
    model = _three_layer_model(mask_regularizer_state=mask_state).eval()
    tokenizer = load_tokenizer("tiny-bert")
    batch = encode(tokenizer, ROWS[:2])
    with torch.no_grad():
        out = model(**batch, output_internals=True)
        b = 0
        ids, valid = batch["input_ids"][b], batch["attention_mask"][b].bool()
        mask_position = int(batch["mask_positions"][b])
        emb = model.backbone.embeddings
        word = emb.word_embeddings.weight
        d = word.shape[1]
        hidden = emb(input_ids=ids[None])[0]
        neighbors, expected_ids = [], []
        for i in range(len(ids)):
            scores = word @ hidden[i] / math.sqrt(d)
            scores[ids[i]] = -math.inf
            scores[0] = -math.inf  # [PAD]
            top = torch.argsort(scores, descending=True)[: model.config.num_neighbors]
            expected_ids.append(top)
            own = emb.LayerNorm(word[ids[i]] + emb.position_embeddings.weight[i] + emb.token_type_embeddings.weight[0])
            row = []
            for j in top:
                e = emb.LayerNorm(word[j] + emb.position_embeddings.weight[i] + emb.token_type_embeddings.weight[0])
                delta = e - own
                row.append(model.neighbor_layer_norm(model.neighbor_transform(delta) + delta + hidden[i]))
            neighbors.append(row)
        torch.testing.assert_close(out.neighbor_ids[b], torch.stack(expected_ids), rtol=0, atol=0)
        layers, alpha = model.backbone.encoder.layer, model.config.alpha
        context = [i for i in range(len(ids)) if valid[i] and i != mask_position]
        reg_n = []
        reg_m = []
        for slot in range(2):
            projections = model.neighbor_projections[slot]
            new_hidden, mha = _naive_layer(layers[slot], projections, hidden, valid, neighbors, alpha)
            cos = torch.nn.functional.cosine_similarity
            reg_n.append(
                torch.stack([torch.stack([cos(hidden[i], m, 0) for m in neighbors[i]]).mean() for i in context])
            )
            mask_hidden = hidden[mask_position] if mask_state == "layer_input" else new_hidden[mask_position]
            reg_m.append(torch.stack([cos(mask_hidden, neighbors[i][0], 0) for i in context]))
            if slot == 0:  # m <- LN(f(MHA(Q m, K_b z, V_b z)) + m), z = [h_i, h_[MASK], m_i]
                norm, attention = layers[slot].attention.output.LayerNorm, layers[slot].attention.self
                neighbors = [
                    [
                        norm(
                            mha(
                                attention.query(m),
                                *[
                                    [f(x) for x in [hidden[i], hidden[mask_position], *neighbors[i]]]
                                    for f in (projections.key, projections.value)
                                ],
                            )
                            + m
                        )
                        for m in neighbors[i]
                    ]
                    for i in range(len(ids))
                ]
            hidden = new_hidden
        final = layers[2](hidden[valid][None])[0]  # right padding: the valid tokens are a prefix
    torch.testing.assert_close(out.last_hidden_state[b][valid], final, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.logits[b], model.classifier(final[mask_position]), rtol=1e-4, atol=1e-5)
    # one example alone, so the batch means equal this example's means
    alone = model(**encode(tokenizer, ROWS[:1]), output_internals=True)
    torch.testing.assert_close(alone.regularizer_n, torch.stack([r.mean() for r in reg_n]).mean(), atol=1e-5, rtol=0)
    torch.testing.assert_close(alone.regularizer_m, torch.stack([r.mean() for r in reg_m]).mean(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("weights", [{}, {"lambda_m": 0.3, "lambda_n": 0.7}])
def test_loss_is_cross_entropy_minus_weighted_regularisers(weights):
    """Both weights default to 1, the paper's objective."""
    model = _three_layer_model(**weights).eval()
    batch = encode(load_tokenizer("tiny-bert"), ROWS)
    labels = torch.tensor([0, 2, 1])
    with torch.no_grad():
        out = model(**batch, labels=labels, output_internals=True)
    lambda_m, lambda_n = weights.get("lambda_m", 1.0), weights.get("lambda_n", 1.0)
    expected = (
        torch.nn.functional.cross_entropy(out.logits, labels)
        - lambda_m * out.regularizer_m
        - lambda_n * out.regularizer_n
    )
    torch.testing.assert_close(out.loss, expected)
    assert out.regularizer_m.abs() > 0 and out.regularizer_n.abs() > 0


@pytest.mark.parametrize("mask_state", ["layer_input", "layer_output"])
def test_mask_regulariser_reaches_the_last_neighbor_layer_only_through_the_state_after_it(mask_state):
    """h^(l)_[MASK] of the last neighbor layer is computed before its K_b/V_b act, so the paper's L_m gives them no
    gradient; the state after the layer does."""
    model = _three_layer_model(mask_regularizer_state=mask_state, untouched_fraction=0.0).train()
    model(**encode(load_tokenizer("tiny-bert"), ROWS), output_internals=True).regularizer_m.backward()
    last, first = model.neighbor_projections[1].key.weight.grad, model.neighbor_projections[0].key.weight.grad
    assert first is not None and first.abs().sum() > 0
    if mask_state == "layer_input":
        assert last is None or torch.count_nonzero(last) == 0
    else:
        assert torch.count_nonzero(last) > 0


def test_untouched_tokens_are_drawn_once_per_forward_and_only_in_training():
    model = _three_layer_model(untouched_fraction=0.5)
    seen = []
    inner = model._neighbor_layer

    def record(*args):
        seen.append(args[5])
        return inner(*args)

    model._neighbor_layer = record
    batch = encode(load_tokenizer("tiny-bert"), ROWS)
    model.train()(**batch)
    assert len(seen) == 2 and torch.equal(seen[0], seen[1])
    assert seen[0].shape == batch["input_ids"].shape and 0 < seen[0].sum() < seen[0].numel()
    model(**batch)
    assert not torch.equal(seen[0], seen[2])  # a new draw per forward pass
    seen.clear()
    model.eval()(**batch)
    assert seen == [None, None]


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
def test_alpha_zero_gives_exactly_the_frozen_encoders_mask_state(backbone):
    model = create_model("neighbor-attention", backbone=backbone, **TINY, alpha=0.0).eval()
    batch = encode(load_tokenizer(backbone), ROWS)
    with torch.no_grad():
        out = model(**batch, output_internals=True)
        frozen = model.backbone(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    expected = frozen.last_hidden_state[torch.arange(3), batch["mask_positions"]]
    torch.testing.assert_close(out.mask_hidden_state, expected, rtol=0, atol=0)


@pytest.mark.parametrize("norm", ["none", "batch"])
@pytest.mark.parametrize("mode", ["neighbor", "bitfit", "full"])
def test_only_the_modes_parameters_change_under_training(mode, norm):
    """The head, with its BatchNorm under `classifier_norm="batch"`, trains in every mode; its running statistics
    follow the training batches."""
    model = create_model(
        "neighbor-attention", backbone="tiny-bert", **TINY, training_mode=mode, lambda_m=0.1, classifier_norm=norm
    ).train()
    batch = encode(load_tokenizer("tiny-bert"), ROWS)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    buffers = {n: b.clone() for n, b in model.named_buffers() if n.startswith("classifier_norm.")}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(3):
        optimizer.zero_grad()
        model(**batch, labels=torch.tensor([0, 1, 2])).loss.backward()
        optimizer.step()
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    backbone_changed = {n for n in changed if n.startswith("backbone.")}
    assert not any(n.startswith("lm_head.") for n in changed)
    assert "classifier.weight" in changed
    if norm == "batch":
        assert {"classifier_norm.weight", "classifier_norm.bias"} <= changed
        now = dict(model.named_buffers())
        assert int(now["classifier_norm.num_batches_tracked"]) == 3
        for name in ("classifier_norm.running_mean", "classifier_norm.running_var"):
            assert not torch.allclose(now[name], buffers[name]), name
    else:
        assert not buffers and not any(isinstance(m, torch.nn.BatchNorm1d) for m in model.modules())
    if mode == "neighbor":
        assert not backbone_changed
        assert {
            "neighbor_projections.0.key.weight",
            "neighbor_transform.weight",
            "neighbor_layer_norm.bias",
        } <= changed
    elif mode == "bitfit":
        assert backbone_changed and all(n.endswith(".bias") for n in backbone_changed)
    else:
        assert "backbone.encoder.layer.0.attention.self.query.weight" in changed


def test_batch_norm_head_recomputed_from_the_modules_running_statistics():
    """Eval mode: logits = W ((m - running_mean) / sqrt(running_var + eps) * gamma + beta) + b on the [MASK] state m
    (dropout is the identity), written out from the module's own buffers and parameters."""
    model = _three_layer_model(classifier_norm="batch").eval()
    _randomise_classifier_norm(model)
    batch = encode(load_tokenizer("tiny-bert"), ROWS)
    with torch.no_grad():
        out = model(**batch, output_internals=True)
    mask_state = out.last_hidden_state[torch.arange(len(ROWS)), batch["mask_positions"]]
    torch.testing.assert_close(out.mask_hidden_state, mask_state, rtol=0, atol=0)
    norm, head = model.classifier_norm, model.classifier
    standardised = (mask_state - norm.running_mean) / torch.sqrt(norm.running_var + norm.eps)
    expected = (standardised * norm.weight + norm.bias) @ head.weight.T + head.bias
    torch.testing.assert_close(out.logits, expected, rtol=1e-5, atol=1e-6)
    plain = head(mask_state)
    assert not torch.allclose(out.logits, plain, atol=1e-3)  # the norm is applied, not skipped


def test_batch_norm_head_in_training_uses_the_batch_statistics_and_one_example_the_running_ones():
    """Train mode (dropout off): a batch is standardised with its own biased per-feature variance, and the running
    statistics move by the momentum; a one-example batch, with no variance, is standardised with the running
    statistics and leaves them as they are."""
    model = _three_layer_model(classifier_norm="batch", classifier_dropout=0.0).train()
    _randomise_classifier_norm(model)
    norm, head = model.classifier_norm, model.classifier
    before_mean, before_var = norm.running_mean.clone(), norm.running_var.clone()
    batch = encode(load_tokenizer("tiny-bert"), ROWS)
    with torch.no_grad():
        out = model(**batch, output_internals=True)
    state = out.mask_hidden_state
    mean, var = state.mean(0), state.var(0, unbiased=False)
    expected = ((state - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias) @ head.weight.T + head.bias
    torch.testing.assert_close(out.logits, expected, rtol=1e-5, atol=1e-5)
    momentum = norm.momentum
    torch.testing.assert_close(norm.running_mean, (1 - momentum) * before_mean + momentum * mean)
    torch.testing.assert_close(norm.running_var, (1 - momentum) * before_var + momentum * state.var(0, unbiased=True))
    kept_mean, kept_var = norm.running_mean.clone(), norm.running_var.clone()
    kept_count = int(norm.num_batches_tracked)
    one = {k: v[:1] for k, v in batch.items()}
    with torch.no_grad():
        single = model(**one, output_internals=True)
    standardised = (single.mask_hidden_state - kept_mean) / torch.sqrt(kept_var + norm.eps)
    expected = (standardised * norm.weight + norm.bias) @ head.weight.T + head.bias
    torch.testing.assert_close(single.logits, expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(norm.running_mean, kept_mean) and int(norm.num_batches_tracked) == kept_count


def test_no_classifier_norm_is_the_papers_head_exactly():
    """`"none"` (the default) adds no module and gives logits = classifier([MASK] state), bit for bit; `"batch"` adds
    only the norm's weights, drawing nothing from the random stream, so every shared weight is the same."""
    plain = _three_layer_model().eval()
    explicit = _three_layer_model(classifier_norm="none").eval()
    normed = _three_layer_model(classifier_norm="batch").eval()
    assert plain.classifier_norm is None and not any(isinstance(m, torch.nn.BatchNorm1d) for m in plain.modules())
    assert plain.state_dict().keys() == explicit.state_dict().keys()
    added = set(normed.state_dict()) - set(plain.state_dict())
    assert added == {f"classifier_norm.{k}" for k in normed.classifier_norm.state_dict()}
    assert all(torch.equal(v, normed.state_dict()[k]) for k, v in plain.state_dict().items())
    batch = encode(load_tokenizer("tiny-bert"), ROWS)
    with torch.no_grad():
        out = plain(**batch, output_internals=True)
        torch.testing.assert_close(explicit(**batch).logits, out.logits, rtol=0, atol=0)
        torch.testing.assert_close(plain.classifier(out.mask_hidden_state), out.logits, rtol=0, atol=0)


def test_batch_norm_head_is_initialised_on_a_pretrained_backbone_and_reloads_its_statistics(tmp_path):
    """`from_backbone` (a nested pretrained encoder) leaves the norm at weight 1, bias 0, mean 0, variance 1, and
    `_init_weights` resets a garbage one; after training steps save/load keeps the moved running statistics."""
    model = create_model("neighbor-attention", backbone="tiny-bert", **TINY, classifier_norm="batch")
    norm = model.classifier_norm
    fresh = {"weight": 1.0, "bias": 0.0, "running_mean": 0.0, "running_var": 1.0, "num_batches_tracked": 0}
    for name, value in fresh.items():
        assert torch.all(getattr(norm, name) == value), name
    _randomise_classifier_norm(model)
    model._init_weights(norm)
    for name, value in fresh.items():
        assert torch.all(getattr(norm, name) == value), name
    batch = encode(load_tokenizer("tiny-bert"), ROWS)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model.train()
    for _ in range(3):
        optimizer.zero_grad()
        model(**batch, labels=torch.tensor([0, 1, 2])).loss.backward()
        optimizer.step()
    model.eval()
    model.save_pretrained(tmp_path)
    reloaded = NeighborAttentionForSequenceClassification.from_pretrained(tmp_path).eval()
    assert reloaded.config.classifier_norm == "batch"
    saved = norm.state_dict()
    assert int(saved["num_batches_tracked"]) == 3 and not torch.all(saved["running_var"] == 1.0)
    for name, value in reloaded.classifier_norm.state_dict().items():
        assert_close_after_reload(value, saved[name], msg=name)
    with torch.no_grad():
        assert_close_after_reload(reloaded(**batch).logits, model(**batch).logits)


def test_training_samples_distinct_neighbours_among_the_top_k_candidates():
    model = create_model("neighbor-attention", backbone="tiny-bert", **TINY).train()
    batch = encode(load_tokenizer("tiny-bert"), ROWS)
    with torch.no_grad():
        hidden = model.backbone.embeddings(input_ids=batch["input_ids"])
        sampled = model.select_neighbors(hidden, batch["input_ids"])
        top = model.eval().select_neighbors(hidden, batch["input_ids"])
        scores = hidden @ model.backbone.embeddings.word_embeddings.weight.T
        scores.scatter_(-1, batch["input_ids"].unsqueeze(-1), float("-inf"))
        scores[..., 0] = float("-inf")
        candidates = scores.topk(model.config.num_candidates, dim=-1).indices
    assert sampled.shape == top.shape == (*batch["input_ids"].shape, 4)
    assert (sampled.unsqueeze(-1) == candidates.unsqueeze(-2)).any(-1).all()
    assert (sampled.sort(-1).values.diff(dim=-1) != 0).all()
    assert not torch.equal(sampled, top)
    assert (top != batch["input_ids"].unsqueeze(-1)).all()


@pytest.mark.parametrize("backbone", ["tiny-bert", "tiny-roberta"])
def test_prompt_uses_the_tokenizers_own_special_tokens(backbone):
    tokenizer = load_tokenizer(backbone)
    model = create_model("neighbor-attention", backbone=backbone, **TINY)
    rows = [{"sentence1": r["sentence1"], "sentence2": r["sentence2"], "label": 1} for r in ROWS]
    batch = make_collator(model, tokenizer, max_length=40)(rows)
    cls, sep, mask = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id
    ids = batch["input_ids"][0][batch["attention_mask"][0].bool()].tolist()
    position = int(batch["mask_positions"][0])
    assert ids[0] == cls and ids[1] == mask and ids[position] == mask and ids[position + 1] == sep
    assert ids.count(sep) == 3 and ids.count(mask) == 4 and ids[-1] == sep
    assert tokenizer.decode(ids[2:position]).split() == "yes or maybe or no of".split()
    assert batch["input_ids"].shape[1] <= 40 and batch["labels"].tolist() == [1, 1, 1]
    bare = encode(tokenizer, ROWS, connecting_tokens=False, prompt_format="mask_only")
    assert bare["input_ids"][0, :3].tolist() == [cls, mask, sep] and bare["mask_positions"].tolist() == [1, 1, 1]


def test_minilm_trainable_fraction_decoder_and_pretrained_projections():
    model = create_model("neighbor-attention", backbone="minilm", num_labels=3)
    assert (
        model.neighbor_layers == [3, 4] and model.config.token_decoder == "input_embeddings" and model.lm_head is None
    )
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    fraction = trainable / sum(p.numel() for p in model.backbone.parameters())
    assert 0.02 < fraction <= 0.06, fraction
    for slot, index in enumerate(model.neighbor_layers):
        attention = model.backbone.encoder.layer[index].attention.self
        torch.testing.assert_close(model.neighbor_projections[slot].key.weight, attention.key.weight, rtol=0, atol=0)
    assert not any(p.requires_grad for p in model.backbone.parameters())


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"num_neighbors": 101}, "num_neighbors"),
        ({"num_labels": 3, "label_words": ["yes", "no"]}, "label_words"),
        ({"label_words": ["yes", " "]}, "label_words"),
        ({"neighbor_layers": [1]}, "neighbor_layers"),
        ({"neighbor_layers": []}, "neighbor_layers"),
        ({"alpha": 1.5}, "alpha"),
        ({"lambda_m": -1.0}, "lambda_m"),
        ({"training_mode": "lora"}, "training_mode"),
        ({"prompt_format": "cls"}, "prompt_format"),
        ({"token_decoder": "lm"}, "token_decoder"),
        ({"mask_regularizer_state": "after"}, "mask_regularizer_state"),
        ({"classifier_norm": "layer"}, "classifier_norm"),
        ({"num_labels": 1}, "num_labels"),
    ],
)
def test_config_rejects_bad_values(kwargs, field):
    from pairzoo.backbones import tiny_backbone_config

    with pytest.raises(ValueError, match=field):
        NeighborAttentionConfig(backbone_config=tiny_backbone_config("tiny-bert"), **kwargs)


def test_bad_inputs_give_clear_errors():
    tokenizer = load_tokenizer("tiny-bert")
    with pytest.raises(ValueError, match="tokenizes to nothing"):
        encode(tokenizer, ROWS, label_words=["yes", "\u200b", "no"])
    model = create_model(
        "neighbor-attention", backbone="tiny-bert", **{**TINY, "label_words": ["yes", "\u200b", "no"]}
    )
    with pytest.raises(ValueError, match="tokenizes to nothing"):
        make_collator(model, tokenizer, 64)([{"sentence1": "a b", "sentence2": "c", "label": 0}])
    batch = encode(tokenizer, ROWS)
    with pytest.raises(ValueError, match="mask_positions"):
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    with pytest.raises(ValueError, match=r"`mask_positions` has shape \(1,\); expected one position per row \(3\)"):
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], mask_positions=torch.tensor([1]))
    # a position outside the sequence is a value: refused where inputs enter (the collator), not on every forward
    row = {"input_ids": batch["input_ids"][0].tolist(), "attention_mask": [1] * batch["input_ids"].shape[1]}
    with pytest.raises(ValueError, match=r"`mask_positions` must lie in \[0, \d+\), got \[99\]"):
        make_collator(model, tokenizer, 64)([{**row, "mask_positions": 99, "labels": 0}])
    with pytest.raises(ValueError, match="max_length"):
        encode(tokenizer, ROWS, max_length=12)


def test_expressiveness_recall_and_precision():
    row = {
        "sentence1": "Two women are embracing while holding packages .",
        "sentence2": "The sisters are hugging goodbye .",
        "explanation_1": "embracing is not hugging goodbye ; women need not be sisters",
    }
    assert esnli_proxy_keywords(row) == {"embracing", "hugging", "goodbye", "sisters"}
    tokenizer = load_tokenizer("tiny-bert")
    model = create_model("neighbor-attention", backbone="tiny-bert", **TINY)
    targets, dropped = keyword_token_ids(tokenizer, esnli_proxy_keywords(row))
    assert len(targets) + dropped == 4

    def decode(states):  # a decoder that ranks exactly the keyword tokens first
        logits = torch.zeros(states.shape[0], tokenizer.vocab_size)
        logits[:, sorted(targets)] = 1.0
        return logits

    model.decode_mask_logits = decode
    result = evaluate_expressiveness(model, tokenizer, [{**row, "label": 0}], keywords="esnli-proxy", k=20)
    assert result["recall@20"] == 100.0 and result["precision@20"] == pytest.approx(100.0 * len(targets) / 20)
    real = evaluate_expressiveness(
        create_model("neighbor-attention", backbone="tiny-bert", **TINY), tokenizer, [{**row, "label": 0}], k=20
    )
    assert 0.0 <= real["recall@20"] <= 100.0 and real["accuracy"] in (0.0, 100.0)


def test_expressiveness_restores_the_models_training_mode():
    tokenizer = load_tokenizer("tiny-bert")
    model = create_model("neighbor-attention", backbone="tiny-bert", **TINY).train()
    frozen = next(m for m in model.modules() if m is not model)
    frozen.eval()  # a module kept in eval mode while the model trains stays so
    modes = {name: module.training for name, module in model.named_modules()}
    row = {"sentence1": "Two women are embracing.", "sentence2": "The sisters hug.", "label": 0}
    evaluate_expressiveness(model, tokenizer, [row], k=5)
    assert model.training and {name: module.training for name, module in model.named_modules()} == modes
    with pytest.raises(KeyError):  # also when it raises
        evaluate_expressiveness(model, tokenizer, [{"sentence2": "No first sentence."}], k=5)
    assert model.training and {name: module.training for name, module in model.named_modules()} == modes
    model.eval()
    evaluate_expressiveness(model, tokenizer, [row], k=5)
    assert not any(module.training for module in model.modules())


def test_expressiveness_cli_is_deterministic_and_leaves_the_global_rng_alone(tmp_path):
    model = create_model("neighbor-attention", backbone="tiny-bert", **TINY)
    model.save_pretrained(tmp_path / "model")
    load_tokenizer("tiny-bert").save_pretrained(tmp_path / "model")
    path = tmp_path / "esnli_dev.csv"
    path.write_text(
        "gold_label,Sentence1,Sentence2,Sentence1_marked_1,Sentence2_marked_1\n"
        "neutral,Two women are embracing.,The sisters hug.,Two women are *embracing*.,The *sisters* hug.\n"
        "entailment,A dog runs outside.,An animal moves.,A *dog* *runs* outside.,An *animal* *moves*.\n"
    )
    argv = ["--model_dir", str(tmp_path / "model"), "--esnli_csv", str(path), "--k", "5"]
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = expressiveness.main(argv)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(7)  # a different global stream must not change the result
    assert expressiveness.main(argv) == first
    assert first["examples"] == 2 and first["examples_with_keywords"] > 0


def test_official_esnli_highlights_are_read_as_keywords(tmp_path):
    path = tmp_path / "esnli_dev.csv"
    header = "pairID,gold_label,Sentence1,Sentence2,Sentence1_marked_1,Sentence2_marked_1,Sentence1_marked_2\n"
    row = "x,neutral,Two women are embracing.,The sisters hug.,"
    row += "Two women are *embracing*.,The *sisters* hug.,*Two* women\n"
    path.write_text(header + row)
    (parsed,) = read_esnli_highlights(path)
    assert parsed["label"] == 1 and parsed["sentence2"] == "The sisters hug."
    assert parsed["keywords"] == {"embracing", "sisters"}  # "two" is a stop word


# ---------------------------------------------------------------- every encoder architecture


def _three_layer_model_on(name: str, **overrides) -> NeighborAttentionForSequenceClassification:
    """A 3-layer tiny `name` encoder (every layer global attention) with neighbor attention in layers 0 and 1."""
    set_seed(0)
    backbone = tiny_backbone_config(name)
    backbone.num_hidden_layers = 3
    if getattr(backbone, "layer_types", None) is not None:
        backbone.layer_types = ["full_attention"] * 3
    settings = {**TINY, "neighbor_layers": [0, 1], "alpha": 0.5, **overrides}
    return NeighborAttentionForSequenceClassification(NeighborAttentionConfig(backbone_config=backbone, **settings))


def _naive_modernbert_layer(model, index, hidden, valid, neighbors, projections, alpha):
    """Token-by-token ModernBERT (pre-LN, rotary) layer with neighbor attention, the module docstring's analogue:
    h' = h + Wo((1 - alpha) ctx_s + alpha ctx_b), then h' + MLP(norm(h')); queries and keys rotated at their own
    positions, the neighbour keys at the token's. `neighbors=None`: the frozen layer. Returns the layer output and
    the per-token MHA used by the neighbour update."""
    layer, config = model.backbone.layers[index], model.backbone.config
    heads = config.num_attention_heads
    size = config.hidden_size // heads
    length = hidden.shape[0]
    cos, sin = model.backbone.rotary_emb(hidden[None], torch.arange(length)[None], "full_attention")
    norm = layer.attn_norm

    def rotate(vector, position):
        parts = vector.view(heads, size)
        half = torch.cat([-parts[:, size // 2 :], parts[:, : size // 2]], dim=-1)
        return (parts * cos[0, position] + half * sin[0, position]).flatten()

    def qkv(vector):
        return layer.attn.Wqkv(vector).view(3, -1)

    def mha(query_vector, keys, values):
        out = []
        for head in range(heads):
            cut = slice(head * size, (head + 1) * size)
            weights = torch.softmax(torch.stack([query_vector[cut] @ k[cut] / math.sqrt(size) for k in keys]), 0)
            out.append(sum(w * v[cut] for w, v in zip(weights, values)))
        return torch.cat(out)

    rows = []
    for i in range(length):
        query = rotate(qkv(norm(hidden[i]))[0], i)
        context = mha(
            query,
            [rotate(qkv(norm(hidden[j]))[1], j) for j in range(length) if valid[j]],
            [qkv(norm(hidden[j]))[2] for j in range(length) if valid[j]],
        )
        if neighbors is not None:
            r = [norm(x) for x in [hidden[i], *neighbors[i]]]
            context_b = mha(query, [rotate(projections.key(x), i) for x in r], [projections.value(x) for x in r])
            context = (1 - alpha) * context + alpha * context_b
        a = hidden[i] + layer.attn.Wo(context)
        rows.append(a + layer.mlp(layer.mlp_norm(a)))

    def update(i, m):  # m + Wo(MHA(Q norm(m), K_b norm(z_i), V_b norm(z_i))), everything at position i
        z = [norm(x) for x in [hidden[i], hidden[mask_of_call[0]], *neighbors[i]]]
        query = rotate(qkv(norm(m))[0], i)
        keys = [rotate(projections.key(x), i) for x in z]
        return m + layer.attn.Wo(mha(query, keys, [projections.value(x) for x in z]))

    mask_of_call = []
    return torch.stack(rows), update, mask_of_call


def test_modernbert_neighbor_attention_recomputed_token_by_token_in_float64():
    """The pre-LN analogue on ModernBERT (rotary positions, fused projections, bias-free norms), in float64: selection,
    m_ij, both neighbor layers with the residual mix, the neighbour update m <- m + m', the frozen last layer and final
    norm, the logits and both regularisers, one token at a time from the modules' parameters."""
    model = _three_layer_model_on("tiny-modernbert").double().eval()
    tokenizer = load_tokenizer("tiny-modernbert")
    batch = encode(tokenizer, ROWS[:1])
    with torch.no_grad():
        out = model(**batch, output_internals=True)
        ids, valid = batch["input_ids"][0], batch["attention_mask"][0].bool()
        mask_position = int(batch["mask_positions"][0])
        emb = model.backbone.embeddings
        word = emb.tok_embeddings.weight
        d = word.shape[1]
        hidden = emb.norm(word[ids])
        neighbors, expected_ids = [], []
        for i in range(len(ids)):
            scores = word @ hidden[i] / math.sqrt(d)
            scores[ids[i]] = -math.inf
            scores[tokenizer.pad_token_id] = -math.inf
            top = torch.argsort(scores, descending=True)[: model.config.num_neighbors]
            expected_ids.append(top)
            own = emb.norm(word[ids[i]])  # no position enters ModernBERT's embeddings
            row = []
            for j in top:
                delta = emb.norm(word[j]) - own
                row.append(model.neighbor_layer_norm(model.neighbor_transform(delta) + delta + hidden[i]))
            neighbors.append(row)
        torch.testing.assert_close(out.neighbor_ids[0], torch.stack(expected_ids), rtol=0, atol=0)
        context = [i for i in range(len(ids)) if valid[i] and i != mask_position]
        cos = torch.nn.functional.cosine_similarity
        reg_n, reg_m = [], []
        for slot in range(2):
            projections = model.neighbor_projections[slot]
            new_hidden, update, mask_of_call = _naive_modernbert_layer(
                model, slot, hidden, valid, neighbors, projections, model.config.alpha
            )
            reg_n.append(
                torch.stack([torch.stack([cos(hidden[i], m, 0) for m in neighbors[i]]).mean() for i in context]).mean()
            )
            reg_m.append(torch.stack([cos(hidden[mask_position], neighbors[i][0], 0) for i in context]).mean())
            if slot == 0:
                mask_of_call.append(mask_position)
                neighbors = [[update(i, m) for m in neighbors[i]] for i in range(len(ids))]
            hidden = new_hidden
        final = model.backbone.final_norm(_naive_modernbert_layer(model, 2, hidden, valid, None, None, 0.0)[0])
    torch.testing.assert_close(out.last_hidden_state[0][valid], final[valid], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(out.logits[0], model.classifier(final[mask_position]), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(out.regularizer_n, torch.stack(reg_n).mean(), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(out.regularizer_m, torch.stack(reg_m).mean(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", TINY_ARCHITECTURES)
def test_every_architecture_trains_exactly_the_neighbor_parameters(name):
    """Create, forward a prompt batch in training mode, backward: K_b, V_b, f_e, LN_e and the classifier get finite,
    non-zero gradients, the encoder and the MLM head none; the [MASK] state decodes to vocabulary logits."""
    model = create_model("neighbor-attention", backbone=name, **TINY).train()
    batch = encode(load_tokenizer(name), ROWS[:2])
    out = model(**batch, labels=torch.tensor([0, 2]), output_internals=True)
    out.loss.backward()
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    expected = {f"neighbor_projections.0.{m}.{p}" for m in ("key", "value") for p in ("weight", "bias")}
    expected |= {
        f"{m}.{p}" for m in ("neighbor_transform", "neighbor_layer_norm", "classifier") for p in ("weight", "bias")
    }
    assert trainable == expected
    for n, p in model.named_parameters():
        if n in trainable:
            assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, n
        else:
            assert p.grad is None, n
    with torch.no_grad():
        logits = model.decode_mask_logits(out.mask_hidden_state)
    assert logits.shape == (2, model.config.backbone_config.vocab_size) and torch.isfinite(logits).all()


@pytest.mark.parametrize("name", TINY_ARCHITECTURES)
def test_alpha_zero_and_all_tokens_untouched_give_the_frozen_encoder(name):
    """alpha = 0 (evaluation) and untouched_fraction = 1 (training, dropout off) leave every layer the frozen layer:
    the last hidden states, and with `output_hidden_states=True` the hidden states of every layer (transformers'
    tuple: the embedding output, then each layer's), equal the encoder's own forward bit for bit."""
    batch = encode(load_tokenizer(name), ROWS)
    valid = batch["attention_mask"].bool()
    for overrides, training in (({"alpha": 0.0}, False), ({"alpha": 0.5, "untouched_fraction": 1.0}, True)):
        model = create_model("neighbor-attention", backbone=name, **TINY, **overrides).train(training)
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        with torch.no_grad():
            out = model(**batch, output_internals=True, output_hidden_states=True)
            frozen = model.backbone(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True
            )
        torch.testing.assert_close(out.last_hidden_state[valid], frozen.last_hidden_state[valid], rtol=0, atol=0)
        layers = model.config.backbone_config.num_hidden_layers
        assert len(out.hidden_states) == len(frozen.hidden_states) == layers + 1
        for ours, theirs in zip(out.hidden_states, frozen.hidden_states):
            torch.testing.assert_close(ours[valid], theirs[valid], rtol=0, atol=0)


def _embedding_at(backbone, token: int, position: int, padding: bool = False) -> torch.Tensor:
    """The embedding layer's output for id `token` at 0-based position `position` of a right-padded row (token type
    0), a padding position with `padding`, written out from each architecture's embedding parameters."""
    kind, emb = backbone.config.model_type, backbone.embeddings
    if kind == "modernbert":  # no position in the embeddings (rotary in the attention)
        return emb.norm(emb.tok_embeddings.weight[token])
    word = emb.word_embeddings.weight[token]
    if kind == "deberta-v2":  # DeBERTa-v3's layout: no absolute positions, no token types; padding masked to 0
        return emb.LayerNorm(word) * (not padding)
    if kind in ("roberta", "xlm-roberta", "mpnet"):  # positions counted past the padding id, which padding gets
        position = emb.padding_idx if padding else position + emb.padding_idx + 1
    vector = word + emb.position_embeddings.weight[position]
    if kind not in ("mpnet", "distilbert"):
        vector = vector + emb.token_type_embeddings.weight[0]
    vector = emb.LayerNorm(vector)
    if kind == "albert":
        return backbone.encoder.embedding_hidden_mapping_in(vector)
    if getattr(backbone, "embeddings_project", None) is not None:  # ELECTRA-small
        return backbone.embeddings_project(vector)
    return vector


@pytest.mark.parametrize("name", TINY_ARCHITECTURES)
def test_neighbour_states_embed_each_neighbour_at_its_tokens_position(name):
    """m_ij = LN_e(f_e(e_ij - e_i) + (e_ij - e_i) + h_i) with e_ij the embedding layer's output for neighbour j at
    token i's position (each architecture's positions, token types and embedding projection), in training mode (no
    dropout in e), also at padding positions (the input's own position ids there); the selection scores h W_e^T /
    sqrt(d) read W_e in the hidden space (ELECTRA-small, ALBERT)."""
    model = create_model("neighbor-attention", backbone=name, **TINY).double().train()
    batch = encode(load_tokenizer(name), ROWS[:2])
    ids, mask = batch["input_ids"], batch["attention_mask"]
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(*ids.shape, model.config.backbone_config.hidden_size, generator=generator).double()
    neighbor_ids = torch.randint(5, model.config.backbone_config.vocab_size, (*ids.shape, 3), generator=generator)
    with torch.no_grad():
        states = model.initial_neighbor_states(hidden, ids, neighbor_ids, attention_mask=mask)
        selected = model.eval().select_neighbors(hidden, ids)
        backbone = model.backbone
        padded = int(mask[0].sum())
        assert padded < ids.shape[1]  # the first row is padded
        for b, i in ((0, 0), (0, 5), (1, int(mask[1].sum()) - 1), (0, padded)):
            padding = not bool(mask[b, i])
            own = _embedding_at(backbone, int(ids[b, i]), i, padding)
            for j in range(3):
                delta = _embedding_at(backbone, int(neighbor_ids[b, i, j]), i, padding) - own
                expected = model.neighbor_layer_norm(model.neighbor_transform(delta) + delta + hidden[b, i])
                torch.testing.assert_close(states[b, i, j], expected, rtol=1e-10, atol=1e-10)
            word = backbone.get_input_embeddings().weight
            projection = backbone.encoder.embedding_hidden_mapping_in if name == "tiny-albert" else None
            projection = getattr(backbone, "embeddings_project", None) or projection
            in_hidden = word if projection is None else projection(word)
            scores = in_hidden @ hidden[b, i] / math.sqrt(hidden.shape[-1])
            scores[ids[b, i]] = scores[backbone.get_input_embeddings().padding_idx] = -math.inf
            assert selected[b, i].tolist() == torch.argsort(scores, descending=True)[:4].tolist()


@pytest.mark.parametrize(
    "name, changes",
    [(name, {}) for name in TINY_ARCHITECTURES]
    + [("tiny-bert", {"tie_word_embeddings": False}), ("tiny-deberta-v2", {"legacy": False})],
)
def test_from_backbone_uses_the_architectures_own_mlm_head_and_pretrained_keys_and_values(name, changes, tmp_path):
    """On a saved masked LM of each architecture (also an untied decoder, and DeBERTa's non-legacy head):
    `token_decoder="mlm_head"` is picked, the [MASK] decoder gives the masked LM's own logits from its encoder's
    states, K_b/V_b start as the layer's pretrained key/value projections, and a save/load keeps the decoder."""
    set_seed(0)
    backbone = tiny_backbone_config(name)
    for field, value in changes.items():
        setattr(backbone, field, value)
    mlm = AutoModelForMaskedLM.from_config(backbone).eval()
    with torch.no_grad():  # non-zero output biases, so that a bias not loaded shows
        for param in mlm.parameters():
            param.add_(0.05 * torch.randn_like(param))
    mlm.save_pretrained(tmp_path / "mlm")
    model = NeighborAttentionForSequenceClassification.from_backbone(str(tmp_path / "mlm"), **TINY).eval()
    assert model.config.token_decoder == "mlm_head" and not any(p.requires_grad for p in model.lm_head.parameters())
    batch = encode(load_tokenizer(name), ROWS[:2])
    rows = torch.arange(2)
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    with torch.no_grad():
        expected = mlm(**inputs).logits[rows, batch["mask_positions"]]
        states = mlm.base_model(**inputs).last_hidden_state[rows, batch["mask_positions"]]
        torch.testing.assert_close(model.decode_mask_logits(states), expected, rtol=1e-5, atol=1e-5)
        probe = torch.randn(5, backbone.hidden_size)
        for which in ("key", "value"):
            mine = getattr(model.neighbor_projections[0], which)(probe)
            torch.testing.assert_close(mine, project(model.backbone, 0, which, probe), rtol=1e-6, atol=1e-6)
        model.save_pretrained(tmp_path / "model")
        reloaded = NeighborAttentionForSequenceClassification.from_pretrained(tmp_path / "model").eval()
        assert_close_after_reload(reloaded.decode_mask_logits(states), expected)


@pytest.mark.parametrize("name", ["tiny-bert", "tiny-electra-small", "tiny-albert", "tiny-modernbert"])
def test_from_backbone_without_mlm_head_decodes_through_the_input_embeddings(name, tmp_path):
    """A checkpoint without MLM-head weights (a bare encoder, as sentence-embedding models and ELECTRA discriminators
    are saved) decodes h W_e^T, with W_e mapped into the hidden space where the embeddings are narrower; asking for
    its MLM head is a ValueError."""
    set_seed(0)
    AutoModel.from_config(tiny_backbone_config(name)).save_pretrained(tmp_path)
    model = NeighborAttentionForSequenceClassification.from_backbone(str(tmp_path), **TINY)
    assert model.config.token_decoder == "input_embeddings" and model.lm_head is None
    states = torch.randn(3, model.config.backbone_config.hidden_size)
    word = model.backbone.get_input_embeddings().weight
    if name == "tiny-albert":
        word = model.backbone.encoder.embedding_hidden_mapping_in(word)
    elif name == "tiny-electra-small":
        word = model.backbone.embeddings_project(word)
    with torch.no_grad():
        torch.testing.assert_close(model.decode_mask_logits(states), states @ word.T, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="no MLM-head weights"):
        NeighborAttentionForSequenceClassification.from_backbone(str(tmp_path), token_decoder="mlm_head", **TINY)


def test_loading_a_checkpoint_names_what_it_lacks_in_one_line_each(tmp_path, capfd, caplog):
    """A headless checkpoint loads with pairzoo's one line about the [MASK] decoder, not transformers' load report
    (which calls it corrupted); an encoder weight the checkpoint lacks is named."""
    set_seed(0)
    encoder = AutoModel.from_config(tiny_backbone_config("tiny-bert"))
    encoder.save_pretrained(tmp_path / "whole")
    state = {k: v for k, v in encoder.state_dict().items() if k != "encoder.layer.1.output.dense.weight"}
    lacking = ["bert.encoder.layer.1.output.dense.weight"]  # as the masked LM names it
    encoder.save_pretrained(tmp_path / "partial", state_dict=state)
    capfd.readouterr()
    NeighborAttentionForSequenceClassification.from_backbone(str(tmp_path / "whole"), **TINY)
    assert [record.getMessage() for record in caplog.records] == [
        f"{tmp_path / 'whole'} has no MLM head: [MASK] states are decoded through the input embeddings."
    ]
    assert not [line for line in capfd.readouterr().err.splitlines() if line.strip() and "Loading weights" not in line]
    caplog.clear()
    _, head_missing = masked_lm_from_pretrained(str(tmp_path / "partial"))
    assert head_missing and [record.getMessage() for record in caplog.records] == [
        f"{tmp_path / 'partial'} lacks 1 encoder weight(s), newly initialised: {lacking}"
    ]
    assert not [line for line in capfd.readouterr().err.splitlines() if line.strip() and "Loading weights" not in line]


# the MLM-head keys pairzoo wrote before the head took its architecture's own modules, by the current names
EARLIER_HEAD_KEYS = {
    "tiny-bert": {
        "lm_head.dense": "lm_head.cls.predictions.transform.dense",
        "lm_head.layer_norm": "lm_head.cls.predictions.transform.LayerNorm",
        "lm_head.bias": "lm_head.cls.predictions.decoder.bias",
    },
    **{
        name: {
            "lm_head.dense": "lm_head.lm_head.dense",
            "lm_head.layer_norm": "lm_head.lm_head.layer_norm",
            "lm_head.bias": "lm_head.lm_head.decoder.bias",
        }
        for name in ("tiny-roberta", "tiny-xlm-roberta")
    },
}


@pytest.mark.parametrize("name", sorted(EARLIER_HEAD_KEYS))
def test_a_save_with_the_earlier_mlm_head_layout_loads_and_saves_in_the_current_one(name, tmp_path):
    """A save whose MLM head has the layout pairzoo wrote before (`lm_head.dense`, `lm_head.layer_norm`,
    `lm_head.bias`) loads with its head weights in place: the same [MASK] decoding and logits as the model saved;
    saved again, it writes the current names."""
    from safetensors.torch import load_file, save_file

    set_seed(0)
    mlm = AutoModelForMaskedLM.from_config(tiny_backbone_config(name)).eval()
    with torch.no_grad():  # non-zero output biases, so that a bias not loaded shows
        for param in mlm.parameters():
            param.add_(0.05 * torch.randn_like(param))
    mlm.save_pretrained(tmp_path / "mlm")
    model = NeighborAttentionForSequenceClassification.from_backbone(str(tmp_path / "mlm"), **TINY).eval()
    model.save_pretrained(tmp_path / "model")
    weights = tmp_path / "model" / "model.safetensors"
    current = load_file(weights)
    earlier = {}
    for key, tensor in current.items():
        for old, new in EARLIER_HEAD_KEYS[name].items():
            if key == new or key.startswith(new + "."):
                key = old + key[len(new) :]
        earlier[key] = tensor
    assert {"lm_head.dense.weight", "lm_head.layer_norm.weight", "lm_head.bias"} <= earlier.keys()
    save_file(earlier, weights, metadata={"format": "pt"})

    reloaded = NeighborAttentionForSequenceClassification.from_pretrained(tmp_path / "model").eval()
    batch = encode(load_tokenizer(name), ROWS[:2])
    states = torch.randn(3, model.config.backbone_config.hidden_size)
    with torch.no_grad():
        assert_close_after_reload(reloaded.decode_mask_logits(states), model.decode_mask_logits(states))
        assert_close_after_reload(reloaded(**batch).logits, model(**batch).logits)
    reloaded.save_pretrained(tmp_path / "again")
    assert load_file(tmp_path / "again" / "model.safetensors").keys() == current.keys()
    config = NeighborAttentionConfig.from_pretrained(tmp_path / "model")  # a config given: the same mapping
    given = NeighborAttentionForSequenceClassification.from_pretrained(tmp_path / "model", config=config).eval()
    with torch.no_grad():
        assert_close_after_reload(given.decode_mask_logits(states), model.decode_mask_logits(states))
