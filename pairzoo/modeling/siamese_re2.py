"""RE2 (Yang et al. 2019, "Simple and Effective Text Matching with Richer Alignment Features") as a host of the
Siamese matcher: a feature-attention pair sits on every block's fusion output."""

import math

import torch
from torch import nn

from ..configuration.configuration_siamese_matcher import SiameseMatcherConfig
from .siamese_blocks import (
    FeatureAttentionPair,
    MatcherOutput,
    compare_features,
    cross_align,
    masked_max,
    prediction_mlp,
)


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
