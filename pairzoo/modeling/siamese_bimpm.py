"""BiMPM (Wang et al. 2017, "Bilateral Multi-Perspective Matching for Natural Language Sentences") as a host of the
Siamese matcher: the feature-attention pair sits on the matching vectors of both sentences."""

import torch
from torch import nn

from ..configuration.configuration_siamese_matcher import SiameseMatcherConfig
from .siamese_blocks import FeatureAttentionPair, MatcherOutput, cosine_scores, prediction_mlp, run_rnn


def bidirectional_ends(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B, L, 2H) BiRNN outputs -> (B, 2H): the forward state at each row's last valid token and the backward state at
    the first token, i.e. each direction's final state."""
    half = x.shape[-1] // 2
    last = x[torch.arange(x.shape[0], device=x.device), lengths - 1, :half]
    return torch.cat([last, x[:, 0, half:]], -1)


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
