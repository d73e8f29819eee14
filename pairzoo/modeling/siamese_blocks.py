"""The feature-attention blocks FA and SFA of the Siamese matchers, and the layers several host networks share.

FA and SFA follow Zang, Liu: "Modeling Selective Feature Attention for Representation-based Siamese Text Matching"
(sections 2.2 and 3.2). The blocks map (B, L, D) features and a (B, L) mask to (B, L, D) features of the same shape;
`FeatureAttentionPair` puts one on each branch of a host (unshared parameters, the paper's Fig. 1). The reference
code (hggzjx/SFA) builds its blocks inside `forward` and never calls SFA; this implementation follows the paper's
equations instead.
"""

import torch
from torch import nn

from ..configuration.configuration_siamese_matcher import SFA_SQUEEZES, SiameseMatcherConfig, reduced_width
from .encoders import capturing_graph


def check_token_mask(mask: torch.Tensor, name: str = "attention_mask") -> torch.Tensor:
    """Validate a right-padded (B, L) 0/1 mask with at least one token per row; returns the lengths (B,).

    An empty sentence has no token to attend to or pool over, so it is an error rather than a silent NaN.
    """
    if mask.dim() != 2:
        raise ValueError(f"`{name}` must be (batch, length), got shape {tuple(mask.shape)}.")
    lengths = mask.long().sum(1)
    if capturing_graph():
        return lengths
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
    if capturing_graph():
        return _run_rnn_unpacked(rnn, x, lengths)
    if bool((lengths == x.shape[1]).all()):  # no padding (always so at batch size 1): packing would change nothing
        return rnn(x)[0]
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    output, _ = rnn(packed)
    return nn.utils.rnn.pad_packed_sequence(output, batch_first=True, total_length=x.shape[1])[0]


def _run_rnn_unpacked(rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """`run_rnn` without packing, for graph capture (packing sizes tensors by their values): the forward direction
    reads `x` as it is (its padding comes after each sentence), the backward direction reads each row shifted right so
    that its sentence ends at the last position (its padding comes before), and each output is shifted back; padding
    positions come out as zeros. One-layer RNNs only (pairzoo's hosts use no other)."""
    if rnn.num_layers != 1:
        raise ValueError(f"graph capture runs one-layer RNNs only, got num_layers={rnn.num_layers}.")
    length = x.shape[1]
    positions = torch.arange(length, device=x.device)[None]  # (1, L)
    valid = (positions < lengths[:, None]).unsqueeze(-1)  # (B, L, 1)
    forward = rnn(x)[0]
    if not rnn.bidirectional:
        return forward * valid
    shift = (length - lengths)[:, None]  # (B, 1): padding moved in front of each sentence

    def gather(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return values.gather(1, index.clamp(0, length - 1).unsqueeze(-1).expand(-1, -1, values.shape[-1]))

    shifted = gather(x, positions - shift) * (positions >= shift).unsqueeze(-1)
    backward = gather(rnn(shifted)[0], positions + shift)
    hidden = forward.shape[-1] // 2
    return torch.cat([forward[..., :hidden], backward[..., hidden:]], dim=-1) * valid


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
