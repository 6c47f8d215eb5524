#!/usr/bin/env bash
# The SFT demos, as a sequence of ordinary llmrec commands (each one can be run by hand).
#   tuning/sft/demo.sh perrecbench   # point/pair/list adapters, merged, 5 evaluations
#   tuning/sft/demo.sh prefeval      # source answers, export, adapter, base vs adapter on held-out topics
# Needs the `cpu` and `sft` extras and LLMREC_DATA_DIR (ml-100k/, prefeval/). Timings: docs/sft.md.
set -euo pipefail
LLMREC=${LLMREC:-.venv/bin/llmrec}
step() { echo "== $(date -u +%T) $*" >&2; }

perrecbench() {
  local out=runs/sft-demo/perrecbench
  step export-sft
  $LLMREC perrecbench export-sft configs/sft_perrecbench_eval.yaml --out sft/perrecbench --per-level 12
  for fmt in point pair list; do
    step "sft $fmt"
    $LLMREC sft configs/sft_perrecbench_demo.yaml --set data.train=sft/perrecbench/$fmt/train.jsonl \
      --set data.valid=sft/perrecbench/$fmt/valid.jsonl --set output.run_name=$fmt
  done
  step merge
  $LLMREC sft merge --base embedded --input $out/point/adapter --weight 0.3333333333 \
    --input $out/pair/adapter --weight 0.3333333333 --input $out/list/adapter --weight 0.3333333334 \
    --out $out/merged
  step "eval base"
  $LLMREC run configs/sft_perrecbench_eval.yaml --set output.run_name=eval-base
  for fmt in point pair list; do
    step "eval $fmt"
    $LLMREC run configs/sft_perrecbench_eval.yaml --set engine.adapter=$out/$fmt/adapter --set output.run_name=eval-$fmt
  done
  step "eval merged"
  $LLMREC run configs/sft_perrecbench_eval.yaml --set engine.model=$out/merged --set output.run_name=eval-merged
}

prefeval() {
  local out=runs/sft-demo/prefeval
  step "source answers"
  $LLMREC run configs/sft_prefeval_source_demo.yaml
  step export-sft
  $LLMREC prefeval export-sft --run $out/source --out sft/prefeval --turns 0 --turns 5
  step sft
  $LLMREC sft configs/sft_prefeval_demo.yaml
  step "eval base"
  $LLMREC run configs/sft_prefeval_eval.yaml --set output.run_name=eval-base
  step "eval adapter"
  $LLMREC run configs/sft_prefeval_eval.yaml --set engine.adapter=$out/adapter/adapter --set output.run_name=eval-adapter
}

"${1:?usage: tuning/sft/demo.sh perrecbench|prefeval}"
step done
