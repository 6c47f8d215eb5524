"""`llmrec sft`: LoRA fine-tuning of HF causal LMs as Ray Train jobs, Ray Tune sweeps, weight merging."""
