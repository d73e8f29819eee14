"""Models of every pairzoo method (one file per method)."""

from .modeling_comateformer import ComateformerForSequenceClassification as ComateformerForSequenceClassification
from .modeling_comateformer import ComateformerModel as ComateformerModel
from .modeling_cross_encoder import CrossEncoderForConditionalSimilarity as CrossEncoderForConditionalSimilarity
from .modeling_csr import CsrModel as CsrModel
from .modeling_neighbor_attention import (
    NeighborAttentionForSequenceClassification as NeighborAttentionForSequenceClassification,
)
from .modeling_seaver import SeaverForConditionalSimilarity as SeaverForConditionalSimilarity
from .modeling_siamese_matcher import (
    SiameseMatcherForSequenceClassification as SiameseMatcherForSequenceClassification,
)
