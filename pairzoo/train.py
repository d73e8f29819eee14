"""`python -m pairzoo.train --model cross-encoder --backbone minilm --dataset synthetic --output_dir out ...`"""

from .training.cli import main

if __name__ == "__main__":
    main()
