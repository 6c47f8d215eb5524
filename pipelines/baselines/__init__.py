"""Baselines on an LLM benchmark's own candidates: `llmrec baselines rank CONFIG.yaml`.

Glue between the trained recommenders (``llmrec.models`` / ``llmrec.tuning``) and a benchmark's
score task: it reads a candidates file a benchmark wrote, ranks each user's candidates with
trained models, writes predictions in the score task's contract, scores them with the SAME
score task an LLM run uses and logs each model as a run of the same MLflow experiment. It
names no benchmark: the score task and its options come from the config.
"""
