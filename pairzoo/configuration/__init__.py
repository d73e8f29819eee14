"""Configurations of every pairzoo method (one file per method, one `model_type` each)."""

from .configuration_cross_encoder import CrossEncoderConfig as CrossEncoderConfig
