"""C-STS cross-encoder baseline (Deshpande et al. 2023, "C-STS: Conditional Semantic Textual Similarity").

One encoder reads `s1 SEP s2 SEP c` as a single sequence (the tokenizer's own separator); the first-token feature of
the last layer goes through the c-sts head. Follows princeton-nlp/c-sts `CrossEncoderForClassification`.
"""

import torch
from transformers.utils import can_return_tuple

from ..configuration.configuration_cross_encoder import CrossEncoderConfig
from .common import (
    ConditionalSimilarityHead,
    ConditionalSimilarityOutput,
    PairzooPreTrainedModel,
    build_backbone,
    pool_hidden_states,
    similarity_loss_and_scores,
)


class CrossEncoderForConditionalSimilarity(PairzooPreTrainedModel):
    """Cross-encoder for conditional similarity (regression on 1-5) or conditional classification."""

    config_class = CrossEncoderConfig
    input_format = "cross"

    def __init__(self, config: CrossEncoderConfig) -> None:
        super().__init__(config)
        self.backbone = build_backbone(config.backbone_config)
        self.head = ConditionalSimilarityHead(config)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: "torch.LongTensor | None" = None,
        attention_mask: "torch.LongTensor | None" = None,
        token_type_ids: "torch.LongTensor | None" = None,
        labels: "torch.Tensor | None" = None,
        output_hidden_states: "bool | None" = None,
        output_attentions: "bool | None" = None,
        output_internals: bool = False,
    ) -> ConditionalSimilarityOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): `s1 SEP s2 SEP c`, encoded by
                `pairzoo.pipelines.encode_conditional_inputs`.
            attention_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`): 1 for tokens, 0 for padding.
            labels (`torch.Tensor` of shape `(batch_size,)`, *optional*): similarity on the label scale (regression)
                or class indices (classification).
            output_internals (`bool`, *optional*, defaults to `False`): taken by every pairzoo model; the baseline
                has no internals beyond `hidden_states` and `attentions`, so it adds nothing here.
        """
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        output_hidden_states, output_attentions = self.output_flags(output_hidden_states, output_attentions)
        outputs = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        features = pool_hidden_states(outputs.last_hidden_state, attention_mask, self.config.pooling)
        loss, logits, scores = similarity_loss_and_scores(self.config, self.head(features), labels)
        return ConditionalSimilarityOutput(
            loss=loss,
            logits=logits,
            scores=scores,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


__all__ = ["CrossEncoderForConditionalSimilarity"]
