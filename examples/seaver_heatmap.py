"""Draw SEAVER's reweighting W_S next to the last-layer attention for one example (paper Figures 4 and 6).

    python -m examples.seaver_heatmap outputs/seaver/export --output /tmp/seaver.png \
        --sentence1 "A man in a red shirt rides a bike." --sentence2 "A woman walks a dog." --condition "The gender."

The export folder is what `python -m pairzoo.train --model seaver ...` writes (`<output_dir>/export`); it is loaded
with `trust_remote_code`. `--baseline_export` (a trained cross-encoder export) supplies the attention panel instead
of the SEAVER encoder's own attention.
"""

import argparse

from transformers import AutoModel, AutoTokenizer

from pairzoo.visualize import plot_seaver_reweighting, seaver_attention_maps


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export_dir", help="export folder of a trained SEAVER model")
    parser.add_argument("--sentence1", required=True)
    parser.add_argument("--sentence2", default=None, help="omit for conditional classification (e.g. ABSA)")
    parser.add_argument("--condition", required=True)
    parser.add_argument("--output", required=True, help="PNG file to write")
    parser.add_argument("--baseline_export", default=None, help="export folder of a trained cross-encoder")
    parser.add_argument("--max_length", type=int, default=None)
    args = parser.parse_args(argv)

    model = AutoModel.from_pretrained(args.export_dir, trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(args.export_dir)
    baseline = (
        AutoModel.from_pretrained(args.baseline_export, trust_remote_code=True) if args.baseline_export else None
    )
    maps = seaver_attention_maps(
        model, tokenizer, args.sentence1, args.sentence2, args.condition, baseline, max_length=args.max_length
    )
    title = f"condition: {args.condition}"
    print(plot_seaver_reweighting(maps, args.output, title=title))


if __name__ == "__main__":
    main()
