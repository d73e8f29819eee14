#!/usr/bin/env bash
# Fine-tune a pairzoo model on the official C-STS CSVs (csts_train.csv, csts_validation.csv; not shipped here).
#   bash examples/train_csts.sh /path/to/c-sts/data cross-encoder minilm
# Several GPUs or nodes: replace `.venv/bin/python -m` by `accelerate launch -m` with the same flags.
set -euo pipefail
CSTS_DIR=${1:?folder with csts_train.csv and csts_validation.csv}
MODEL=${2:-cross-encoder}
BACKBONE=${3:-minilm}
.venv/bin/python -m pairzoo.train \
  --model "$MODEL" --backbone "$BACKBONE" --dataset csts --csts_path "$CSTS_DIR" \
  --output_dir "outputs/csts-$MODEL" --max_length 512 --num_train_epochs 3 \
  --per_device_train_batch_size 4 --gradient_accumulation_steps 8 --learning_rate 1e-5 --weight_decay 0.1 \
  --lr_scheduler_type linear --warmup_steps 0.1 --eval_strategy epoch --save_strategy epoch --save_total_limit 1 \
  --seed 42
