"""Lightweight Siamese text matchers with plug-in feature-attention blocks.

FA and SFA follow Zang, Liu: "Modeling Selective Feature Attention for Representation-based Siamese Text Matching"
(sections 2.2 and 3.2); the host networks are ESIM (Chen et al. 2017, "Enhanced LSTM for Natural Language Inference")
and RE2 (Yang et al. 2019, "Simple and Effective Text Matching with Richer Alignment Features"). The blocks map
(B, L, D) features and a (B, L) mask to (B, L) features of the same shape, so any Siamese matcher with word-level
interaction (BiMPM, CAFE, DIIN, DRCN) can take them. They sit after the interaction attention on both branches, with
unshared parameters (the paper's Fig. 1). The reference code (hggzjx/SFA) builds its blocks inside `forward` and never
calls SFA; this implementation follows the paper's equations instead.

There is no transformer encoder: word embeddings are initialised from MiniLM's input embedding matrix (GloVe, which
the hosts' papers use, is not available offline) and each sentence is tokenised alone (`input_format = "tri"`).
"""

import math
from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoModel
from transformers import initialization as init
from transformers.utils import ModelOutput

from ..configuration.configuration_siamese_matcher import SiameseMatcherConfig
from .common import PairzooPreTrainedModel, similarity_loss_and_scores


def check_token_mask(mask: torch.Tensor, name: str = "attention_mask") -> torch.Tensor:
    """Validate a right-padded (B, L) 0/1 mask with at least one token per row; returns the lengths (B,).

    An empty sentence has no token to attend to or pool over, so it is an error rather than a silent NaN.
    """
    if mask.dim() != 2:
        raise ValueError(f"`{name}` must be (batch, length), got shape {tuple(mask.shape)}.")
    lengths = mask.long().sum(1)
    empty = (lengths == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"`{name}` rows {empty} have no tokens: every sentence must be non-empty.")
    positions = torch.arange(mask.shape[1], device=mask.device)
    if not torch.equal(mask.bool(), positions[None] < lengths[:, None]):
        raise ValueError(f"`{name}` must be right-padded (ones, then zeros) in every row.")
    return lengths


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, L, D), (B, L) -> (B, D): mean over valid tokens only."""
    weights = mask.unsqueeze(-1).to(x.dtype)
    return (x * weights).sum(1) / weights.sum(1).clamp_min(1.0)


def masked_max(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, L, D), (B, L) -> (B, D): maximum over valid tokens only."""
    return x.masked_fill(~mask.bool().unsqueeze(-1), torch.finfo(x.dtype).min).amax(1)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Softmax of `scores` along `dim` where `mask` (broadcastable) is True; masked entries get exactly zero."""
    return scores.masked_fill(~mask, torch.finfo(scores.dtype).min).softmax(dim)


def run_rnn(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Run a batch-first (bi)directional RNN on right-padded `x` (B, L, d_in) over each row's own length.

    Packing makes the backward direction start at each sentence's last token, so outputs do not depend on how much
    padding the batch has; padding positions come out as zeros.
    """
    if bool((lengths == x.shape[1]).all()):  # no padding (always so at batch size 1): packing would change nothing
        return rnn(x)[0]
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    output, _ = rnn(packed)
    return nn.utils.rnn.pad_packed_sequence(output, batch_first=True, total_length=x.shape[1])[0]


class FeatureAttention(nn.Module):
    """FA (paper section 2.2): per-feature gates from a squeeze over the sequence.

    s = mean over valid tokens of x            (B, D)
    e = sigmoid(W2 tanh(W1 s))                 (B, D), W1: D -> D // r, W2: D // r -> D
    u = e * x                                  (B, L, D), the gate broadcast over tokens
    """

    def __init__(self, dim: int, reduction: int) -> None:
        super().__init__()
        self.squeeze = nn.Linear(dim, dim // reduction, bias=False)
        self.excite = nn.Linear(dim // reduction, dim, bias=False)

    def gate(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, L, D), (B, L) -> the feature gate e (B, D)."""
        return torch.sigmoid(self.excite(torch.tanh(self.squeeze(masked_mean(x, mask)))))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, L, D), (B, L) -> (B, L, D); padding positions are zero."""
        check_token_mask(mask)
        return x * self.gate(x, mask).unsqueeze(1) * mask.unsqueeze(-1).to(x.dtype)


class SelectiveFeatureAttention(nn.Module):
    """SFA (paper section 3.2): soft selection among N stacked BiGRU views of the features, per feature.

    y       = Conv1x1(x)                                   (B, L, D // r1)
    x^(n)   = BiGRU_n(x^(n-1)), x^(0) = y                  (B, L, 2 D // r1), n = 1..N   (eq. 4)
    s       = avg_valid(sum_n x^(n)) + max_valid(sum_n x^(n))   (B, 2 D // r1)            (eq. 6)
    z       = tanh(W_z s)                                  (B, 2 D // (r1 r2))
    a_n     = sigmoid(W_n z)                               (B, 2 D // r1)                (eq. 7)
    w       = softmax over n of a_n                        (B, N, 2 D // r1)             (eq. 8)
    output  = Conv1x1(sum_n w_n * x^(n))                   (B, L, D)
    """

    def __init__(self, dim: int, branches: int, reductions: "tuple[int, int] | list[int]") -> None:
        super().__init__()
        r1, r2 = reductions
        reduced = dim // r1
        width = 2 * reduced
        self.reduce = nn.Conv1d(dim, reduced, kernel_size=1)
        self.branches = nn.ModuleList(
            nn.GRU(reduced if n == 0 else width, reduced, batch_first=True, bidirectional=True)
            for n in range(branches)
        )
        self.squeeze = nn.Linear(width, width // r2, bias=False)
        self.select = nn.ModuleList(nn.Linear(width // r2, width, bias=False) for _ in range(branches))
        self.expand = nn.Conv1d(width, dim, kernel_size=1)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, return_weights: bool = False
    ) -> "torch.Tensor | tuple[torch.Tensor, torch.Tensor]":
        """(B, L, D), (B, L) -> (B, L, D) with zero padding positions; with `return_weights`, also the branch weights
        w (B, N, 2 D // r1), which sum to 1 over the N branches for every feature."""
        lengths = check_token_mask(mask)
        keep = mask.unsqueeze(-1).to(x.dtype)
        hidden = self.reduce((x * keep).transpose(1, 2)).transpose(1, 2)
        views = []
        for gru in self.branches:
            hidden = run_rnn(gru, hidden, lengths)
            views.append(hidden)
        stacked = torch.stack(views, 1)  # (B, N, L, 2 D // r1)
        fused = stacked.sum(1)
        z = torch.tanh(self.squeeze(masked_mean(fused, mask) + masked_max(fused, mask)))
        weights = torch.stack([torch.sigmoid(fc(z)) for fc in self.select], 1).softmax(1)
        selected = (weights.unsqueeze(2) * stacked).sum(1)
        output = self.expand(selected.transpose(1, 2)).transpose(1, 2) * keep
        return (output, weights) if return_weights else output


def build_feature_attention(config: SiameseMatcherConfig) -> "nn.Module | None":
    """The block `config.feature_attention` names, on `config.hidden_size` features (None for `none`)."""
    if config.feature_attention == "fa":
        return FeatureAttention(config.hidden_size, config.fa_reduction)
    if config.feature_attention == "sfa":
        return SelectiveFeatureAttention(config.hidden_size, config.sfa_branches, config.sfa_reductions)
    return None


class FeatureAttentionPair(nn.Module):
    """One block per branch (same form, unshared parameters); the identity when the config asks for none."""

    def __init__(self, config: SiameseMatcherConfig) -> None:
        super().__init__()
        self.first = build_feature_attention(config)
        self.second = build_feature_attention(config)

    def forward(
        self, x1: torch.Tensor, mask1: torch.Tensor, x2: torch.Tensor, mask2: torch.Tensor
    ) -> "tuple[torch.Tensor, torch.Tensor]":
        if self.first is None:
            return x1, x2
        return self.first(x1, mask1), self.second(x2, mask2)


def cross_align(
    a: torch.Tensor, b: torch.Tensor, mask_a: torch.Tensor, mask_b: torch.Tensor, scores: torch.Tensor
) -> "tuple[torch.Tensor, torch.Tensor]":
    """Soft alignment of two sentences from their (B, La, Lb) interaction scores: each token of `a` attends over the
    valid tokens of `b` and vice versa. Returns the aligned (B, La, d_b) and (B, Lb, d_a) features."""
    pair_mask = mask_a.bool().unsqueeze(2) & mask_b.bool().unsqueeze(1)
    aligned_a = masked_softmax(scores, pair_mask, dim=2) @ b
    aligned_b = masked_softmax(scores, pair_mask, dim=1).transpose(1, 2) @ a
    return aligned_a, aligned_b


class EsimMatcher(nn.Module):
    """ESIM: BiLSTM input encoding, dot-product soft alignment, enhancement [a; a~; a - a~; a * a~] projected to H
    (ReLU), feature attention, BiLSTM composition, masked average and max pooling, tanh MLP."""

    def __init__(self, config: SiameseMatcherConfig) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = nn.LSTM(config.embedding_size, hidden, batch_first=True, bidirectional=True)
        self.projection = nn.Sequential(nn.Linear(8 * hidden, hidden), nn.ReLU())
        self.feature_attention = FeatureAttentionPair(config)
        self.composition = nn.LSTM(hidden, hidden, batch_first=True, bidirectional=True)
        self.classifier = nn.Sequential(
            nn.Dropout(config.dropout),
            nn.Linear(8 * hidden, hidden),
            nn.Tanh(),
            nn.Dropout(config.dropout),
            nn.Linear(hidden, config.num_labels),
        )

    def forward(self, e1: torch.Tensor, mask1: torch.Tensor, e2: torch.Tensor, mask2: torch.Tensor) -> torch.Tensor:
        """Embedded sentences (B, L1, E), (B, L2, E) and masks -> class scores (B, num_labels)."""
        len1, len2 = mask1.sum(1), mask2.sum(1)
        a = run_rnn(self.encoder, self.dropout(e1), len1)
        b = run_rnn(self.encoder, self.dropout(e2), len2)
        aligned_a, aligned_b = cross_align(a, b, mask1, mask2, a @ b.transpose(1, 2))
        m_a = self.projection(self.dropout(torch.cat([a, aligned_a, a - aligned_a, a * aligned_a], -1)))
        m_b = self.projection(self.dropout(torch.cat([b, aligned_b, b - aligned_b, b * aligned_b], -1)))
        m_a, m_b = self.feature_attention(m_a, mask1, m_b, mask2)
        v_a = run_rnn(self.composition, self.dropout(m_a), len1)
        v_b = run_rnn(self.composition, self.dropout(m_b), len2)
        pooled = [masked_mean(v_a, mask1), masked_max(v_a, mask1), masked_mean(v_b, mask2), masked_max(v_b, mask2)]
        return self.classifier(torch.cat(pooled, -1))


class Re2Encoder(nn.Module):
    """Stacked same-length convolutions with GeLU; padding is zeroed before every convolution so that it never
    leaks into valid tokens at the sentence boundary."""

    def __init__(self, in_dim: int, config: SiameseMatcherConfig) -> None:
        super().__init__()
        self.dropout = nn.Dropout(config.dropout)
        size = config.re2_kernel_size
        self.convs = nn.ModuleList(
            nn.Conv1d(in_dim if i == 0 else config.hidden_size, config.hidden_size, size, padding=size // 2)
            for i in range(config.re2_encoder_layers)
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        keep = mask.unsqueeze(-1).to(x.dtype)
        for i, conv in enumerate(self.convs):
            x = x * keep
            if i > 0:
                x = self.dropout(x)
            x = nn.functional.gelu(conv(x.transpose(1, 2)).transpose(1, 2))
        return x * keep


class Re2Block(nn.Module):
    """One RE2 block: encoder, alignment (shared one-layer projection, scores scaled by 1/sqrt(H)), full fusion
    G([G1([a; a']); G2([a; a - a']); G3([a; a * a'])]) and the feature-attention pair on the fusion output."""

    def __init__(self, in_dim: int, config: SiameseMatcherConfig) -> None:
        super().__init__()
        hidden = config.hidden_size
        width = in_dim + hidden
        self.encoder = Re2Encoder(in_dim, config)
        self.align_projection = nn.Sequential(nn.Dropout(config.dropout), nn.Linear(width, hidden), nn.GELU())
        self.fuse_aligned = nn.Sequential(nn.Linear(2 * width, hidden), nn.GELU())
        self.fuse_difference = nn.Sequential(nn.Linear(2 * width, hidden), nn.GELU())
        self.fuse_product = nn.Sequential(nn.Linear(2 * width, hidden), nn.GELU())
        self.fuse = nn.Sequential(nn.Dropout(config.dropout), nn.Linear(3 * hidden, hidden), nn.GELU())
        self.feature_attention = FeatureAttentionPair(config)
        self.scale = 1.0 / math.sqrt(hidden)

    def fusion(self, x: torch.Tensor, aligned: torch.Tensor) -> torch.Tensor:
        parts = [
            self.fuse_aligned(torch.cat([x, aligned], -1)),
            self.fuse_difference(torch.cat([x, x - aligned], -1)),
            self.fuse_product(torch.cat([x, x * aligned], -1)),
        ]
        return self.fuse(torch.cat(parts, -1))

    def forward(
        self, x1: torch.Tensor, mask1: torch.Tensor, x2: torch.Tensor, mask2: torch.Tensor
    ) -> "tuple[torch.Tensor, torch.Tensor]":
        a = torch.cat([x1, self.encoder(x1, mask1)], -1)
        b = torch.cat([x2, self.encoder(x2, mask2)], -1)
        scores = self.align_projection(a) @ self.align_projection(b).transpose(1, 2) * self.scale
        aligned_a, aligned_b = cross_align(a, b, mask1, mask2, scores)
        return self.feature_attention(self.fusion(a, aligned_a), mask1, self.fusion(b, aligned_b), mask2)


class Re2Matcher(nn.Module):
    """RE2: blocks joined by augmented residual connections (block k > 1 reads [(o_{k-1} + o_{k-2}) / sqrt(2);
    embeddings], block 2 reads [o_1; embeddings]), masked max pooling, prediction on [v1; v2; v1 - v2; v1 * v2]."""

    def __init__(self, config: SiameseMatcherConfig) -> None:
        super().__init__()
        hidden, embed = config.hidden_size, config.embedding_size
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            Re2Block(embed if k == 0 else hidden + embed, config) for k in range(config.re2_blocks)
        )
        self.classifier = nn.Sequential(
            nn.Dropout(config.dropout),
            nn.Linear(4 * hidden, hidden),
            nn.GELU(),
            nn.Dropout(config.dropout),
            nn.Linear(hidden, config.num_labels),
        )

    def forward(self, e1: torch.Tensor, mask1: torch.Tensor, e2: torch.Tensor, mask2: torch.Tensor) -> torch.Tensor:
        """Embedded sentences (B, L1, E), (B, L2, E) and masks -> class scores (B, num_labels)."""
        e1, e2 = self.dropout(e1), self.dropout(e2)
        x1, x2 = e1, e2
        previous1 = previous2 = None
        for block in self.blocks:
            o1, o2 = block(x1, mask1, x2, mask2)
            if previous1 is not None:
                o1, o2 = (o1 + previous1) * math.sqrt(0.5), (o2 + previous2) * math.sqrt(0.5)
            previous1, previous2 = o1, o2
            x1, x2 = torch.cat([o1, e1], -1), torch.cat([o2, e2], -1)
        v1, v2 = masked_max(previous1, mask1), masked_max(previous2, mask2)
        return self.classifier(torch.cat([v1, v2, v1 - v2, v1 * v2], -1))


_MATCHERS = {"esim": EsimMatcher, "re2": Re2Matcher}


@dataclass
class SiameseMatcherOutput(ModelOutput):
    r"""
    Output of [`SiameseMatcherForSequenceClassification`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*, returned when `labels` is given):
            MSE on labels scaled to [0, 1] (regression) or cross-entropy (classification).
        logits (`torch.FloatTensor` of shape `(batch_size,)` or `(batch_size, num_labels)`):
            Regression: the prediction on the [0, 1] scale. Classification: unnormalised class scores.
        scores (`torch.FloatTensor` of shape `(batch_size,)`, *optional*, regression only):
            The prediction mapped back to the label scale, `label_min + (label_max - label_min) * logits`.
    """

    loss: "torch.FloatTensor | None" = None
    logits: "torch.FloatTensor | None" = None
    scores: "torch.FloatTensor | None" = None


class SiameseMatcherForSequenceClassification(PairzooPreTrainedModel):
    """A Siamese matcher (`config.matcher`) with optional FA/SFA, classifying (or regressing) a sentence pair given
    as two separately tokenised sentences."""

    config_class = SiameseMatcherConfig
    input_format = "tri"
    _supports_flash_attn = False
    _supports_flex_attn = False
    _supports_attention_backend = False
    supports_gradient_checkpointing = False

    def __init__(self, config: SiameseMatcherConfig) -> None:
        super().__init__(config)
        if config.vocab_size is None or config.embedding_size is None:
            raise ValueError(
                "`vocab_size` and `embedding_size` are required (or a `backbone_config` to take them from); use "
                "`create_model('siamese-matcher', backbone=...)`."
            )
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_size)
        self.matcher = _MATCHERS[config.matcher](config)
        self.post_init()
        self.embeddings.weight.requires_grad_(not config.freeze_embeddings)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Xavier-uniform linear and convolution weights with zero biases, orthogonal recurrent weights; embeddings
        as the base class does (then overwritten by `from_backbone`)."""
        if isinstance(module, (nn.Linear, nn.Conv1d)):
            init.xavier_uniform_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, (nn.LSTM, nn.GRU)):
            for name, param in module.named_parameters():
                if name.startswith("weight_ih"):
                    init.xavier_uniform_(param)
                elif name.startswith("weight_hh"):
                    init.orthogonal_(param)
                else:
                    init.zeros_(param)
        else:
            super()._init_weights(module)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings = value

    @classmethod
    def from_backbone(cls, name_or_path: str, **method_kwargs) -> "SiameseMatcherForSequenceClassification":
        """Build the matcher with word embeddings copied from a pretrained encoder's input embedding matrix (e.g.
        MiniLM's 30522 x 384 WordPiece embeddings); the rest of the encoder is not used."""
        pretrained = AutoModel.from_pretrained(name_or_path)
        matrix = pretrained.get_input_embeddings().weight
        config = cls.config_class(backbone_config=pretrained.config, **method_kwargs)
        if (config.vocab_size, config.embedding_size) != tuple(matrix.shape):
            raise ValueError(
                f"`vocab_size` x `embedding_size` = {config.vocab_size} x {config.embedding_size} does not match the "
                f"input embedding matrix of {name_or_path!r} ({tuple(matrix.shape)})."
            )
        model = cls(config)
        with torch.no_grad():
            model.embeddings.weight.copy_(matrix)
        model.config.backbone_config.name_or_path = str(name_or_path)
        return model

    def forward(
        self,
        input_ids: "torch.LongTensor | None" = None,
        attention_mask: "torch.LongTensor | None" = None,
        input_ids_2: "torch.LongTensor | None" = None,
        attention_mask_2: "torch.LongTensor | None" = None,
        labels: "torch.Tensor | None" = None,
        input_ids_3: "torch.LongTensor | None" = None,
        **kwargs,
    ) -> SiameseMatcherOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, length_1)`): the first sentence, tokenised alone
                (`encode_tri_inputs`), right-padded.
            attention_mask (`torch.LongTensor` of shape `(batch_size, length_1)`): 1 for tokens, 0 for padding.
            input_ids_2 (`torch.LongTensor` of shape `(batch_size, length_2)`): the second sentence.
            attention_mask_2 (`torch.LongTensor` of shape `(batch_size, length_2)`): its mask.
            labels (`torch.Tensor` of shape `(batch_size,)`, *optional*): similarity on the label scale (regression)
                or class indices (classification).
            input_ids_3: rejected: the matcher reads sentence pairs, not conditions.
        """
        if input_ids_3 is not None:
            raise ValueError("siamese-matcher compares two sentences; a condition (`input_ids_3`) is not supported.")
        if input_ids is None or input_ids_2 is None:
            raise ValueError("siamese-matcher needs both sentences: `input_ids` and `input_ids_2`.")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if attention_mask_2 is None:
            attention_mask_2 = torch.ones_like(input_ids_2)
        check_token_mask(attention_mask, "attention_mask")
        check_token_mask(attention_mask_2, "attention_mask_2")
        raw = self.matcher(self.embeddings(input_ids), attention_mask, self.embeddings(input_ids_2), attention_mask_2)
        loss, logits, scores = similarity_loss_and_scores(self.config, raw, labels)
        return SiameseMatcherOutput(loss=loss, logits=logits, scores=scores)


__all__ = [
    "FeatureAttention",
    "SelectiveFeatureAttention",
    "SiameseMatcherForSequenceClassification",
]
