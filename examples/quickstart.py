"""Build a pairzoo model on the bundled MiniLM, score conditional pairs, and export it as a Hub folder.

.venv/bin/python examples/quickstart.py --output_dir outputs/quickstart
"""

import argparse

from transformers import pipeline

import pairzoo
from pairzoo.hub_cards import export_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="cross-encoder", choices=pairzoo.list_models())
    parser.add_argument("--output_dir", default="outputs/quickstart")
    args = parser.parse_args()
    model = pairzoo.create_model(args.model, backbone="minilm").eval()
    tokenizer = pairzoo.load_tokenizer("minilm")
    scorer = pipeline("conditional-similarity", model=model, tokenizer=tokenizer)
    pair = {
        "sentence1": "Two women in red jackets walk in a park.",
        "sentence2": "Two men in blue coats run on a beach.",
    }
    for condition in ("The number of people.", "The colour of the clothing."):
        print(condition, scorer({**pair, "condition": condition}))  # untrained head: fine-tune with pairzoo.train
    print("export:", export_model(model, tokenizer, args.output_dir, overwrite=True))


if __name__ == "__main__":
    main()
