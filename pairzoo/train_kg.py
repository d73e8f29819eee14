"""`python -m pairzoo.train_kg --model csr --backbone minilm --config_overrides '{"architecture": "tri"}' ...`"""

from .training.kg import main

if __name__ == "__main__":
    main()
