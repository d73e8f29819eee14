"""Configurations of every pairzoo method (one file per method, one `model_type` each)."""

from .configuration_comateformer import ComateformerConfig as ComateformerConfig
from .configuration_cross_encoder import CrossEncoderConfig as CrossEncoderConfig
from .configuration_csr import CsrConfig as CsrConfig
from .configuration_neighbor_attention import NeighborAttentionConfig as NeighborAttentionConfig
from .configuration_seaver import SeaverConfig as SeaverConfig
from .configuration_siamese_matcher import SiameseMatcherConfig as SiameseMatcherConfig
