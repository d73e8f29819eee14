"""Lightweight Siamese text matchers with plug-in feature-attention blocks.

FA and SFA follow Zang, Liu: "Modeling Selective Feature Attention for Representation-based Siamese Text Matching"
(sections 2.2 and 3.2). The host networks are the six of that paper: ESIM (Chen et al. 2017, "Enhanced LSTM for
Natural Language Inference"), RE2 (Yang et al. 2019, "Simple and Effective Text Matching with Richer Alignment
Features"), BiMPM (Wang et al. 2017, "Bilateral Multi-Perspective Matching for Natural Language Sentences"), CAFE (Tay
et al. 2018, "Compare, Compress and Propagate: Enhancing Neural Architectures with Alignment Factorization for Natural
Language Inference"), DIIN (Gong et al. 2018, "Natural Language Inference over Interaction Space") and DRCN (Kim et al.
2019, "Semantic Sentence Matching with Densely-connected Recurrent and Co-attentive Information"). The blocks map
(B, L, D) features and a (B, L) mask to (B, L, D) features of the same shape. They sit after each host's word-level
interaction stage on both branches, with unshared parameters (the paper's Fig. 1): on ESIM's projected enhancement,
on every RE2 block's fusion output, on BiMPM's matching vectors, on CAFE's factorization-augmented word features, on
DIIN's self-attended encodings (before the interaction tensor joins the branches) and on the output of each of DRCN's
two autoencoders. The reference code (hggzjx/SFA) builds its blocks inside `forward` and never calls SFA; this
implementation follows the paper's equations instead.

There is no transformer encoder: word embeddings are initialised from MiniLM's input embedding matrix (GloVe, which
the hosts' papers use, is not available offline), and the hosts' character, part-of-speech and exact-match input
features are left out; each sentence is tokenised alone (`input_format = "tri"`).
"""

import math
from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoModel
from transformers import initialization as init
from transformers.utils import ModelOutput

from ..configuration.configuration_siamese_matcher import SFA_SQUEEZES, SiameseMatcherConfig, reduced_width
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
    e = sigmoid(W2 tanh(W1 s))                 (B, D), W1: D -> D / r, W2: D / r -> D
    u = e * x                                  (B, L, D), the gate broadcast over tokens
    """

    def __init__(self, dim: int, reduction: float) -> None:
        super().__init__()
        reduced = reduced_width(dim, reduction, "fa_reduction")
        self.squeeze = nn.Linear(dim, reduced, bias=False)
        self.excite = nn.Linear(reduced, dim, bias=False)

    def gate(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, L, D), (B, L) -> the feature gate e (B, D)."""
        return torch.sigmoid(self.excite(torch.tanh(self.squeeze(masked_mean(x, mask)))))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, L, D), (B, L) -> (B, L, D); padding positions are zero."""
        check_token_mask(mask)
        return x * self.gate(x, mask).unsqueeze(1) * mask.unsqueeze(-1).to(x.dtype)


class SelectiveFeatureAttention(nn.Module):
    """SFA (paper section 3.2): soft selection among N stacked BiGRU views of the features, per feature.

    y       = Conv1x1(x)                                   (B, L, D / r1)
    x^(n)   = BiGRU_n(x^(n-1)), x^(0) = y                  (B, L, 2 D / r1), n = 1..N   (eq. 4)
    s       = mean_{n,l} x^(n)_l + max_{n,l} x^(n)_l       (B, 2 D / r1)                (eq. 6, `squeeze="paper"`)
    z       = tanh(W_z s)                                  (B, 2 D / (r1 r2))
    a_n     = sigmoid(W_n z)                               (B, 2 D / r1)                (eq. 7)
    w       = softmax over n of a_n                        (B, N, 2 D / r1)             (eq. 8)
    output  = Conv1x1(sum_n w_n * x^(n))                   (B, L, D)

    The squeeze pools over the branches and the valid tokens of the stacked (B, N, L, 2 D / r1) tensor together.
    `squeeze="branch_sum"` keeps the earlier reading s = mean_l sum_n x^(n)_l + max_l sum_n x^(n)_l (the branches
    summed first: N times the paper's average, and the maximum of the sum instead of the maximum over branches).
    """

    def __init__(
        self, dim: int, branches: int, reductions: "tuple[float, float] | list[float]", squeeze: str = "paper"
    ) -> None:
        super().__init__()
        if squeeze not in SFA_SQUEEZES:
            raise ValueError(f"`sfa_squeeze` must be one of {list(SFA_SQUEEZES)}, got {squeeze!r}.")
        r1, r2 = reductions
        reduced = reduced_width(dim, r1, "sfa_reductions[0] (r1)")
        width = 2 * reduced
        self.squeeze_mode = squeeze
        self.reduce = nn.Conv1d(dim, reduced, kernel_size=1)
        self.branches = nn.ModuleList(
            nn.GRU(reduced if n == 0 else width, reduced, batch_first=True, bidirectional=True)
            for n in range(branches)
        )
        self.squeeze = nn.Linear(width, reduced_width(width, r2, "sfa_reductions[1] (r2)"), bias=False)
        self.select = nn.ModuleList(nn.Linear(self.squeeze.out_features, width, bias=False) for _ in range(branches))
        self.expand = nn.Conv1d(width, dim, kernel_size=1)

    def pooled(self, stacked: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Eq. 6: the squeeze s (B, 2 D / r1) of the stacked branches (B, N, L, 2 D / r1) over valid tokens."""
        if self.squeeze_mode == "branch_sum":
            fused = stacked.sum(1)
            return masked_mean(fused, mask) + masked_max(fused, mask)
        flat, flat_mask = stacked.flatten(1, 2), mask.repeat(1, stacked.shape[1])  # (B, N L, .), branch-major
        return masked_mean(flat, flat_mask) + masked_max(flat, flat_mask)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor, return_weights: bool = False
    ) -> "torch.Tensor | tuple[torch.Tensor, torch.Tensor]":
        """(B, L, D), (B, L) -> (B, L, D) with zero padding positions; with `return_weights`, also the branch weights
        w (B, N, 2 D / r1), which sum to 1 over the N branches for every feature."""
        lengths = check_token_mask(mask)
        keep = mask.unsqueeze(-1).to(x.dtype)
        hidden = self.reduce((x * keep).transpose(1, 2)).transpose(1, 2)
        views = []
        for gru in self.branches:
            hidden = run_rnn(gru, hidden, lengths)
            views.append(hidden)
        stacked = torch.stack(views, 1)  # (B, N, L, 2 D / r1)
        z = torch.tanh(self.squeeze(self.pooled(stacked, mask)))
        weights = torch.stack([torch.sigmoid(fc(z)) for fc in self.select], 1).softmax(1)
        selected = (weights.unsqueeze(2) * stacked).sum(1)
        output = self.expand(selected.transpose(1, 2)).transpose(1, 2) * keep
        return (output, weights) if return_weights else output


def build_feature_attention(config: SiameseMatcherConfig) -> "nn.Module | None":
    """The block `config.feature_attention` names, on `config.feature_attention_width()` features (None for
    `none`)."""
    width = config.feature_attention_width()
    if config.feature_attention == "fa":
        return FeatureAttention(width, config.fa_reduction)
    if config.feature_attention == "sfa":
        return SelectiveFeatureAttention(width, config.sfa_branches, config.sfa_reductions, config.sfa_squeeze)
    return None


class FeatureAttentionPair(nn.Module):
    """One block per branch (same form, unshared parameters); the identity when the config asks for none. With
    `feature_attention_residual=True` each branch gets x + block(x), with `"gated"` x + g_i block(x) where `gate`
    (2,) holds g_1, g_2 (zero at initialisation; learnable unless `feature_attention_gate_trainable=False`); skip
    connections the paper does not have (padding positions then carry x, as with no block)."""

    def __init__(self, config: SiameseMatcherConfig) -> None:
        super().__init__()
        self.first = build_feature_attention(config)
        self.second = build_feature_attention(config)
        self.residual = config.feature_attention_residual
        gated = self.first is not None and self.residual == "gated"
        trainable = config.feature_attention_gate_trainable
        self.gate = nn.Parameter(torch.zeros(2), requires_grad=trainable) if gated else None
        # running sum (2,) and count of the training forwards' ||g_i block_i(x_i)|| / ||x_i|| (bounded memory)
        self._contribution: tuple[torch.Tensor, int] | None = None

    def forward(
        self, x1: torch.Tensor, mask1: torch.Tensor, x2: torch.Tensor, mask2: torch.Tensor
    ) -> "tuple[torch.Tensor, torch.Tensor]":
        if self.first is None:
            return x1, x2
        u1, u2 = self.first(x1, mask1), self.second(x2, mask2)
        if self.gate is not None:
            added = (self.gate[0] * u1, self.gate[1] * u2)
            if self.training:
                with torch.no_grad():
                    ratios = [_mean_norm(a, m) / _mean_norm(x, m) for a, x, m in zip(added, (x1, x2), (mask1, mask2))]
                    total, count = self._contribution or (0, 0)
                    self._contribution = (total + torch.stack(ratios), count + 1)
            return x1 + added[0], x2 + added[1]
        return (x1 + u1, x2 + u2) if self.residual else (u1, u2)

    def pop_contribution(self) -> "list[float] | None":
        """Mean ||g_i block_i(x_i)|| / ||x_i|| (token vectors, padding left out) of each branch over the training
        forwards since the last call, then forgets them; None when there were none."""
        if self._contribution is None:
            return None
        total, count = self._contribution
        self._contribution = None
        return (total / count).tolist()


def _mean_norm(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean L2 norm of the valid (mask 1) token vectors of x (B, L, D)."""
    return x.detach().float().norm(dim=-1)[mask.bool()].mean()


# ---------------------------------------------------------------------------------------------------------------
# Pieces shared by the host networks.


def pair_mask(mask_a: torch.Tensor, mask_b: torch.Tensor) -> torch.Tensor:
    """(B, La), (B, Lb) -> (B, La, Lb) boolean: True where both tokens are valid."""
    return mask_a.bool().unsqueeze(2) & mask_b.bool().unsqueeze(1)


def cross_align(
    a: torch.Tensor, b: torch.Tensor, mask_a: torch.Tensor, mask_b: torch.Tensor, scores: torch.Tensor
) -> "tuple[torch.Tensor, torch.Tensor]":
    """Soft alignment of two sentences from their (B, La, Lb) interaction scores: each token of `a` attends over the
    valid tokens of `b` and vice versa. Returns the aligned (B, La, d_b) and (B, Lb, d_a) features."""
    valid = pair_mask(mask_a, mask_b)
    aligned_a = masked_softmax(scores, valid, dim=2) @ b
    aligned_b = masked_softmax(scores, valid, dim=1).transpose(1, 2) @ a
    return aligned_a, aligned_b


def self_align(x: torch.Tensor, mask: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """Intra-sentence soft alignment: token i of `x` (B, L, d) attends over the valid tokens j of its own sentence
    with softmax_j of the (B, L, L) `scores`. Returns (B, L, d)."""
    return masked_softmax(scores, mask.bool().unsqueeze(1), dim=2) @ x


def cosine_scores(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(B, La, d), (B, Lb, d) -> (B, La, Lb) cosine similarities (zero for a zero vector)."""
    a = a / a.norm(dim=-1, keepdim=True).clamp_min(eps)
    b = b / b.norm(dim=-1, keepdim=True).clamp_min(eps)
    return a @ b.transpose(1, 2)


def compare_features(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The heuristic comparison [a; b; a - b; a * b] along the last axis (4x the width)."""
    return torch.cat([a, b, a - b, a * b], -1)


def mean_max_pool(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, L, D), (B, L) -> (B, 2D): [mean; max] over valid tokens."""
    return torch.cat([masked_mean(x, mask), masked_max(x, mask)], -1)


def bidirectional_ends(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B, L, 2H) BiRNN outputs -> (B, 2H): the forward state at each row's last valid token and the backward state at
    the first token, i.e. each direction's final state."""
    half = x.shape[-1] // 2
    last = x[torch.arange(x.shape[0], device=x.device), lengths - 1, :half]
    return torch.cat([last, x[:, 0, half:]], -1)


def prediction_mlp(in_dim: int, hidden: int, num_labels: int, activation: nn.Module, dropout: float) -> nn.Sequential:
    """The two-layer prediction network: dropout, linear, activation, dropout, linear to the class scores."""
    return nn.Sequential(
        nn.Dropout(dropout), nn.Linear(in_dim, hidden), activation, nn.Dropout(dropout), nn.Linear(hidden, num_labels)
    )


class Highway(nn.Module):
    """One highway layer (Srivastava et al. 2015): y = t * relu(W_h x) + (1 - t) * x with the gate
    t = sigmoid(W_t x)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.transform = nn.Linear(dim, dim)
        self.gate = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(self.gate(x))
        return gate * torch.relu(self.transform(x)) + (1 - gate) * x


class HighwayEncoder(nn.Module):
    """A linear projection to `dim` (the papers' highway networks keep the input width; here word embeddings and
    hidden layers differ in width) followed by `layers` highway layers, applied to every position alike."""

    def __init__(self, in_dim: int, dim: int, layers: int) -> None:
        super().__init__()
        self.projection = nn.Linear(in_dim, dim)
        self.layers = nn.Sequential(*(Highway(dim) for _ in range(layers)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(self.projection(x))


# A host maps embedded sentences (B, L1, E), (B, L2, E) and their masks to class scores (B, num_labels) and an
# auxiliary loss to add to the task loss (DRCN's autoencoder reconstruction; None for the others).
MatcherOutput = tuple[torch.Tensor, "torch.Tensor | None"]


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
        self.classifier = prediction_mlp(8 * hidden, hidden, config.num_labels, nn.Tanh(), config.dropout)

    def forward(self, e1: torch.Tensor, mask1: torch.Tensor, e2: torch.Tensor, mask2: torch.Tensor) -> MatcherOutput:
        len1, len2 = mask1.sum(1), mask2.sum(1)
        a = run_rnn(self.encoder, self.dropout(e1), len1)
        b = run_rnn(self.encoder, self.dropout(e2), len2)
        aligned_a, aligned_b = cross_align(a, b, mask1, mask2, a @ b.transpose(1, 2))
        m_a = self.projection(self.dropout(compare_features(a, aligned_a)))
        m_b = self.projection(self.dropout(compare_features(b, aligned_b)))
        m_a, m_b = self.feature_attention(m_a, mask1, m_b, mask2)
        v_a = run_rnn(self.composition, self.dropout(m_a), len1)
        v_b = run_rnn(self.composition, self.dropout(m_b), len2)
        return self.classifier(torch.cat([mean_max_pool(v_a, mask1), mean_max_pool(v_b, mask2)], -1)), None


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
        self.classifier = prediction_mlp(4 * hidden, hidden, config.num_labels, nn.GELU(), config.dropout)

    def forward(self, e1: torch.Tensor, mask1: torch.Tensor, e2: torch.Tensor, mask2: torch.Tensor) -> MatcherOutput:
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
        return self.classifier(compare_features(v1, v2)), None


def multi_perspective_cosine(
    v1: torch.Tensor, v2: torch.Tensor, weight: torch.Tensor, eps: float = 1e-8
) -> torch.Tensor:
    """BiMPM's f_m: m_k = cos(W_k * v1, W_k * v2) for each perspective k. (..., d), (..., d), (l, d) -> (..., l)."""
    a, b = v1.unsqueeze(-2) * weight, v2.unsqueeze(-2) * weight
    return (a * b).sum(-1) / (a.norm(dim=-1).clamp_min(eps) * b.norm(dim=-1).clamp_min(eps))


def multi_perspective_cosine_pairs(
    v1: torch.Tensor, v2: torch.Tensor, weight: torch.Tensor, eps: float = 1e-8
) -> torch.Tensor:
    """f_m for every pair of positions without materialising (B, L1, L2, l, d): (B, L1, d), (B, L2, d), (l, d) ->
    (B, L1, L2, l)."""
    a = v1.unsqueeze(1) * weight[None, :, None, :]  # (B, l, L1, d)
    b = v2.unsqueeze(1) * weight[None, :, None, :]  # (B, l, L2, d)
    norms = a.norm(dim=-1).clamp_min(eps).unsqueeze(-1) * b.norm(dim=-1).clamp_min(eps).unsqueeze(-2)
    return (a @ b.transpose(-1, -2) / norms).permute(0, 2, 3, 1)


class MultiPerspectiveMatching(nn.Module):
    """BiMPM's matching layer: every time step of one sentence against all time steps of the other, with the four
    strategies, each on the forward and on the backward context states with its own perspective weight W (l x H):

    full           m = f_m(h_i, h_last)          h_last: the other sentence's final state of that direction
    max-pooling    m = max_j f_m(h_i, h_j)       elementwise over perspectives and valid j
    attentive      m = f_m(h_i, sum_j a_ij h_j / sum_j a_ij), a_ij = cos(h_i, h_j)
    max-attentive  m = f_m(h_i, h_j*), j* = argmax_j a_ij

    The eight weights are shared by the two matching directions (P against Q and Q against P). The attentive mean
    divides by the sum of cosines as in the paper; a sum within 1e-6 of zero is replaced by 1e-6.
    """

    STRATEGIES = ("full", "max-pooling", "attentive", "max-attentive")

    def __init__(self, hidden: int, perspectives: int) -> None:
        super().__init__()
        # weight[2 * s + d]: strategy s (STRATEGIES order), LSTM direction d (0 forward, 1 backward)
        self.weight = nn.Parameter(torch.empty(2 * len(self.STRATEGIES), perspectives, hidden))

    def forward(
        self, h: torch.Tensor, other: torch.Tensor, other_mask: torch.Tensor, other_lengths: torch.Tensor
    ) -> torch.Tensor:
        """Context states (B, L, 2H) of one sentence and (B, L', 2H) of the other -> matching vectors (B, L, 8l),
        ordered [forward: full, max-pooling, attentive, max-attentive; backward: the same]."""
        hidden = h.shape[-1] // 2
        ends = bidirectional_ends(other, other_lengths)
        valid = other_mask.bool().unsqueeze(1)  # (B, 1, L')
        vectors = []
        for direction in range(2):
            part = slice(direction * hidden, (direction + 1) * hidden)
            v, w, final = h[..., part], other[..., part], ends[:, part]
            weight = self.weight[direction::2]
            pairs = multi_perspective_cosine_pairs(v, w, weight[1])
            scores = cosine_scores(v, w) * valid
            total = scores.sum(-1, keepdim=True)
            total = torch.where(total.abs() < 1e-6, torch.full_like(total, 1e-6), total)
            best = scores.masked_fill(~valid, -2.0).argmax(-1)  # cosines are >= -1
            chosen = w.gather(1, best.unsqueeze(-1).expand(-1, -1, hidden))
            vectors += [
                multi_perspective_cosine(v, final.unsqueeze(1), weight[0]),
                pairs.masked_fill(~valid.unsqueeze(-1), -2.0).amax(2),
                multi_perspective_cosine(v, scores @ w / total, weight[2]),
                multi_perspective_cosine(v, chosen, weight[3]),
            ]
        return torch.cat(vectors, -1)


class BimpmMatcher(nn.Module):
    """BiMPM: shared BiLSTM context layer, bilateral multi-perspective matching (P against Q and Q against P),
    feature attention on the matching vectors, shared BiLSTM aggregation, the four final states (both directions,
    both sentences) into a two-layer tanh prediction network. Word embeddings only (no character LSTM)."""

    def __init__(self, config: SiameseMatcherConfig) -> None:
        super().__init__()
        hidden, width = config.hidden_size, 8 * config.bimpm_perspectives
        self.dropout = nn.Dropout(config.dropout)
        self.context = nn.LSTM(config.embedding_size, hidden, batch_first=True, bidirectional=True)
        self.matching = MultiPerspectiveMatching(hidden, config.bimpm_perspectives)
        self.feature_attention = FeatureAttentionPair(config)
        self.aggregation = nn.LSTM(width, hidden, batch_first=True, bidirectional=True)
        self.classifier = prediction_mlp(4 * hidden, 2 * hidden, config.num_labels, nn.Tanh(), config.dropout)

    def forward(self, e1: torch.Tensor, mask1: torch.Tensor, e2: torch.Tensor, mask2: torch.Tensor) -> MatcherOutput:
        len1, len2 = mask1.sum(1), mask2.sum(1)
        c1 = self.dropout(run_rnn(self.context, self.dropout(e1), len1))
        c2 = self.dropout(run_rnn(self.context, self.dropout(e2), len2))
        m1, m2 = self.matching(c1, c2, mask2, len2), self.matching(c2, c1, mask1, len1)
        m1, m2 = self.feature_attention(m1, mask1, m2, mask2)
        a1 = run_rnn(self.aggregation, self.dropout(m1), len1)
        a2 = run_rnn(self.aggregation, self.dropout(m2), len2)
        return self.classifier(torch.cat([bidirectional_ends(a1, len1), bidirectional_ends(a2, len2)], -1)), None


class FactorizationMachine(nn.Module):
    """A factorization machine (Rendle 2010) compressing a feature vector to a scalar:
    FM(x) = w0 + <w, x> + sum_{i<j} <v_i, v_j> x_i x_j, with the pairwise term computed in O(n k) as
    1/2 sum_f [(sum_i v_if x_i)^2 - sum_i v_if^2 x_i^2]. The factors v_i are the columns of `factors.weight`."""

    def __init__(self, in_dim: int, factors: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_dim, 1)
        self.factors = nn.Linear(in_dim, factors, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., n) -> (...)."""
        pairwise = 0.5 * (self.factors(x).pow(2) - x.pow(2) @ self.factors.weight.pow(2).T).sum(-1)
        return self.linear(x).squeeze(-1) + pairwise


class AlignmentFactorization(nn.Module):
    """CAFE's compression of one alignment (x, x~): FM([x; x~]), FM(x - x~), FM(x * x~), one FM each -> (B, L, 3)."""

    def __init__(self, dim: int, factors: int) -> None:
        super().__init__()
        self.concat = FactorizationMachine(2 * dim, factors)
        self.difference = FactorizationMachine(dim, factors)
        self.product = FactorizationMachine(dim, factors)

    def forward(self, x: torch.Tensor, aligned: torch.Tensor) -> torch.Tensor:
        return torch.stack(
            [self.concat(torch.cat([x, aligned], -1)), self.difference(x - aligned), self.product(x * aligned)], -1
        )


class CafeMatcher(nn.Module):
    """CAFE: highway input encoder; inter-attention (co-attention e_ij = F(a_i) . F(b_j)) and intra-attention
    (f_ij = G(a_i) . G(a_j) within a sentence), F and G one ReLU layer each; each alignment factorized into three FM
    scalars appended to the word features ([a; 6 scalars]); feature attention on the augmented features; an LSTM
    encoder; mean-max pooling; [h1; h2; h1 - h2; h1 * h2] through highway prediction layers and a linear output.
    All layers are shared by the two sentences."""

    def __init__(self, config: SiameseMatcherConfig) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = HighwayEncoder(config.embedding_size, hidden, config.highway_layers)
        self.inter_projection = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU())
        self.intra_projection = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU())
        self.inter_factorization = AlignmentFactorization(hidden, config.cafe_fm_factors)
        self.intra_factorization = AlignmentFactorization(hidden, config.cafe_fm_factors)
        self.feature_attention = FeatureAttentionPair(config)
        self.lstm = nn.LSTM(config.feature_attention_width(), hidden, batch_first=True)
        self.prediction = HighwayEncoder(8 * hidden, hidden, config.highway_layers)
        self.classifier = nn.Sequential(nn.Dropout(config.dropout), nn.Linear(hidden, config.num_labels))

    def augment(self, x: torch.Tensor, mask: torch.Tensor, aligned: torch.Tensor) -> torch.Tensor:
        """[x; inter FMs; intra FMs] (B, L, H + 6) for a sentence `x` and its inter-aligned counterpart."""
        projected = self.intra_projection(x)
        intra = self_align(x, mask, projected @ projected.transpose(1, 2))
        return torch.cat([x, self.inter_factorization(x, aligned), self.intra_factorization(x, intra)], -1)

    def forward(self, e1: torch.Tensor, mask1: torch.Tensor, e2: torch.Tensor, mask2: torch.Tensor) -> MatcherOutput:
        a, b = self.encoder(self.dropout(e1)), self.encoder(self.dropout(e2))
        fa, fb = self.inter_projection(a), self.inter_projection(b)
        aligned_a, aligned_b = cross_align(a, b, mask1, mask2, fa @ fb.transpose(1, 2))
        u1, u2 = self.feature_attention(
            self.augment(a, mask1, aligned_a), mask1, self.augment(b, mask2, aligned_b), mask2
        )
        h1 = mean_max_pool(run_rnn(self.lstm, self.dropout(u1), mask1.sum(1)), mask1)
        h2 = mean_max_pool(run_rnn(self.lstm, self.dropout(u2), mask2.sum(1)), mask2)
        return self.classifier(self.prediction(self.dropout(compare_features(h1, h2)))), None


class DiinEncoder(nn.Module):
    """DIIN's encoding layer for one sentence: highway network, self-attention A_ij = w^T [p_i; p_j; p_i * p_j] + b
    (softmax over valid j), and the fuse gate
    z = tanh(W1 [p; p~]), r = sigmoid(W2 [p; p~]), f = sigmoid(W3 [p; p~]), out = r * p + f * z."""

    def __init__(self, config: SiameseMatcherConfig) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.highway = HighwayEncoder(config.embedding_size, hidden, config.highway_layers)
        self.attention = nn.Linear(3 * hidden, 1)
        self.fuse_z = nn.Linear(2 * hidden, hidden)
        self.fuse_r = nn.Linear(2 * hidden, hidden)
        self.fuse_f = nn.Linear(2 * hidden, hidden)

    def attention_scores(self, p: torch.Tensor) -> torch.Tensor:
        """(B, L, H) -> A (B, L, L), computed without materialising the (B, L, L, 3H) pair features."""
        w_i, w_j, w_ij = self.attention.weight[0].chunk(3)
        return (p @ w_i).unsqueeze(2) + (p @ w_j).unsqueeze(1) + (p * w_ij) @ p.transpose(1, 2) + self.attention.bias

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        p = self.highway(x)
        joint = torch.cat([p, self_align(p, mask, self.attention_scores(p))], -1)
        gate_r, gate_f = torch.sigmoid(self.fuse_r(joint)), torch.sigmoid(self.fuse_f(joint))
        return gate_r * p + gate_f * torch.tanh(self.fuse_z(joint))


def masked_max_pool_2x2(
    x: torch.Tensor, len1: torch.Tensor, len2: torch.Tensor
) -> "tuple[torch.Tensor, torch.Tensor, torch.Tensor]":
    """2 x 2 max pooling (stride 2) of (B, C, L1, L2) maps over valid cells only: odd sizes are padded, padding never
    wins a window, and the pooled valid region is ceil(len1 / 2) x ceil(len2 / 2). Returns the map (padding zero) and
    the new lengths."""
    floor = torch.finfo(x.dtype).min
    x = x.masked_fill(~grid_mask(x, len1, len2), floor)
    x = nn.functional.pad(x, (0, x.shape[3] % 2, 0, x.shape[2] % 2), value=floor)
    len1, len2 = (len1 + 1) // 2, (len2 + 1) // 2
    x = nn.functional.max_pool2d(x, 2)
    return x * grid_mask(x, len1, len2), len1, len2


def grid_mask(x: torch.Tensor, len1: torch.Tensor, len2: torch.Tensor) -> torch.Tensor:
    """(B, 1, L1, L2) boolean mask of the valid cells of a (B, C, L1, L2) interaction map."""
    rows = torch.arange(x.shape[2], device=x.device)[None] < len1[:, None]
    columns = torch.arange(x.shape[3], device=x.device)[None] < len2[:, None]
    return (rows.unsqueeze(2) & columns.unsqueeze(1)).unsqueeze(1)


class DenseFeatureExtractor(nn.Module):
    """DIIN's DenseNet over the interaction tensor: a 1 x 1 convolution scaling the channels by eta, then dense blocks
    (each 3 x 3 convolution + ReLU adds `growth` maps, concatenated to its input) each followed by a transition
    (1 x 1 convolution compressing by theta, 2 x 2 max pooling). No batch normalisation (its statistics would mix
    padding into valid cells). Padding cells are zeroed after every layer, so a pair's output does not depend on how
    much padding its batch has; the paper's flatten over a fixed-size map is replaced by a max over the valid cells,
    since sentences are not padded to a fixed length here."""

    def __init__(self, in_channels: int, config: SiameseMatcherConfig) -> None:
        super().__init__()
        growth = config.diin_growth_rate
        channels = max(1, int(in_channels * config.diin_first_scale))
        self.scale = nn.Conv2d(in_channels, channels, 1)
        self.blocks = nn.ModuleList()
        self.transitions = nn.ModuleList()
        for _ in range(config.diin_dense_blocks):
            self.blocks.append(
                nn.ModuleList(
                    nn.Conv2d(channels + i * growth, growth, 3, padding=1) for i in range(config.diin_dense_layers)
                )
            )
            channels += config.diin_dense_layers * growth
            compressed = max(1, int(channels * config.diin_transition_scale))
            self.transitions.append(nn.Conv2d(channels, compressed, 1))
            channels = compressed
        self.out_channels = channels

    def forward(self, grid: torch.Tensor, len1: torch.Tensor, len2: torch.Tensor) -> torch.Tensor:
        """(B, C, L1, L2) interaction tensor (zero outside the valid cells) -> (B, out_channels)."""
        keep = grid_mask(grid, len1, len2)
        x = self.scale(grid) * keep
        for layers, transition in zip(self.blocks, self.transitions):
            for conv in layers:
                x = torch.cat([x, torch.relu(conv(x)) * keep], 1)
            x, len1, len2 = masked_max_pool_2x2(transition(x), len1, len2)
            keep = grid_mask(x, len1, len2)
        return x.masked_fill(~keep, torch.finfo(x.dtype).min).amax((2, 3))


class DiinMatcher(nn.Module):
    """DIIN: an encoding layer per sentence (premise and hypothesis encoders not tied: the paper encodes them apart),
    feature attention on the encodings, the interaction tensor I_ij = p_i * h_j, the DenseNet feature extractor and a
    linear output layer. Word embeddings only (no character, POS or exact-match features)."""

    def __init__(self, config: SiameseMatcherConfig) -> None:
        super().__init__()
        self.dropout = nn.Dropout(config.dropout)
        self.first_encoder = DiinEncoder(config)
        self.second_encoder = DiinEncoder(config)
        self.feature_attention = FeatureAttentionPair(config)
        self.extractor = DenseFeatureExtractor(config.hidden_size, config)
        self.classifier = nn.Sequential(
            nn.Dropout(config.dropout), nn.Linear(self.extractor.out_channels, config.num_labels)
        )

    @staticmethod
    def interaction(p: torch.Tensor, mask1: torch.Tensor, h: torch.Tensor, mask2: torch.Tensor) -> torch.Tensor:
        """I_ij = p_i * h_j as a (B, H, L1, L2) map, zero where either token is padding."""
        grid = p.unsqueeze(2) * h.unsqueeze(1) * pair_mask(mask1, mask2).unsqueeze(-1)
        return grid.permute(0, 3, 1, 2)

    def forward(self, e1: torch.Tensor, mask1: torch.Tensor, e2: torch.Tensor, mask2: torch.Tensor) -> MatcherOutput:
        p = self.first_encoder(self.dropout(e1), mask1)
        h = self.second_encoder(self.dropout(e2), mask2)
        p, h = self.feature_attention(p, mask1, h, mask2)
        features = self.extractor(self.interaction(p, mask1, h, mask2), mask1.sum(1), mask2.sum(1))
        return self.classifier(features), None


class DrcnLayer(nn.Module):
    """One densely connected co-attentive recurrent layer of DRCN, shared by both sentences:
    h = BiLSTM(dropout(x)), a_i = sum_j softmax_j(cos(h_i, h'_j)) h'_j over the other sentence's states h', and the
    dense connection x_next = [h; a; x] (x carried over undropped, so earlier features are not dropped again at every
    layer)."""

    def __init__(self, in_dim: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.rnn = nn.LSTM(in_dim, hidden, batch_first=True, bidirectional=True)

    def forward(
        self, x1: torch.Tensor, mask1: torch.Tensor, x2: torch.Tensor, mask2: torch.Tensor
    ) -> "tuple[torch.Tensor, torch.Tensor]":
        h1 = run_rnn(self.rnn, self.dropout(x1), mask1.sum(1))
        h2 = run_rnn(self.rnn, self.dropout(x2), mask2.sum(1))
        a1, a2 = cross_align(h1, h2, mask1, mask2, cosine_scores(h1, h2))
        return torch.cat([h1, a1, x1], -1), torch.cat([h2, a2, x2], -1)


class DrcnAutoencoder(nn.Module):
    """DRCN's bottleneck: code = ReLU(W_e x) of width 2H replaces the growing dense features; the decoder W_d code
    reconstructs x, and the mean squared reconstruction error over valid tokens joins the training loss."""

    def __init__(self, in_dim: int, width: int) -> None:
        super().__init__()
        self.encoder = nn.Linear(in_dim, width)
        self.decoder = nn.Linear(width, in_dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> "tuple[torch.Tensor, torch.Tensor]":
        code = torch.relu(self.encoder(x))
        error = (self.decoder(code) - x).pow(2).mean(-1)
        weights = mask.to(x.dtype)
        return code, (error * weights).sum() / weights.sum()


class DrcnMatcher(nn.Module):
    """DRCN: `drcn_layers` densely connected co-attentive BiLSTM layers; an autoencoder after every second layer below
    the top one (layers 2 and 4 of 5) with a feature-attention pair on its output (two blocks per branch by default,
    matching the SFA paper); masked max pooling; the interaction vector [p; q; p + q; p - q; |p - q|] through a
    ReLU layer and a linear output."""

    def __init__(self, config: SiameseMatcherConfig) -> None:
        super().__init__()
        hidden, width = config.hidden_size, config.feature_attention_width()
        self.layers = nn.ModuleList()
        self.autoencoders = nn.ModuleDict()
        self.feature_attention = nn.ModuleDict()
        in_dim = config.embedding_size
        for index in range(1, config.drcn_layers + 1):
            self.layers.append(DrcnLayer(in_dim, hidden, config.dropout))
            in_dim += 4 * hidden
            if index % 2 == 0 and index < config.drcn_layers:
                self.autoencoders[str(index)] = DrcnAutoencoder(in_dim, width)
                self.feature_attention[str(index)] = FeatureAttentionPair(config)
                in_dim = width
        self.classifier = prediction_mlp(5 * in_dim, hidden, config.num_labels, nn.ReLU(), config.dropout)

    def forward(self, e1: torch.Tensor, mask1: torch.Tensor, e2: torch.Tensor, mask2: torch.Tensor) -> MatcherOutput:
        x1, x2 = e1, e2
        reconstruction = []
        for index, layer in enumerate(self.layers, 1):
            x1, x2 = layer(x1, mask1, x2, mask2)
            if str(index) in self.autoencoders:
                (x1, error1), (x2, error2) = (
                    self.autoencoders[str(index)](x1, mask1),
                    self.autoencoders[str(index)](x2, mask2),
                )
                x1, x2 = self.feature_attention[str(index)](x1, mask1, x2, mask2)
                reconstruction += [error1, error2]
        p, q = masked_max(x1, mask1), masked_max(x2, mask2)
        logits = self.classifier(torch.cat([p, q, p + q, p - q, (p - q).abs()], -1))
        return logits, torch.stack(reconstruction).mean()


_MATCHERS = {
    "esim": EsimMatcher,
    "re2": Re2Matcher,
    "bimpm": BimpmMatcher,
    "cafe": CafeMatcher,
    "diin": DiinMatcher,
    "drcn": DrcnMatcher,
}


@dataclass
class SiameseMatcherOutput(ModelOutput):
    r"""
    Output of [`SiameseMatcherForSequenceClassification`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*, returned when `labels` is given):
            MSE on labels scaled to [0, 1] (regression) or cross-entropy (classification); for DRCN plus
            `drcn_reconstruction_weight` times the autoencoders' reconstruction error.
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
        """Xavier-uniform linear and convolution weights with zero biases, orthogonal recurrent weights, BiMPM's
        perspective weights uniform in [0, 1); embeddings as the base class does (then overwritten by
        `from_backbone`); the gates of `feature_attention_residual="gated"` zero."""
        if isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)):
            init.xavier_uniform_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, (nn.LSTM, nn.GRU)):
            # On one intra-op thread, restored after: the QR behind `orthogonal_` takes milliseconds on one thread but
            # up to ~100x longer on two when the other core is busy (threaded LAPACK), and every construction pays it.
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                for name, param in module.named_parameters():
                    if name.startswith("weight_ih"):
                        init.xavier_uniform_(param)
                    elif name.startswith("weight_hh"):
                        init.orthogonal_(param)
                    else:
                        init.zeros_(param)
            finally:
                torch.set_num_threads(threads)
        elif isinstance(module, MultiPerspectiveMatching):
            init.uniform_(module.weight, 0.0, 1.0)
        elif isinstance(module, FeatureAttentionPair):
            if module.gate is not None:
                init.zeros_(module.gate)
        else:
            super()._init_weights(module)

    def training_stats(self) -> dict[str, float]:
        """The current gates of every gated feature-attention pair (`feature_attention_residual="gated"`), keyed by
        where the pair sits in the host: `siamese/feature_attention/gate_0` and `gate_1` (branches 1 and 2), DRCN's
        `siamese/feature_attention/<layer>/gate_i`, RE2's `siamese/blocks/<k>/feature_attention/gate_i`; empty when
        no pair is gated. Beside each gate, `contribution_i`: the mean ||g_i block_i(x_i)|| / ||x_i|| over the training
        forwards since the last call (what the block adds, relative to its input; absent when there were none).
        `pairzoo.train` logs them, so a run shows whether the gates left zero and how much the blocks add."""
        stats = {}
        for name, module in self.matcher.named_modules():
            if isinstance(module, FeatureAttentionPair) and module.gate is not None:
                prefix = "siamese/" + name.replace(".", "/")
                for branch, value in enumerate(module.gate.detach().tolist()):
                    stats[f"{prefix}/gate_{branch}"] = value
                for branch, value in enumerate(module.pop_contribution() or ()):
                    stats[f"{prefix}/contribution_{branch}"] = value
        return stats

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
        raw, auxiliary = self.matcher(
            self.embeddings(input_ids), attention_mask, self.embeddings(input_ids_2), attention_mask_2
        )
        loss, logits, scores = similarity_loss_and_scores(self.config, raw, labels)
        if loss is not None and auxiliary is not None:
            loss = loss + self.config.drcn_reconstruction_weight * auxiliary
        return SiameseMatcherOutput(loss=loss, logits=logits, scores=scores)


__all__ = [
    "FeatureAttention",
    "SelectiveFeatureAttention",
    "SiameseMatcherForSequenceClassification",
]
