"""Training: data loaders, the synthetic generator, collators, metrics and the `Trainer`-based CLI."""
