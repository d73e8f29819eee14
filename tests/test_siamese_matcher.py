"""Siamese matchers (ESIM, RE2, BiMPM, CAFE, DIIN, DRCN) with FA/SFA: harness for every (matcher, feature_attention)
pair; FA's gate, SFA (eq. 6 in the paper's form and the branch-sum option, in float64 with hand-written BiGRUs), the
residual option and each new host's core equation (BiMPM's multi-perspective matching, CAFE's factorization machines
and alignments, DIIN's self-attention, fuse gate and interaction tensor, DRCN's dense co-attentive connection and
autoencoder loss) recomputed from the modules' own parameters; per-host defaults and non-integer reduction ratios; the
MiniLM embedding initialisation; the orthogonal recurrent initialisation; bad input."""

import math

import pytest
import torch
from model_harness import ROWS, ModelHarness
from transformers import set_seed

from pairzoo import SiameseMatcherConfig, SiameseMatcherForSequenceClassification, create_model, load_tokenizer
from pairzoo.backbones import TINY_ARCHITECTURES, tiny_backbone_config
from pairzoo.configuration.configuration_siamese_matcher import HOST_DEFAULTS
from pairzoo.modeling import siamese_blocks
from pairzoo.modeling.siamese_bimpm import MultiPerspectiveMatching
from pairzoo.modeling.siamese_blocks import FeatureAttention, FeatureAttentionPair, SelectiveFeatureAttention
from pairzoo.modeling.siamese_cafe import FactorizationMachine
from pairzoo.modeling.siamese_diin import DenseFeatureExtractor, DiinEncoder, DiinMatcher
from pairzoo.modeling.siamese_drcn import DrcnLayer
from pairzoo.pipelines.pipeline_conditional_similarity import encode_tri_inputs
from pairzoo.training.collators import TriEncoderCollator, make_collator

# Small enough to be fast, and within the eq. 9 rule for L = 32 (8.33 ln 32 = 28.9 < 64 / 2 = 32). The hosts' default
# SFA ratios need their default widths (64 / 3 is not whole), so the tiny configs set (r1, r2) = (2, 2).
TINY = {"hidden_size": 64, "max_sequence_length": 32, "re2_blocks": 2, "sfa_reductions": [2, 2]}
# Per host, tiny sizes whose block width D keeps FA and SFA within eq. 9 for L = 32 (D / 2 > 28.9): BiMPM
# D = 8 l = 64, CAFE D = 64 + 6, DIIN D = 64, DRCN D = 2 * 32 (five layers: two autoencoders, two blocks per branch).
TINY_HOSTS = {
    "esim": {**TINY, "matcher": "esim"},
    "re2": {**TINY, "matcher": "re2"},
    "bimpm": {
        "hidden_size": 32,
        "bimpm_perspectives": 8,
        "max_sequence_length": 32,
        "sfa_reductions": [2, 2],
        "matcher": "bimpm",
    },
    "cafe": {
        "hidden_size": 64,
        "max_sequence_length": 32,
        "cafe_fm_factors": 4,
        "sfa_reductions": [2, 2],
        "matcher": "cafe",
    },
    "diin": {
        "hidden_size": 64,
        "max_sequence_length": 32,
        "sfa_reductions": [2, 2],
        "diin_dense_blocks": 2,
        "diin_dense_layers": 2,
        "diin_growth_rate": 8,
        "matcher": "diin",
    },
    "drcn": {
        "hidden_size": 32,
        "max_sequence_length": 32,
        "drcn_layers": 5,
        "sfa_reductions": [2, 2],
        "matcher": "drcn",
    },
}
# blocks per branch: one per interaction stage (RE2: one per block; DRCN: one per autoencoder)
BLOCKS_PER_BRANCH = {"esim": 1, "re2": TINY["re2_blocks"], "bimpm": 1, "cafe": 1, "diin": 1, "drcn": 2}


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    """Run on one intra-op thread (also in the harness's fresh export process): these tiny models gain nothing from
    more, and on a busy machine OpenMP workers waiting for a core cost many times the work itself."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    yield
    torch.set_num_threads(threads)


class _SiameseHarness(ModelHarness):
    """Each (matcher, block) pair runs the harness on one tiny backbone; together they cover both for both hosts."""

    model_name = "siamese-matcher"
    backbone_name = "tiny-bert"

    @pytest.fixture()
    def backbone(self) -> str:
        return self.backbone_name

    def make_inputs(self, tokenizer, rows, model):
        batch = encode_tri_inputs(tokenizer, [r["sentence1"] for r in rows], [r["sentence2"] for r in rows])
        labels = [r["label"] for r in rows]
        if model.config.num_labels > 1:
            labels = [int(label) % model.config.num_labels for label in labels]
        batch["labels"] = torch.tensor(labels)
        return batch


class TestEsim(_SiameseHarness):
    config_overrides = {**TINY, "matcher": "esim", "feature_attention": "none"}


class TestEsimFa(_SiameseHarness):
    backbone_name = "tiny-roberta"
    config_overrides = {**TINY, "matcher": "esim", "feature_attention": "fa", "num_labels": 3}


class TestEsimSfa(_SiameseHarness):
    config_overrides = {**TINY, "matcher": "esim", "feature_attention": "sfa", "num_labels": 3}


class TestRe2(_SiameseHarness):
    backbone_name = "tiny-roberta"
    config_overrides = {**TINY, "matcher": "re2", "feature_attention": "none", "num_labels": 3}


class TestRe2Fa(_SiameseHarness):
    config_overrides = {**TINY, "matcher": "re2", "feature_attention": "fa"}


class TestRe2Sfa(_SiameseHarness):
    backbone_name = "tiny-roberta"
    config_overrides = {**TINY, "matcher": "re2", "feature_attention": "sfa", "re2_blocks": 3, "num_labels": 2}


class TestBimpm(_SiameseHarness):
    config_overrides = {**TINY_HOSTS["bimpm"], "feature_attention": "none", "num_labels": 3}


class TestBimpmFa(_SiameseHarness):
    backbone_name = "tiny-roberta"
    config_overrides = {**TINY_HOSTS["bimpm"], "feature_attention": "fa"}


class TestBimpmSfa(_SiameseHarness):
    # a non-integer r2 that divides the branch width: 2 * 64 / 2 = 64 features, squeezed to 64 / 1.6 = 40 > 28.9
    config_overrides = {**TINY_HOSTS["bimpm"], "feature_attention": "sfa", "sfa_reductions": [2, 1.6], "num_labels": 2}


class TestCafe(_SiameseHarness):
    backbone_name = "tiny-roberta"
    config_overrides = {**TINY_HOSTS["cafe"], "feature_attention": "none"}


class TestCafeFa(_SiameseHarness):
    config_overrides = {**TINY_HOSTS["cafe"], "feature_attention": "fa", "num_labels": 3}


class TestCafeSfa(_SiameseHarness):
    backbone_name = "tiny-roberta"
    config_overrides = {**TINY_HOSTS["cafe"], "feature_attention": "sfa", "num_labels": 3}


class TestDiin(_SiameseHarness):
    config_overrides = {**TINY_HOSTS["diin"], "feature_attention": "none", "num_labels": 3}


class TestDiinFa(_SiameseHarness):
    backbone_name = "tiny-roberta"
    config_overrides = {**TINY_HOSTS["diin"], "feature_attention": "fa", "num_labels": 3}


class TestDiinSfa(_SiameseHarness):
    config_overrides = {**TINY_HOSTS["diin"], "feature_attention": "sfa"}


class TestDrcn(_SiameseHarness):
    backbone_name = "tiny-roberta"
    config_overrides = {**TINY_HOSTS["drcn"], "feature_attention": "none", "num_labels": 3}


class TestDrcnFa(_SiameseHarness):
    config_overrides = {**TINY_HOSTS["drcn"], "feature_attention": "fa"}


class TestDrcnSfa(_SiameseHarness):
    backbone_name = "tiny-roberta"
    config_overrides = {**TINY_HOSTS["drcn"], "feature_attention": "sfa", "num_labels": 3}


class TestDrcnSfaResidualBranchSum(_SiameseHarness):
    """The two non-paper options together: the residual connection and the earlier branch-sum squeeze."""

    config_overrides = {
        **TINY_HOSTS["drcn"],
        "feature_attention": "sfa",
        "feature_attention_residual": True,
        "sfa_squeeze": "branch_sum",
    }


class TestDrcnSfaGatedResidual(_SiameseHarness):
    """The gated skip connection (gates saved, loaded and exported with the rest)."""

    config_overrides = {**TINY_HOSTS["drcn"], "feature_attention": "sfa", "feature_attention_residual": "gated"}

    def make_model(self, backbone: str, **overrides):
        """Gates moved off their zero start (a zero gate passes no gradient to its block), so every block gets
        gradients and the round trips carry non-zero gates."""
        model = super().make_model(backbone, **overrides)
        with torch.no_grad():
            for index, pair in enumerate(m for m in model.modules() if isinstance(m, FeatureAttentionPair)):
                pair.gate.copy_(torch.tensor([0.5, -0.25]) * (index + 1))
        return model


def _features(batch: int = 3, length: int = 7, dim: int = 64, seed: int = 0):
    """Random features and a right-padded mask with rows of lengths length, 4, 1."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, dim, generator=generator)
    lengths = torch.tensor([length, 4, 1][:batch])
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    return x, mask


def test_fa_gate_recomputed_from_parameters():
    """e = sigmoid(W2 tanh(W1 mean_valid(x))), u = e * x on valid tokens, zero on padding."""
    torch.manual_seed(0)
    block = FeatureAttention(64, 2).eval()
    x, mask = _features()
    w1, w2 = block.squeeze.weight, block.excite.weight
    assert w1.shape == (32, 64) and w2.shape == (64, 32)
    with torch.no_grad():
        out = block(x, mask)
        for i in range(x.shape[0]):
            valid = x[i, : int(mask[i].sum())]
            gate = torch.sigmoid(w2 @ torch.tanh(w1 @ valid.mean(0)))
            torch.testing.assert_close(block.gate(x, mask)[i], gate)
            torch.testing.assert_close(out[i, : len(valid)], valid * gate)
            if len(valid) < x.shape[1]:
                assert out[i, len(valid) :].abs().max().item() == 0.0
    # the gate ignores whatever sits in padding positions
    noisy = x.clone()
    noisy[mask == 0] = 1e3
    with torch.no_grad():
        torch.testing.assert_close(block(noisy, mask), out)


def _bigru_by_hand(gru: torch.nn.GRU, x: torch.Tensor) -> torch.Tensor:
    """A one-layer BiGRU on ONE unpadded sentence (L, d_in) -> (L, 2 H) from its weights, gate by gate (PyTorch's
    r, z, n order): r = sigmoid(W_ir x + b_ir + W_hr h + b_hr), z = sigmoid(W_iz x + b_iz + W_hz h + b_hz),
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h; the backward direction runs from the
    last token."""
    directions = []
    for suffix, order in (("", range(len(x))), ("_reverse", reversed(range(len(x))))):
        w_i, w_h = getattr(gru, f"weight_ih_l0{suffix}"), getattr(gru, f"weight_hh_l0{suffix}")
        b_i, b_h = getattr(gru, f"bias_ih_l0{suffix}"), getattr(gru, f"bias_hh_l0{suffix}")
        h = torch.zeros(gru.hidden_size, dtype=x.dtype)
        states = [None] * len(x)
        for t in order:
            i_r, i_z, i_n = (w_i @ x[t] + b_i).chunk(3)
            h_r, h_z, h_n = (w_h @ h + b_h).chunk(3)
            r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
            h = (1 - z) * torch.tanh(i_n + r * h_n) + z * h
            states[t] = h
        directions.append(torch.stack(states))
    return torch.cat(directions, -1)


def _sfa_by_hand(
    block: SelectiveFeatureAttention, x: torch.Tensor, squeeze: str
) -> "tuple[torch.Tensor, torch.Tensor]":
    """SFA on ONE unpadded sentence (L, D), from the block's own parameters: 1x1 convolutions as matrix products,
    the N stacked BiGRUs written out, and eqs. 6-8. Eq. 6 in the paper's form pools the (N, L, W) stack over
    branches and tokens together; `branch_sum` pools sum_n x^(n) over tokens."""
    reduced = x @ block.reduce.weight[:, :, 0].T + block.reduce.bias
    views, hidden = [], reduced
    for gru in block.branches:
        hidden = _bigru_by_hand(gru, hidden)
        views.append(hidden)
    if squeeze == "paper":
        every = torch.cat(views, 0)  # (N L, W): each feature over all branches and tokens
        s = every.sum(0) / every.shape[0] + every.max(0).values
    else:
        fused = sum(views)
        s = fused.sum(0) / fused.shape[0] + fused.max(0).values
    z = torch.tanh(block.squeeze.weight @ s)
    a = torch.stack([torch.sigmoid(fc.weight @ z) for fc in block.select])  # (N, 2D/r1)
    weights = torch.exp(a) / torch.exp(a).sum(0, keepdim=True)
    selected = sum(w * v for w, v in zip(weights, views))
    output = selected @ block.expand.weight[:, :, 0].T + block.expand.bias
    return output, weights


@pytest.mark.parametrize("squeeze", ["paper", "branch_sum"])
@pytest.mark.parametrize("branches, reductions", [(3, (2, 2)), (2, (4, 1)), (2, (3.2, 1.6))])
def test_sfa_recomputed_from_parameters_in_float64(squeeze, branches, reductions):
    torch.manual_seed(0)
    block = SelectiveFeatureAttention(64, branches, reductions, squeeze).double().eval()
    with torch.no_grad():  # non-zero biases, so that a bias the module dropped would show
        for name, param in block.named_parameters():
            if "bias" in name:
                param.normal_(0.0, 0.3)
    x, mask = _features()
    x = x.double()
    width = 2 * round(64 / reductions[0])
    assert block.squeeze.weight.shape == (round(width / reductions[1]), width)
    with torch.no_grad():
        out, weights = block(x, mask, return_weights=True)
        assert out.shape == x.shape and weights.shape == (3, branches, width)
        torch.testing.assert_close(weights.sum(1), torch.ones(3, width, dtype=torch.float64))
        assert (weights > 0).all() and (weights < 1).all()
        for i in range(x.shape[0]):
            length = int(mask[i].sum())
            expected_out, expected_weights = _sfa_by_hand(block, x[i, :length], squeeze)
            torch.testing.assert_close(weights[i], expected_weights, atol=1e-12, rtol=1e-10)
            torch.testing.assert_close(out[i, :length], expected_out, atol=1e-12, rtol=1e-10)
            if length < x.shape[1]:
                assert out[i, length:].abs().max().item() == 0.0


def test_sfa_squeeze_options_differ_and_ignore_padding():
    """The two eq. 6 readings give different branch weights from the same parameters (so the recomputation above
    tells them apart), and neither reads padding positions."""
    torch.manual_seed(0)
    paper = SelectiveFeatureAttention(64, 3, (2, 2), "paper").double().eval()
    branch_sum = SelectiveFeatureAttention(64, 3, (2, 2), "branch_sum").double().eval()
    branch_sum.load_state_dict(paper.state_dict())
    x, mask = _features()
    x = x.double()
    noisy = x.clone()
    noisy[mask == 0] = 1e3
    with torch.no_grad():
        w_paper = paper(x, mask, return_weights=True)[1]
        w_sum = branch_sum(x, mask, return_weights=True)[1]
        assert (w_paper - w_sum).abs().max() > 1e-3
        for block, weights in ((paper, w_paper), (branch_sum, w_sum)):
            torch.testing.assert_close(block(noisy, mask, return_weights=True)[1], weights)
    with pytest.raises(ValueError, match="sfa_squeeze"):
        SelectiveFeatureAttention(64, 3, (2, 2), "sum")


def test_sfa_weights_differ_per_feature_and_per_sentence():
    """The selection is per feature and input-dependent (not one scalar per branch, not a constant)."""
    torch.manual_seed(0)
    block = SelectiveFeatureAttention(64, 3, (2, 2)).eval()
    x, mask = _features()
    with torch.no_grad():
        _, weights = block(x, mask, return_weights=True)
    assert weights[0].std(-1).min() > 1e-4
    assert (weights[0] - weights[1]).abs().max() > 1e-4


@pytest.mark.parametrize("matcher", list(TINY_HOSTS))
@pytest.mark.parametrize("feature_attention", ["fa", "sfa"])
def test_blocks_sit_on_both_branches_with_unshared_parameters(matcher, feature_attention):
    model = create_model(
        "siamese-matcher", backbone="tiny-bert", feature_attention=feature_attention, **TINY_HOSTS[matcher]
    )
    block_class = FeatureAttention if feature_attention == "fa" else SelectiveFeatureAttention
    blocks = [m for m in model.modules() if isinstance(m, block_class)]
    assert len(blocks) == 2 * BLOCKS_PER_BRANCH[matcher]
    for block in blocks:
        first = block.squeeze.in_features if feature_attention == "fa" else block.reduce.in_channels
        assert first == model.config.feature_attention_width()
    pointers = {p.data_ptr() for block in blocks for p in block.parameters()}
    assert len(pointers) == sum(len(list(block.parameters())) for block in blocks)
    plain = create_model("siamese-matcher", backbone="tiny-bert", **TINY_HOSTS[matcher])
    added = sum(p.numel() for block in blocks for p in block.parameters())
    assert model.num_parameters() - plain.num_parameters() == added


def test_minilm_embeddings_initialise_the_word_embeddings_and_can_be_frozen():
    from transformers import AutoModel

    from pairzoo.backbones import minilm_path

    reference = AutoModel.from_pretrained(minilm_path()).get_input_embeddings().weight
    model = create_model("siamese-matcher", backbone="minilm", matcher="re2", freeze_embeddings=True, num_labels=3)
    assert model.embeddings.weight.shape == (30522, 384)
    torch.testing.assert_close(model.embeddings.weight, reference, rtol=0, atol=0)
    assert not model.embeddings.weight.requires_grad
    tokenizer = load_tokenizer("minilm")
    batch = encode_tri_inputs(tokenizer, [r["sentence1"] for r in ROWS], [r["sentence2"] for r in ROWS])
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model(**batch, labels=torch.tensor([0, 1, 2])).loss.backward()
    optimizer.step()
    torch.testing.assert_close(model.embeddings.weight, reference, rtol=0, atol=0)
    with pytest.raises(ValueError, match="embedding_size"):
        create_model("siamese-matcher", backbone="minilm", embedding_size=100)


@pytest.mark.parametrize("backbone", TINY_ARCHITECTURES)
def test_every_architecture_trains_on_its_embedding_matrix_width(backbone):
    """create -> forward on a sentence-pair batch -> backward: the word embeddings are as wide as the backbone's own
    input embedding matrix (its factorised `embedding_size` on ALBERT and ELECTRA-small, narrower than its hidden
    size), the host's first layers read that width, and every trainable parameter gets a finite gradient."""
    from transformers import AutoModel

    width = AutoModel.from_config(tiny_backbone_config(backbone)).get_input_embeddings().weight.shape[1]
    set_seed(0)
    model = create_model("siamese-matcher", backbone=backbone, feature_attention="sfa", **TINY_HOSTS["esim"]).train()
    assert model.config.embedding_size == width and model.embeddings.weight.shape[1] == width
    rows = ROWS[:2]
    batch = encode_tri_inputs(load_tokenizer(backbone), [r["sentence1"] for r in rows], [r["sentence2"] for r in rows])
    out = model(**batch, labels=torch.tensor([r["label"] for r in rows]))
    assert out.logits.shape == (2, 1) and torch.isfinite(out.loss)
    out.loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters() if p.requires_grad}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values()), backbone
    assert model.embeddings.weight.grad.any()


@pytest.mark.parametrize("backbone", ["tiny-albert", "tiny-electra-small", "tiny-deberta-v2"])
def test_embeddings_copied_from_a_saved_backbone_of_any_embedding_width(backbone, tmp_path):
    """`from_backbone` copies the encoder's token-embedding matrix as it is, also where it is narrower than the
    encoder (ALBERT and ELECTRA-small project it to the hidden size inside the encoder, which the matcher does not
    use); the host then runs on that width."""
    from transformers import AutoModel

    set_seed(0)
    encoder = AutoModel.from_config(tiny_backbone_config(backbone))
    encoder.save_pretrained(tmp_path)
    matrix = encoder.get_input_embeddings().weight
    model = SiameseMatcherForSequenceClassification.from_backbone(str(tmp_path), **TINY_HOSTS["re2"])
    torch.testing.assert_close(model.embeddings.weight, matrix, rtol=0, atol=0)
    assert model.config.embedding_size == matrix.shape[1]
    rows = ROWS[:2]
    batch = encode_tri_inputs(load_tokenizer(backbone), [r["sentence1"] for r in rows], [r["sentence2"] for r in rows])
    with torch.no_grad():
        assert torch.isfinite(model.eval()(**batch).logits).all()
    with pytest.raises(ValueError, match="embedding_size"):
        SiameseMatcherForSequenceClassification.from_backbone(
            str(tmp_path), **{**TINY_HOSTS["re2"], "embedding_size": model.config.backbone_config.hidden_size + 1}
        )


def test_tri_collator_rows_without_condition_train_the_model():
    """The training CLI's collator for `input_format = "tri"` feeds the model (sentence pairs, no condition)."""
    set_seed(0)
    model = create_model("siamese-matcher", backbone="tiny-bert", num_labels=3, feature_attention="fa", **TINY)
    collator = make_collator(model, load_tokenizer("tiny-bert"), max_length=32)
    assert isinstance(collator, TriEncoderCollator)
    rows = [{"sentence1": r["sentence1"], "sentence2": r["sentence2"], "label": i} for i, r in enumerate(ROWS)]
    batch = collator(rows)
    assert set(batch) == {"input_ids", "attention_mask", "input_ids_2", "attention_mask_2", "labels"}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        loss = model(**batch).loss
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"matcher": "mvlstm"}, "matcher"),
        ({"feature_attention": "se"}, "feature_attention"),
        ({"feature_attention": "fa", "fa_reduction": 5}, "fa_reduction"),  # 150 / 5 = 30 <= 8.33 ln 128 = 40.4
        ({"feature_attention": "sfa", "sfa_reductions": [10, 1]}, "sfa_reductions"),  # 2 (150 / 10) = 30
        ({"feature_attention": "sfa", "sfa_reductions": [2, 5]}, "sfa_reductions"),  # 150 / 5 = 30
        ({"feature_attention": "fa", "hidden_size": 40, "max_sequence_length": 128}, "fa_reduction"),  # 40 / 1
        ({"sfa_reductions": [2]}, "sfa_reductions"),
        ({"sfa_reductions": 2}, "sfa_reductions"),
        ({"sfa_branches": 0}, "sfa_branches"),
        ({"sfa_branches": 2.5}, "sfa_branches"),
        # reduction ratios: numbers >= 1 that divide their width exactly
        ({"fa_reduction": 0.5}, "fa_reduction"),
        ({"fa_reduction": "2"}, "fa_reduction"),
        ({"fa_reduction": True}, "fa_reduction"),
        ({"sfa_reductions": [0, 2]}, "sfa_reductions"),
        ({"sfa_reductions": [2, "x"]}, "sfa_reductions"),
        ({"feature_attention": "fa", "fa_reduction": 4}, "fa_reduction"),  # 150 / 4 = 37.5 features
        ({"feature_attention": "sfa", "sfa_reductions": [4, 2]}, r"sfa_reductions\[0\]"),  # 150 / 4 = 37.5
        ({"feature_attention": "sfa", "sfa_reductions": [3, 3]}, r"sfa_reductions\[1\]"),  # 100 / 3
        ({"matcher": "cafe", "feature_attention": "sfa", "sfa_reductions": [3, 5]}, "sfa_reductions"),  # 104 / 5
        ({"matcher": "bimpm", "feature_attention": "sfa", "sfa_reductions": [3.75, 4]}, "sfa_reductions"),  # 42.7
        ({"sfa_squeeze": "sum"}, "sfa_squeeze"),
        ({"sfa_squeeze": None}, "sfa_squeeze"),
        ({"feature_attention_residual": "yes"}, "feature_attention_residual"),
        ({"feature_attention_residual": None}, "feature_attention_residual"),
        ({"feature_attention_residual": "rezero"}, "feature_attention_residual"),
        ({"re2_kernel_size": 4}, "re2_kernel_size"),
        ({"dropout": 1.5}, "dropout"),
        ({"label_min": 5.0, "label_max": 1.0}, "label_max"),
        ({"num_labels": 0}, "num_labels"),
        ({"bimpm_perspectives": 0}, "bimpm_perspectives"),
        ({"highway_layers": 0}, "highway_layers"),
        ({"cafe_fm_factors": 2.5}, "cafe_fm_factors"),
        ({"diin_dense_blocks": 0}, "diin_dense_blocks"),
        ({"diin_dense_layers": -1}, "diin_dense_layers"),
        ({"diin_growth_rate": 0}, "diin_growth_rate"),
        ({"diin_first_scale": 0.0}, "diin_first_scale"),
        ({"diin_transition_scale": 1.5}, "diin_transition_scale"),
        ({"drcn_layers": 2}, "drcn_layers"),
        ({"drcn_reconstruction_weight": -0.1}, "drcn_reconstruction_weight"),
        # block widths follow the host: BiMPM's 8 l = 32 features give an FA bottleneck of 16 <= 40.4
        ({"matcher": "bimpm", "bimpm_perspectives": 4, "feature_attention": "fa"}, "fa_reduction"),
        # DRCN's blocks are 2 H = 300 wide: r = 10 gives 30 <= 40.4 (ESIM's 150 / 5 = 30 fails the same way)
        ({"matcher": "drcn", "feature_attention": "fa", "fa_reduction": 10}, "fa_reduction"),
        # DRCN with Table 1's r2 = 5: a squeeze of 200 / 5 = 40 <= 40.4 at L = 128
        ({"matcher": "drcn", "feature_attention": "sfa", "sfa_reductions": [3, 5]}, "sfa_reductions"),
    ],
)
def test_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        SiameseMatcherConfig(**kwargs)


def test_bottleneck_rule_boundary_follows_eq_9():
    """D // r must exceed 8.33 ln L: with D = 64, r = 2 (width 32) L = 46 passes (31.9) and L = 47 fails (32.1)."""
    assert 8.33 * math.log(46) < 32 < 8.33 * math.log(47)
    SiameseMatcherConfig(feature_attention="fa", hidden_size=64, fa_reduction=2, max_sequence_length=46)
    with pytest.raises(ValueError, match="bottleneck rule"):
        SiameseMatcherConfig(feature_attention="fa", hidden_size=64, fa_reduction=2, max_sequence_length=47)
    # the rule is about the block in use: no block, no check
    SiameseMatcherConfig(feature_attention="none", hidden_size=64, fa_reduction=64, max_sequence_length=512)


@pytest.mark.parametrize("feature_attention", ["none", "sfa"])
def test_empty_sentence_is_a_clear_error(feature_attention):
    model = create_model("siamese-matcher", backbone="tiny-bert", feature_attention=feature_attention, **TINY)
    tokenizer = load_tokenizer("tiny-bert")
    batch = encode_tri_inputs(tokenizer, ["A man cycles.", "Two men run."], ["A man rides.", "Men run."])
    batch["attention_mask_2"][1] = 0
    with pytest.raises(ValueError, match=r"attention_mask_2.*rows \[1\].*non-empty"):
        model(**batch)
    with pytest.raises(ValueError, match="empty"):
        encode_tri_inputs(tokenizer, ["A man cycles."], ["   "])
    with pytest.raises(ValueError, match="empty"):
        TriEncoderCollator(tokenizer)([{"sentence1": "", "sentence2": "A man.", "label": 1.0}])
    x, mask = _features()
    mask[2] = 0
    for block in (FeatureAttention(64, 2), SelectiveFeatureAttention(64, 3, (2, 2))):
        with pytest.raises(ValueError, match="non-empty"):
            block(x, mask)


def test_left_padding_and_conditions_are_rejected():
    model = create_model("siamese-matcher", backbone="tiny-bert", **TINY)
    tokenizer = load_tokenizer("tiny-bert")
    batch = encode_tri_inputs(tokenizer, ["A man cycles.", "Two men run fast."], ["A man rides.", "Men run."])
    with pytest.raises(ValueError, match="right-padded"):
        model(**{**batch, "attention_mask": batch["attention_mask"].flip(1)})
    with_condition = encode_tri_inputs(tokenizer, ["A man cycles."], ["A man rides."], ["The place."])
    with pytest.raises(ValueError, match="condition"):
        model(**with_condition)


def test_block_width_follows_the_host():
    """D is the host's interaction-feature width, so the eq. 9 check depends on the matcher."""
    widths = {"esim": 150, "re2": 150, "bimpm": 160, "cafe": 156, "diin": 150, "drcn": 300}
    for matcher, width in widths.items():
        assert SiameseMatcherConfig(matcher=matcher).feature_attention_width() == width
    # 150 / 5 = 30 fails for ESIM, 300 / 5 = 60 passes for DRCN (floor 40.4 at L = 128)
    with pytest.raises(ValueError, match="fa_reduction"):
        SiameseMatcherConfig(matcher="esim", feature_attention="fa", fa_reduction=5)
    SiameseMatcherConfig(matcher="drcn", feature_attention="fa", fa_reduction=5)


# The documented per-host defaults: (r, (r1, r2), N) and the SFA widths (2 D / r1, 2 D / (r1 r2)) they give at the
# default sizes. Table 1 of the paper: (1, (3, 5), 3), BiMPM (2, (3.75, 4), 2).
DOCUMENTED_DEFAULTS = {
    "esim": (1, [3, 2], 3, (100, 50)),
    "re2": (1, [3, 2], 3, (100, 50)),
    "bimpm": (2, [4, 1.6], 2, (80, 50)),
    "cafe": (1, [3, 2], 3, (104, 52)),
    "diin": (1, [3, 2], 3, (100, 50)),
    "drcn": (1, [3, 4], 3, (200, 50)),
}


@pytest.mark.parametrize("matcher", list(DOCUMENTED_DEFAULTS))
def test_reduction_defaults_follow_the_host_and_survive_a_round_trip(matcher, tmp_path):
    r, reductions, branches, widths = DOCUMENTED_DEFAULTS[matcher]
    assert set(HOST_DEFAULTS) == set(DOCUMENTED_DEFAULTS)
    config = SiameseMatcherConfig(matcher=matcher, feature_attention="sfa")
    assert (config.fa_reduction, config.sfa_reductions, config.sfa_branches) == (r, reductions, branches)
    assert tuple(config.bottleneck_widths().values()) == widths
    assert SiameseMatcherConfig(matcher=matcher, feature_attention="fa").bottleneck_widths() == {
        "fa_reduction": config.feature_attention_width() // r
    }
    assert config.sfa_squeeze == "paper" and config.feature_attention_residual is False
    config.save_pretrained(tmp_path)
    reloaded = SiameseMatcherConfig.from_pretrained(tmp_path)
    assert (reloaded.fa_reduction, reloaded.sfa_reductions, reloaded.sfa_branches) == (r, reductions, branches)
    # an explicit value wins over the host's default, also for the other fields
    explicit = SiameseMatcherConfig(matcher=matcher, fa_reduction=2, sfa_reductions=[2, 2], sfa_branches=4)
    assert (explicit.fa_reduction, explicit.sfa_reductions, explicit.sfa_branches) == (2, [2, 2], 4)


def test_table_1_ratios_hold_where_the_widths_allow():
    """DRCN with Table 1's r2 = 5 is within eq. 9 for sentences of at most 121 tokens (200 / 5 = 40 > 8.33 ln 121);
    a non-integer r1 works where it divides the width (300 / 3.75 = 80) and whole-number ratios given as floats are
    stored as ints."""
    assert SiameseMatcherConfig(
        matcher="drcn", feature_attention="sfa", sfa_reductions=[3, 5], max_sequence_length=121
    ).bottleneck_widths() == {"sfa_reductions[0] (r1)": 200, "sfa_reductions[1] (r2)": 40}
    config = SiameseMatcherConfig(matcher="drcn", feature_attention="sfa", sfa_reductions=[3.75, 3.2])
    assert config.bottleneck_widths() == {"sfa_reductions[0] (r1)": 160, "sfa_reductions[1] (r2)": 50}
    assert SiameseMatcherConfig(feature_attention="fa", fa_reduction=2.5).bottleneck_widths() == {"fa_reduction": 60}
    assert SiameseMatcherConfig(sfa_reductions=[3.0, 2.0]).sfa_reductions == [3, 2]
    block = SelectiveFeatureAttention(300, 2, (3.75, 3.2))
    assert block.reduce.out_channels == 80 and block.branches[0].hidden_size == 80
    assert block.squeeze.weight.shape == (50, 160) and block.expand.in_channels == 160
    assert FeatureAttention(150, 2.5).squeeze.out_features == 60
    for make, field in (
        (lambda: SelectiveFeatureAttention(160, 2, (3.75, 4)), r"sfa_reductions\[0\].*160 / 3.75"),
        (lambda: SelectiveFeatureAttention(300, 2, (3, 3)), r"sfa_reductions\[1\].*200 / 3"),
        (lambda: FeatureAttention(150, 2.4), "fa_reduction.*150 / 2.4"),
    ):
        with pytest.raises(ValueError, match=field):
            make()


@pytest.mark.parametrize("feature_attention", ["fa", "sfa"])
def test_residual_option_adds_the_input_to_each_block_output(feature_attention):
    config = SiameseMatcherConfig(
        feature_attention=feature_attention, feature_attention_residual=True, vocab_size=50, embedding_size=8, **TINY
    )
    pair = FeatureAttentionPair(config).eval()
    x1, mask1 = _features(seed=1)
    x2, mask2 = _features(batch=3, length=5, seed=2)
    with torch.no_grad():
        u1, u2 = pair(x1, mask1, x2, mask2)
        torch.testing.assert_close(u1, x1 + pair.first(x1, mask1))
        torch.testing.assert_close(u2, x2 + pair.second(x2, mask2))
        # padding positions carry x (the blocks output zero there)
        torch.testing.assert_close(u1[mask1 == 0], x1[mask1 == 0])
        pair.residual = False
        plain1, _ = pair(x1, mask1, x2, mask2)
        torch.testing.assert_close(plain1, pair.first(x1, mask1))
        assert (u1 - plain1).abs().max() > 0.1


@pytest.mark.parametrize("matcher", ["re2", "drcn"])
def test_residual_host_with_a_silent_block_is_the_host_without_blocks(matcher):
    """With SFA's output convolution zeroed, x + SFA(x) = x: the residual host then computes exactly what the host
    without blocks computes from the same other parameters (so the skip sits where the block does)."""
    tokenizer = load_tokenizer("tiny-bert")
    batch = encode_tri_inputs(tokenizer, [r["sentence1"] for r in ROWS], [r["sentence2"] for r in ROWS])
    set_seed(0)
    plain = create_model("siamese-matcher", backbone="tiny-bert", num_labels=3, **TINY_HOSTS[matcher]).eval()
    residual = create_model(
        "siamese-matcher",
        backbone="tiny-bert",
        num_labels=3,
        feature_attention="sfa",
        feature_attention_residual=True,
        **TINY_HOSTS[matcher],
    ).eval()
    missing, unexpected = residual.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected and missing and all("feature_attention" in key for key in missing)
    blocks = [m for m in residual.modules() if isinstance(m, SelectiveFeatureAttention)]
    with torch.no_grad():
        for block in blocks:
            block.expand.weight.zero_()
            block.expand.bias.zero_()
        torch.testing.assert_close(residual(**batch).logits, plain(**batch).logits, atol=1e-6, rtol=1e-5)
        no_skip = create_model(
            "siamese-matcher", backbone="tiny-bert", num_labels=3, feature_attention="sfa", **TINY_HOSTS[matcher]
        ).eval()
        no_skip.load_state_dict(residual.state_dict())
        assert (no_skip(**batch).logits - plain(**batch).logits).abs().max() > 1e-4


def _gated_config(feature_attention: str, host: dict) -> SiameseMatcherConfig:
    """A tiny host with gated feature-attention pairs (`feature_attention_residual="gated"`)."""
    return SiameseMatcherConfig(
        feature_attention=feature_attention,
        feature_attention_residual="gated",
        vocab_size=50,
        embedding_size=8,
        **host,
    )


@pytest.mark.parametrize("feature_attention", ["fa", "sfa"])
def test_gated_residual_recomputed_from_the_gates_and_zero_at_initialisation(feature_attention):
    """`feature_attention_residual="gated"`: x_i + g_i block_i(x_i) from the pair's own gates; g = 0 after
    construction (and after `post_init` re-initialisation), so each branch starts as its input."""
    config = _gated_config(feature_attention, TINY)
    model = SiameseMatcherForSequenceClassification(config)
    pairs = [m for m in model.modules() if isinstance(m, FeatureAttentionPair)]
    assert pairs and all(torch.equal(m.gate, torch.zeros(2)) for m in pairs)
    pair = FeatureAttentionPair(config).eval()
    x1, mask1 = _features(seed=1)
    x2, mask2 = _features(batch=3, length=5, seed=2)
    with torch.no_grad():
        start1, start2 = pair(x1, mask1, x2, mask2)
        assert torch.equal(start1, x1) and torch.equal(start2, x2)
        pair.gate.copy_(torch.tensor([0.7, -1.3]))
        u1, u2 = pair(x1, mask1, x2, mask2)
        torch.testing.assert_close(u1, x1 + 0.7 * pair.first(x1, mask1))
        torch.testing.assert_close(u2, x2 - 1.3 * pair.second(x2, mask2))
    # the gates learn: a loss through the pair reaches them
    pair.train()
    pair.gate.data.zero_()
    u1, u2 = pair(x1, mask1, x2, mask2)
    (u1.square().sum() + u2.sum()).backward()
    assert pair.gate.grad is not None and (pair.gate.grad != 0).all()
    assert FeatureAttentionPair(SiameseMatcherConfig(vocab_size=50, embedding_size=8, **TINY)).gate is None


def test_contribution_recomputed_from_the_gates_and_the_blocks():
    """`training_stats()`'s `contribution_i`: mean over training forwards of ||g_i block_i(x_i)|| / ||x_i|| (valid
    tokens only), recomputed from the pair's own gates and blocks; eval forwards record nothing; read once."""
    model = SiameseMatcherForSequenceClassification(_gated_config("sfa", TINY_HOSTS["esim"]))
    pair = model.matcher.feature_attention
    with torch.no_grad():
        pair.gate.copy_(torch.tensor([0.5, -2.0]))
    batches = [(*_features(seed=1), *_features(batch=3, length=5, seed=2)), (*_features(seed=3), *_features(seed=4))]
    expected = []
    for x1, m1, x2, m2 in batches:
        pair.train()
        torch.manual_seed(0)
        pair(x1, m1, x2, m2)
        pair.eval()  # recompute without dropout (equal to the training forward here: rel 1e-5 below)
        with torch.no_grad():
            row = []
            for gate, block, x, m in ((0.5, pair.first, x1, m1), (-2.0, pair.second, x2, m2)):
                added = (gate * block(x, m)).norm(dim=-1)[m.bool()].mean()
                row.append(float(added / x.norm(dim=-1)[m.bool()].mean()))
            expected.append(row)
        pair(x1, m1, x2, m2)  # eval: not recorded
    stats = model.training_stats()
    for branch in (0, 1):
        mean = (expected[0][branch] + expected[1][branch]) / 2
        assert stats[f"siamese/feature_attention/contribution_{branch}"] == pytest.approx(mean, rel=1e-5)
    assert set(model.training_stats()) == {"siamese/feature_attention/gate_0", "siamese/feature_attention/gate_1"}


def test_frozen_gates_stay_zero_and_the_blocks_add_nothing():
    """`feature_attention_gate_trainable=False` (the gated arm's control): the gates are not among the trainable
    parameters (no optimizer sees them), so they stay zero and each pair passes its inputs through unchanged."""
    model = SiameseMatcherForSequenceClassification(
        _gated_config("sfa", {**TINY, "feature_attention_gate_trainable": False})
    )
    gates = [m.gate for m in model.modules() if isinstance(m, FeatureAttentionPair)]
    assert gates and not any(g.requires_grad for g in gates)
    assert all(id(g) not in {id(p) for p in model.parameters() if p.requires_grad} for g in gates)
    pair = next(m for m in model.modules() if isinstance(m, FeatureAttentionPair))
    x1, mask1 = _features(seed=1)
    x2, mask2 = _features(batch=3, length=5, seed=2)
    u1, u2 = pair(x1, mask1, x2, mask2)
    assert torch.equal(u1, x1) and torch.equal(u2, x2)
    with pytest.raises(ValueError, match="feature_attention_gate_trainable"):
        SiameseMatcherConfig(feature_attention="sfa", feature_attention_gate_trainable=False, **TINY)
    with pytest.raises(ValueError, match="feature_attention_gate_trainable"):
        _gated_config("sfa", {**TINY, "feature_attention_gate_trainable": "no"})


@pytest.mark.parametrize(
    "matcher, feature_attention, places",
    [
        ("esim", "sfa", ["feature_attention"]),
        ("drcn", "sfa", ["feature_attention/2", "feature_attention/4"]),
        ("re2", "fa", ["blocks/0/feature_attention", "blocks/1/feature_attention"]),
    ],
)
def test_training_stats_are_the_gates_of_every_gated_pair(matcher, feature_attention, places):
    """`training_stats()` returns each gated pair's current g_1, g_2 as Python floats, keyed by the pair's place in
    the host (DRCN: its layer, RE2: its block)."""
    model = SiameseMatcherForSequenceClassification(_gated_config(feature_attention, TINY_HOSTS[matcher]))
    keys = [f"siamese/{place}/gate_{branch}" for place in places for branch in (0, 1)]
    assert model.training_stats() == dict.fromkeys(keys, 0.0)
    pairs = [m for m in model.matcher.modules() if isinstance(m, FeatureAttentionPair)]
    values = []
    with torch.no_grad():
        for index, pair in enumerate(pairs):
            pair.gate.copy_(torch.tensor([0.5, -0.25]) * (index + 1))
            values += [0.5 * (index + 1), -0.25 * (index + 1)]
    stats = model.training_stats()
    assert stats == dict(zip(keys, values)) and all(type(value) is float for value in stats.values())


@pytest.mark.parametrize(
    "feature_attention, residual", [("none", "gated"), ("fa", False), ("fa", True), ("sfa", False), ("sfa", True)]
)
def test_training_stats_are_empty_without_gates(feature_attention, residual):
    """No gated pair (no blocks, or blocks without a gate): nothing to report."""
    config = SiameseMatcherConfig(
        feature_attention=feature_attention,
        feature_attention_residual=residual,
        vocab_size=50,
        embedding_size=8,
        **TINY_HOSTS["drcn"],
    )
    assert SiameseMatcherForSequenceClassification(config).training_stats() == {}


def _cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a @ b) / (a.norm() * b.norm())


def test_bimpm_matching_recomputed_from_perspective_weights():
    """Each of the 8 l matching features of every valid token, from W (8, l, H) and the context states, one scalar at
    a time: m_k = cos(W_k * v1, W_k * v2) against the last state (full), the max over tokens (max-pooling), the
    cosine-weighted mean (attentive) and the most similar token (max-attentive), forward and backward."""
    torch.manual_seed(0)
    hidden, perspectives = 6, 3
    matching = MultiPerspectiveMatching(hidden, perspectives)
    torch.nn.init.uniform_(matching.weight, 0.1, 1.0)
    h, _ = _features(batch=2, length=5, dim=2 * hidden, seed=1)
    other, other_mask = _features(batch=2, length=4, dim=2 * hidden, seed=2)
    lengths = other_mask.sum(1)
    with torch.no_grad():
        out = matching(h, other, other_mask, lengths)
    assert out.shape == (2, 5, 8 * perspectives)
    weight = matching.weight
    for row in range(2):
        q = other[row, : int(lengths[row])]
        for i in range(5):
            expected = []
            for direction in range(2):
                part = slice(direction * hidden, (direction + 1) * hidden)
                v, states = h[row, i, part], q[:, part]
                final = states[-1] if direction == 0 else states[0]
                alphas = torch.stack([_cos(v, s) for s in states])
                mean = (alphas[:, None] * states).sum(0) / alphas.sum()
                chosen = states[int(alphas.argmax())]
                for strategy in range(4):
                    w = weight[2 * strategy + direction]
                    for k in range(perspectives):
                        if strategy == 0:
                            value = _cos(w[k] * v, w[k] * final)
                        elif strategy == 1:
                            value = max(_cos(w[k] * v, w[k] * s) for s in states)
                        else:
                            target = mean if strategy == 2 else chosen
                            value = _cos(w[k] * v, w[k] * target)
                        expected.append(value)
            torch.testing.assert_close(out[row, i], torch.stack(expected), atol=1e-5, rtol=1e-5)


def test_cafe_factorization_machine_and_augmented_features_recomputed():
    """FM(x) = w0 + <w, x> + sum_{i<j} <v_i, v_j> x_i x_j with the explicit double sum; CAFE's augmented word
    features are [a; FM([a; a~]); FM(a - a~); FM(a * a~); the same three for the intra-attention alignment]."""
    torch.manual_seed(0)
    fm = FactorizationMachine(5, 3)
    x = torch.randn(4, 5)
    w0, w, v = fm.linear.bias, fm.linear.weight[0], fm.factors.weight  # v: (k, n), column i is v_i
    with torch.no_grad():
        out = fm(x)
        for r in range(4):
            pairwise = sum(v[:, i] @ v[:, j] * x[r, i] * x[r, j] for i in range(5) for j in range(i + 1, 5))
            torch.testing.assert_close(out[r], w0[0] + w @ x[r] + pairwise, atol=1e-5, rtol=1e-5)

    model = create_model("siamese-matcher", backbone="tiny-bert", **TINY_HOSTS["cafe"]).eval()
    cafe = model.matcher
    a, mask = _features(batch=2, length=5, dim=64, seed=3)
    aligned = torch.randn(2, 5, 64)
    with torch.no_grad():
        out = cafe.augment(a, mask, aligned)
    assert out.shape == (2, 5, model.config.feature_attention_width())
    with torch.no_grad():
        for row in range(2):
            n = int(mask[row].sum())
            x, x_aligned = a[row, :n], aligned[row, :n]
            g = cafe.intra_projection(x)
            intra = torch.softmax(g @ g.T, -1) @ x
            expected = [x]
            for factorization, other in ((cafe.inter_factorization, x_aligned), (cafe.intra_factorization, intra)):
                expected += [
                    factorization.concat(torch.cat([x, other], -1))[:, None],
                    factorization.difference(x - other)[:, None],
                    factorization.product(x * other)[:, None],
                ]
            torch.testing.assert_close(out[row, :n], torch.cat(expected, -1), atol=1e-5, rtol=1e-5)


def test_diin_self_attention_fuse_gate_and_interaction_tensor_recomputed():
    """A_ij = w^T [p_i; p_j; p_i * p_j] + b; p~ = sum_j softmax_j(A_ij) p_j over valid j; out = r * p + f * z with
    z = tanh(W1 [p; p~]), r = sigmoid(W2 [p; p~]), f = sigmoid(W3 [p; p~]); I_ij = p_i * h_j, zero on padding."""
    torch.manual_seed(0)
    config = SiameseMatcherConfig(embedding_size=12, vocab_size=50, **TINY_HOSTS["diin"])
    encoder = DiinEncoder(config).eval()
    x, mask = _features(batch=2, length=5, dim=12, seed=4)
    w, b = encoder.attention.weight[0], encoder.attention.bias[0]
    with torch.no_grad():
        out = encoder(x, mask)
        for row in range(2):
            n = int(mask[row].sum())
            p = encoder.highway(x[row, :n])
            scores = torch.stack(
                [torch.stack([w @ torch.cat([p[i], p[j], p[i] * p[j]]) + b for j in range(n)]) for i in range(n)]
            )
            joint = torch.cat([p, torch.softmax(scores, -1) @ p], -1)
            z, r, f = (
                torch.tanh(encoder.fuse_z(joint)),
                torch.sigmoid(encoder.fuse_r(joint)),
                torch.sigmoid(encoder.fuse_f(joint)),
            )
            torch.testing.assert_close(out[row, :n], r * p + f * z, atol=1e-5, rtol=1e-5)
    h, mask2 = _features(batch=2, length=4, dim=64, seed=5)
    p, mask1 = _features(batch=2, length=5, dim=64, seed=6)
    grid = DiinMatcher.interaction(p, mask1, h, mask2)
    assert grid.shape == (2, 64, 5, 4)
    for row in range(2):
        for i in range(5):
            for j in range(4):
                valid = bool(mask1[row, i]) and bool(mask2[row, j])
                expected = p[row, i] * h[row, j] if valid else torch.zeros(64)
                torch.testing.assert_close(grid[row, :, i, j], expected, rtol=0, atol=0)


def test_diin_dense_extractor_ignores_padding_cells_at_odd_sizes():
    """The DenseNet output of a 5 x 3 map is the same alone and inside a padded 8 x 7 batch with large garbage in the
    padding cells (odd sizes exercise the masked 2 x 2 pooling); channels follow eta, growth and theta."""
    torch.manual_seed(0)
    config = SiameseMatcherConfig(embedding_size=12, vocab_size=50, **TINY_HOSTS["diin"])
    extractor = DenseFeatureExtractor(64, config).eval()
    # 64 * 0.3 -> 19; + 2 * 8 = 35 -> 17; + 16 = 33 -> 16
    assert extractor.out_channels == 16
    alone = torch.randn(1, 64, 5, 3)
    padded = torch.randn(2, 64, 8, 7) * 100
    padded[0, :, :5, :3] = alone[0]
    with torch.no_grad():
        expected = extractor(alone, torch.tensor([5]), torch.tensor([3]))
        out = extractor(padded, torch.tensor([5, 8]), torch.tensor([3, 7]))
    torch.testing.assert_close(out[0], expected[0], atol=1e-5, rtol=1e-5)


def test_drcn_dense_co_attentive_connection_recomputed():
    """x_next = [h; a; x], h = BiLSTM(x) on the unpadded sentence, a_i = sum_j softmax_j(cos(h_i, h'_j)) h'_j."""
    torch.manual_seed(0)
    layer = DrcnLayer(10, 6, 0.5).eval()
    x1, mask1 = _features(batch=2, length=5, dim=10, seed=7)
    x2, mask2 = _features(batch=2, length=4, dim=10, seed=8)
    with torch.no_grad():
        out1, out2 = layer(x1, mask1, x2, mask2)
    assert out1.shape == (2, 5, 10 + 4 * 6) and out2.shape == (2, 4, 10 + 4 * 6)
    with torch.no_grad():
        for row in range(2):
            n1, n2 = int(mask1[row].sum()), int(mask2[row].sum())
            h1, h2 = layer.rnn(x1[row : row + 1, :n1])[0][0], layer.rnn(x2[row : row + 1, :n2])[0][0]
            cos = torch.stack([torch.stack([_cos(u, v) for v in h2]) for u in h1])
            a1, a2 = torch.softmax(cos, 1) @ h2, torch.softmax(cos, 0).T @ h1
            torch.testing.assert_close(out1[row, :n1], torch.cat([h1, a1, x1[row, :n1]], -1), atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(out2[row, :n2], torch.cat([h2, a2, x2[row, :n2]], -1), atol=1e-5, rtol=1e-5)


def test_drcn_autoencoders_and_reconstruction_loss():
    """Autoencoders follow layers 2 and 4 of 5, compress to 2 H and feed FA there; the training loss is the task loss
    plus `drcn_reconstruction_weight` times the mean reconstruction error of both branches at both bottlenecks."""
    tokenizer = load_tokenizer("tiny-bert")
    batch = encode_tri_inputs(tokenizer, [r["sentence1"] for r in ROWS], [r["sentence2"] for r in ROWS])
    labels = torch.tensor([0, 1, 2])
    losses = {}
    for weight in (0.0, 2.5):
        set_seed(0)
        model = create_model(
            "siamese-matcher",
            backbone="tiny-bert",
            num_labels=3,
            feature_attention="fa",
            drcn_reconstruction_weight=weight,
            **TINY_HOSTS["drcn"],
        ).eval()
        assert sorted(model.matcher.autoencoders) == ["2", "4"]
        widths = [ae.encoder.out_features for ae in model.matcher.autoencoders.values()]
        assert widths == [2 * 32, 2 * 32]
        with torch.no_grad():
            losses[weight] = model(**batch, labels=labels).loss
    e1, e2 = model.embeddings(batch["input_ids"]), model.embeddings(batch["input_ids_2"])
    mask1, mask2 = batch["attention_mask"], batch["attention_mask_2"]
    with torch.no_grad():
        logits, reconstruction = model.matcher(e1, mask1, e2, mask2)
        # by hand: run the layers, collecting (decoder(relu(encoder(x))) - x)^2 averaged over valid tokens
        x1, x2, errors = e1, e2, []
        for index, layer in enumerate(model.matcher.layers, 1):
            x1, x2 = layer(x1, mask1, x2, mask2)
            if index in (2, 4):
                ae = model.matcher.autoencoders[str(index)]
                codes = []
                for x, mask in ((x1, mask1), (x2, mask2)):
                    code = torch.relu(ae.encoder(x))
                    valid = mask.bool()
                    errors.append((ae.decoder(code) - x).pow(2).mean(-1)[valid].mean())
                    codes.append(code)
                x1, x2 = model.matcher.feature_attention[str(index)](codes[0], mask1, codes[1], mask2)
    torch.testing.assert_close(reconstruction, torch.stack(errors).mean())
    task = torch.nn.functional.cross_entropy(logits, labels)
    torch.testing.assert_close(losses[0.0], task)
    torch.testing.assert_close(losses[2.5], task + 2.5 * reconstruction)


def test_recurrent_weights_are_orthogonal_and_construction_keeps_the_thread_count():
    """Every LSTM/GRU `weight_hh` is orthogonal (orthonormal columns). Its QR runs on one thread, far faster than on
    two when the other core is busy; the caller's thread count is restored."""
    torch.set_num_threads(2)  # the autouse `_one_thread` fixture restores the count afterwards
    model = create_model("siamese-matcher", backbone="tiny-bert", **TINY_HOSTS["drcn"], feature_attention="sfa")
    assert torch.get_num_threads() == 2
    recurrent = [p for n, p in model.named_parameters() if ".weight_hh" in n]
    assert recurrent
    for weight in recurrent:
        columns = weight if weight.shape[0] >= weight.shape[1] else weight.T
        torch.testing.assert_close(columns.T @ columns, torch.eye(columns.shape[1]), atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["lstm", "bilstm", "bigru"])
def test_rnns_under_graph_capture_read_each_sentence_as_packing_does(kind, monkeypatch):
    """Under graph capture (`torch.export`, `torch.compile`) the RNNs run without packing; each row's outputs equal
    the packed run's (the backward direction starts at the row's last token, not in its padding), padding zero."""
    torch.manual_seed(0)
    rnn_class = torch.nn.GRU if kind == "bigru" else torch.nn.LSTM
    rnn = rnn_class(5, 4, batch_first=True, bidirectional=kind != "lstm").double()
    x = torch.randn(3, 6, 5, dtype=torch.float64)
    lengths = torch.tensor([6, 2, 4])
    x[torch.arange(6)[None] >= lengths[:, None]] = 7.0  # padding content must not matter
    packed = siamese_blocks.run_rnn(rnn, x, lengths)
    monkeypatch.setattr(siamese_blocks, "capturing_graph", lambda: True)
    captured = siamese_blocks.run_rnn(rnn, x, lengths)
    torch.testing.assert_close(captured, packed, atol=1e-12, rtol=0)
    assert captured[1, 2:].abs().max() == 0
