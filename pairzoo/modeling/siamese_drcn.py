"""DRCN (Kim et al. 2019, "Semantic Sentence Matching with Densely-connected Recurrent and Co-attentive Information")
as a host of the Siamese matcher: a feature-attention pair sits on the output of each of its two autoencoders."""

import torch
from torch import nn

from ..configuration.configuration_siamese_matcher import SiameseMatcherConfig
from .siamese_blocks import (
    FeatureAttentionPair,
    MatcherOutput,
    cosine_scores,
    cross_align,
    masked_max,
    prediction_mlp,
    run_rnn,
)


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
