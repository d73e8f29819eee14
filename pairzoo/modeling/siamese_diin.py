"""DIIN (Gong et al. 2018, "Natural Language Inference over Interaction Space") as a host of the Siamese matcher: the
feature-attention pair sits on the self-attended encodings, before the interaction tensor joins the branches."""

import torch
from torch import nn

from ..configuration.configuration_siamese_matcher import SiameseMatcherConfig
from .siamese_blocks import FeatureAttentionPair, HighwayEncoder, MatcherOutput, pair_mask, self_align


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
