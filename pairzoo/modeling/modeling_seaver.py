"""SEAVER: Self-Augmentation via Self-Reweighting (Li, Fan, Gao 2024, Findings of EMNLP; code BaixuanLi/SEAVER).

The C-STS cross-encoder reads `s1 SEP s2 SEP c`. From the last layer's post-softmax attention A_h of each head h, the
sentence-to-condition block SCAttn_h = A_h[S, C] and the condition-to-sentence block CSAttn_h = A_h[C, S] give

    W_S = softmax(SCAttn_h . CSAttn_h)    (l_s x l_s)        W_C = softmax(CSAttn_h . SCAttn_h)    (l_c x l_c)
    RO_h = [W_S . O_S ; W_C . O_C]  (padding rows: O)        RO = concat_h(RO_h) . W_o        AO = RO + alpha * O

with O the last hidden state; the c-sts head reads AO (paper sections 3.1-3.2).

Because S and C are disjoint, X = SCAttn + CSAttn (A restricted to the two off-diagonal blocks, zero elsewhere) gives
both products at once: X . X = SCAttn . CSAttn + CSAttn . SCAttn, block-diagonal; a softmax restricted to each
row's own block then yields W_S and W_C together. With `pooling="cls"` the head reads only AO's first row, so unless
the reweighting is requested as output (`output_internals=True`) only that row is computed, from the last layer's
attention rows of the first token and of the condition tokens (same numbers as the full path; W_o then projects one
row instead of every token).
"""

from dataclasses import dataclass

import torch
from torch import nn
from transformers.utils import can_return_tuple

from ..configuration.configuration_seaver import SeaverConfig
from .common import (
    ConditionalSimilarityHead,
    ConditionalSimilarityOutput,
    PairzooPreTrainedModel,
    build_backbone,
    conditional_span_masks,
    pool_hidden_states,
    similarity_loss_and_scores,
)
from .encoders import attention_probabilities, capturing_graph, layer_list


@dataclass
class SeaverOutput(ConditionalSimilarityOutput):
    r"""
    Output of [`SeaverForConditionalSimilarity`]: the fields of `ConditionalSimilarityOutput`, plus, when asked with
    `output_internals=True` (and `use_reweighting=True`), what lets anyone check the equations from outside.

    Args:
        reweighting_sentence (`torch.FloatTensor` of shape `(batch_size, num_reweight_heads, l_s, l_s)`, *optional*):
            W_S of each reweighting head; `l_s` is the longest sentence part of the batch, shorter ones zero-padded.
        reweighting_condition (`torch.FloatTensor` of shape `(batch_size, num_reweight_heads, l_c, l_c)`, *optional*):
            W_C of each reweighting head, zero-padded to the longest condition part `l_c`.
        augmented_hidden_states (`torch.FloatTensor` of shape `(batch_size, sequence_length, hidden_size)`,
            *optional*): AO = RO + alpha * O, the features the head reads.
        last_layer_attentions (`torch.FloatTensor` of shape `(batch_size, num_heads, sequence_length,
            sequence_length)`, *optional*): the last layer's post-softmax (pre-dropout) attention probabilities of all
            heads, from which the reweighting was computed.
        sentence_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            1 on the sentence part used (with `reweighting_source="random"`: the first random part).
        condition_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            1 on the condition part used (with `reweighting_source="random"`: the second random part).
    """

    reweighting_sentence: "torch.FloatTensor | None" = None
    reweighting_condition: "torch.FloatTensor | None" = None
    augmented_hidden_states: "torch.FloatTensor | None" = None
    last_layer_attentions: "torch.FloatTensor | None" = None
    sentence_mask: "torch.LongTensor | None" = None
    condition_mask: "torch.LongTensor | None" = None


def _random_split_masks(attention_mask: torch.Tensor) -> "tuple[torch.Tensor, torch.Tensor]":
    """Two contiguous random parts of each example's non-padding tokens (Random-Augmentation ablation).

    The split position is uniform over 1 .. n-1 (n non-padding tokens, right padding), drawn from torch's global
    generator, so the first part always holds the first token.
    """
    valid = attention_mask.bool()
    lengths = valid.sum(1, keepdim=True)
    draw = torch.rand(lengths.shape, device=attention_mask.device)
    split = 1 + (draw * (lengths - 1).clamp_min(1)).long().clamp_max((lengths - 2).clamp_min(0))
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device).unsqueeze(0)
    return (valid & (positions < split)).long(), (valid & (positions >= split)).long()


def _span_positions(mask: torch.Tensor) -> "tuple[torch.Tensor, torch.Tensor]":
    """Positions (B, l) of a contiguous span per example given by `mask` (B, L), padded to the longest span `l`, and
    which of them are inside the span (B, l)."""
    lengths = mask.sum(1, keepdim=True)
    offsets = torch.arange(int(lengths.max()), device=mask.device)[None]
    positions = (mask.argmax(1, keepdim=True) + offsets).clamp_max(mask.shape[1] - 1)
    return positions, offsets < lengths


def _gather_block(matrix: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, H, L, L) restricted to a contiguous span per example given by `mask` (B, L) -> (B, H, l, l), zero-padded."""
    positions, inside = _span_positions(mask)
    (b, h, _, width), length = matrix.shape, positions.shape[1]
    rows = matrix.gather(2, positions[:, None, :, None].expand(b, h, length, width))
    block = rows.gather(3, positions[:, None, None, :].expand(b, h, length, length))
    return block * (inside[:, :, None] & inside[:, None, :])[:, None]


class SeaverForConditionalSimilarity(PairzooPreTrainedModel):
    """SEAVER cross-encoder for conditional similarity (regression on 1-5) or conditional classification."""

    config_class = SeaverConfig
    input_format = "cross"

    def __init__(self, config: SeaverConfig) -> None:
        super().__init__(config)
        self.backbone = build_backbone(config.backbone_config)
        hidden = config.backbone_config.hidden_size
        num_heads = len(config.reweight_heads or range(config.backbone_config.num_attention_heads))
        self.reweighting_projection = nn.Linear(num_heads * hidden, hidden) if config.use_reweighting else None
        self.head = ConditionalSimilarityHead(config)
        if config.pooling == "flatten":
            self.head.classifier = nn.Linear(config.flatten_length * hidden, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: "torch.LongTensor | None" = None,
        attention_mask: "torch.LongTensor | None" = None,
        token_type_ids: "torch.LongTensor | None" = None,
        labels: "torch.Tensor | None" = None,
        sentence_mask: "torch.LongTensor | None" = None,
        condition_mask: "torch.LongTensor | None" = None,
        output_hidden_states: "bool | None" = None,
        output_attentions: "bool | None" = None,
        output_internals: bool = False,
    ) -> SeaverOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): right-padded `s1 SEP s2 SEP c`
                (or `s1 SEP c`), encoded by `pairzoo.pipelines.encode_conditional_inputs`.
            attention_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`): 1 for tokens, 0 for padding.
            labels (`torch.Tensor` of shape `(batch_size,)`, *optional*): similarity on the label scale (regression)
                or class indices (classification).
            sentence_mask, condition_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
                the sentence and condition parts (`encode_conditional_inputs(..., return_span_masks=True)`); when
                absent they are derived from the separators of `input_ids` (`conditional_span_masks`).
            output_internals (`bool`, *optional*, defaults to `False`): also return the method's internals (W_S, W_C,
                AO, the last layer's attention probabilities and the span masks; with `use_reweighting=True`).
        """
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        config = self.config
        output_hidden_states, output_attentions = self.output_flags(output_hidden_states, output_attentions)
        outputs = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            output_hidden_states=True if config.use_reweighting else output_hidden_states,
            output_attentions=output_attentions,
        )
        last_hidden = outputs.last_hidden_state
        extras = {}
        if config.use_reweighting:
            if (sentence_mask is None) != (condition_mask is None):
                raise ValueError("Give both `sentence_mask` and `condition_mask`, or neither.")
            if config.reweighting_source == "random":
                sentence_mask, condition_mask = _random_split_masks(attention_mask)
            elif sentence_mask is None:
                sentence_mask, condition_mask = conditional_span_masks(input_ids, attention_mask)
            first_row_only = (
                config.pooling == "cls"
                and not output_internals
                and not capturing_graph()
                and bool(sentence_mask[:, 0].all())
            )
            augmented, extras = self._augment(
                outputs.hidden_states[-2],
                last_hidden,
                attention_mask,
                sentence_mask,
                condition_mask,
                first_row_only,
                bool(output_internals),
            )
        else:
            augmented = last_hidden
        loss, logits, scores = similarity_loss_and_scores(config, self._head_logits(augmented, attention_mask), labels)
        return SeaverOutput(
            loss=loss,
            logits=logits,
            scores=scores,
            hidden_states=outputs.hidden_states if output_hidden_states else None,
            attentions=outputs.attentions,
            **extras,
        )

    def _augment(
        self,
        layer_input: torch.Tensor,
        last_hidden: torch.Tensor,
        attention_mask: torch.Tensor,
        sentence_mask: torch.Tensor,
        condition_mask: torch.Tensor,
        first_row_only: bool,
        internals: bool,
    ) -> "tuple[torch.Tensor, dict]":
        """AO (B, L, d), or only its first row (B, 1, d) when `first_row_only`, and with `internals` the tensors of
        `SeaverOutput` (else an empty dict)."""
        config = self.config
        sentence, condition = sentence_mask.to(last_hidden.dtype), condition_mask.to(last_hidden.dtype)
        with torch.set_grad_enabled(torch.is_grad_enabled() and not config.detach_reweighting):
            if first_row_only:
                reweighting = self._first_row_reweighting(layer_input, attention_mask, sentence, condition_mask)
            else:
                attentions = self._last_layer_attentions(layer_input, attention_mask)
                reweighting = self._reweighting(self._select_heads(attentions), sentence, condition)
        batch, heads, rows, length = reweighting.shape
        # RO_h = W . O on the two parts, O itself on padding rows; heads concatenated, then merged by W_o. One bmm
        # over (B, h * rows, L) avoids broadcasting O to every head.
        reweighted = torch.bmm(reweighting.reshape(batch, heads * rows, length), last_hidden)
        reweighted = reweighted.view(batch, heads, rows, -1)
        outside = (1.0 - sentence - condition)[:, :rows, None]
        reweighted = reweighted + (outside * last_hidden[:, :rows])[:, None]
        merged = reweighted.transpose(1, 2).flatten(2)
        augmented = self.reweighting_projection(merged) + config.alpha * last_hidden[:, :rows]
        if not internals:  # `first_row_only` is never asked for them
            return augmented, {}
        return augmented, {
            "reweighting_sentence": _gather_block(reweighting, sentence_mask),
            "reweighting_condition": _gather_block(reweighting, condition_mask),
            "augmented_hidden_states": augmented,
            "last_layer_attentions": attentions,
            "sentence_mask": sentence_mask,
            "condition_mask": condition_mask,
        }

    def _last_layer_attentions(
        self,
        layer_input: torch.Tensor,
        attention_mask: torch.Tensor,
        query_positions: "torch.LongTensor | None" = None,
    ) -> torch.Tensor:
        """Post-softmax, pre-dropout attention probabilities (B, H, L, L) of the backbone's last layer, or only the
        rows of `query_positions` (B, R): (B, H, R, L); padding keys of valid query rows get zero probability.

        `layer_input` holds the hidden states entering the last layer (`encoders.attention_probabilities`: the same
        probabilities under any attention implementation, in training and evaluation mode).
        """
        last = len(layer_list(self.backbone)) - 1
        return attention_probabilities(self.backbone, last, layer_input, attention_mask, query_positions)

    def _select_heads(self, attentions: torch.Tensor) -> torch.Tensor:
        heads = self.config.reweight_heads
        return attentions if heads is None else attentions[:, heads]

    @staticmethod
    def _reweighting(probabilities: torch.Tensor, sentence: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
        """W_S on S x S plus W_C on C x C, zero elsewhere: (B, h, L, L) from attention probabilities (B, h, L, L)."""
        # X: A on the S->C and C->S blocks only; X . X holds SCAttn.CSAttn on S x S and CSAttn.SCAttn on C x C
        cross = sentence[:, :, None] * condition[:, None, :] + condition[:, :, None] * sentence[:, None, :]
        blocks = probabilities * cross[:, None]
        products = torch.matmul(blocks, blocks)
        allowed = (sentence[:, :, None] * sentence[:, None, :] + condition[:, :, None] * condition[:, None, :]).bool()
        allowed = allowed[:, None]
        low = torch.finfo(products.dtype).min
        return products.masked_fill(~allowed, low).softmax(-1) * allowed.any(-1, keepdim=True)

    def _first_row_reweighting(
        self,
        layer_input: torch.Tensor,
        attention_mask: torch.Tensor,
        sentence: torch.Tensor,
        condition_mask: torch.Tensor,
    ) -> torch.Tensor:
        """First row of W_S (B, h, 1, L), from the attention rows of the first token and the condition part only.

        Row 0 of SCAttn . CSAttn is sum_k A[0, k] A[k, j] over condition tokens k and sentence tokens j, so only
        1 + l_c query rows of the last layer are needed (the first token is always in the sentence part).
        """
        positions, inside = _span_positions(condition_mask)
        queries = torch.cat([torch.zeros_like(positions[:, :1]), positions], dim=1)
        attentions = self._last_layer_attentions(layer_input, attention_mask, queries)
        attentions = self._select_heads(attentions)
        heads = attentions.shape[1]
        first_to_condition = attentions[:, :, 0].gather(2, positions[:, None].expand(-1, heads, -1))
        first_to_condition = first_to_condition * inside[:, None].to(attentions.dtype)
        condition_to_sentence = attentions[:, :, 1:] * sentence[:, None, None, :]
        products = torch.matmul(first_to_condition[:, :, None], condition_to_sentence)
        allowed = sentence.bool()[:, None, None, :]
        return products.masked_fill(~allowed, torch.finfo(products.dtype).min).softmax(-1)

    def _head_logits(self, augmented: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The c-sts head on the pooled AO; `flatten` applies the transform per position and reads every position."""
        if self.config.pooling != "flatten":
            return self.head(pool_hidden_states(augmented, attention_mask, self.config.pooling))
        length = self.config.flatten_length
        if augmented.shape[1] > length:
            raise ValueError(
                f"pooling='flatten' reads {length} positions (`flatten_length`) but the input has "
                f"{augmented.shape[1]}; encode with max_length <= {length}."
            )
        features = self.head.transform(augmented) if self.head.transform is not None else augmented
        features = features * attention_mask[:, :, None].to(features.dtype)
        features = nn.functional.pad(features, (0, 0, 0, length - features.shape[1]))
        return self.head.classifier(self.head.dropout(features.flatten(1)))


__all__ = ["SeaverForConditionalSimilarity", "SeaverOutput"]
