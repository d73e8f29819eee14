"""ESIM (Chen et al. 2017, "Enhanced LSTM for Natural Language Inference") as a host of the Siamese matcher: the
feature-attention pair sits on the projected enhancement of both sentences."""

import torch
from torch import nn

from ..configuration.configuration_siamese_matcher import SiameseMatcherConfig
from .siamese_blocks import (
    FeatureAttentionPair,
    MatcherOutput,
    compare_features,
    cross_align,
    mean_max_pool,
    prediction_mlp,
    run_rnn,
)


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
