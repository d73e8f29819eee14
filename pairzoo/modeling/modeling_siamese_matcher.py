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
two autoencoders.

This file holds the model, its output and the host selection; each host lives in its own `siamese_<host>.py`, the
blocks and the layers several hosts share in `siamese_blocks.py`.

There is no transformer encoder: word embeddings are initialised from MiniLM's input embedding matrix (GloVe, which
the hosts' papers use, is not available offline), and the hosts' character, part-of-speech and exact-match input
features are left out; each sentence is tokenised alone (`input_format = "tri"`).
"""

from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoModel
from transformers import initialization as init
from transformers.utils import ModelOutput, can_return_tuple

from ..configuration.configuration_siamese_matcher import SiameseMatcherConfig
from .common import PairzooPreTrainedModel, similarity_loss_and_scores
from .encoders import word_embeddings
from .siamese_bimpm import BimpmMatcher, MultiPerspectiveMatching
from .siamese_blocks import FeatureAttentionPair, check_token_mask
from .siamese_cafe import CafeMatcher
from .siamese_diin import DiinMatcher
from .siamese_drcn import DrcnMatcher
from .siamese_esim import EsimMatcher
from .siamese_re2 import Re2Matcher

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
        logits (`torch.FloatTensor` of shape `(batch_size, num_labels)`):
            Regression (`num_labels == 1`): the prediction on the [0, 1] scale. Classification: unnormalised class
            scores.
        scores (`torch.FloatTensor` of shape `(batch_size,)`, *optional*, regression only):
            The prediction mapped back to the label scale, `label_min + (label_max - label_min) * logits[:, 0]`.
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

    @property
    def frozen_modules(self) -> "tuple[str, ...]":
        """The word embeddings under `freeze_embeddings` (not listed by `method_modules`)."""
        return ("embeddings",) if self.config.freeze_embeddings else ()

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
        MiniLM's 30522 x 384 WordPiece embeddings, ALBERT's vocab x 128 factorised ones); the rest of the encoder,
        including any projection of the embeddings to its hidden size, is not used."""
        pretrained = AutoModel.from_pretrained(name_or_path)
        matrix = word_embeddings(pretrained).weight
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

    @can_return_tuple
    def forward(
        self,
        input_ids: "torch.LongTensor | None" = None,
        attention_mask: "torch.LongTensor | None" = None,
        input_ids_2: "torch.LongTensor | None" = None,
        attention_mask_2: "torch.LongTensor | None" = None,
        labels: "torch.Tensor | None" = None,
        input_ids_3: "torch.LongTensor | None" = None,
        attention_mask_3: "torch.LongTensor | None" = None,
        output_internals: bool = False,
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
            input_ids_3, attention_mask_3: rejected: the matcher reads sentence pairs, not conditions.
            output_internals (`bool`, *optional*, defaults to `False`): taken by every pairzoo model; the matcher
                returns no internals, so it adds nothing here.
        """
        if input_ids_3 is not None or attention_mask_3 is not None:
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


__all__ = ["SiameseMatcherForSequenceClassification"]
