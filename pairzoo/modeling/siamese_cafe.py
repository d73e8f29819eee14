"""CAFE (Tay et al. 2018, "Compare, Compress and Propagate: Enhancing Neural Architectures with Alignment Factorization
for Natural Language Inference") as a host of the Siamese matcher: the feature-attention pair sits on the
factorization-augmented word features of both sentences."""

import torch
from torch import nn

from ..configuration.configuration_siamese_matcher import SiameseMatcherConfig
from .siamese_blocks import (
    FeatureAttentionPair,
    HighwayEncoder,
    MatcherOutput,
    compare_features,
    cross_align,
    mean_max_pool,
    run_rnn,
    self_align,
)


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
