"""Models of every pairzoo method (one file per method)."""

from .modeling_cross_encoder import CrossEncoderForConditionalSimilarity as CrossEncoderForConditionalSimilarity
