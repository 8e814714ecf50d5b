"""The part of vLLM's API that evalkit calls and reads, as plain lists (nothing imported).

    make vllm-check          # tools/vllm_check.py: each entry against the newest vLLM, in its own venv

evalkit.scale.vllm_backend (`evalkit passk --backend vllm`) and evalkit.train.vllm (the trainers'
colocated engine) use exactly these names. tools/vllm_check.py checks every entry against an
installed vLLM: `inspect.signature` of `vllm.LLM` and the methods called, `EngineArgs` for the
keywords `LLM` passes on, and the real `SamplingParams`, `TokensPrompt`, `Logprob`,
`CompletionOutput` and `RequestOutput` built with these fields and parsed by evalkit's own code.
tests/helpers/fake_vllm.py builds the tests' fakes from the same lists (keyword-only, and a
SamplingParams that refuses any other field), so a fake cannot hold a field the checked vLLM
lacks, nor take one in another position. pyproject.toml's `vllm` extra pins the checked range.
"""

from __future__ import annotations

__all__ = ["LLM_KWARGS", "LLM_CALLS", "SAMPLING_PARAMS", "TOKENS_PROMPT", "LOGPROB", "COMPLETION_OUTPUT",
           "REQUEST_OUTPUT", "READ", "IMPORTS", "ENVIRONMENT", "WORKER", "CHECKED"]

# vllm.LLM(...) keywords (evalkit.scale.vllm_backend.start_engine): model, dtype, seed and the memory ones
# (engine_memory) always; the CPU build's whole prefills (whole_prefills); the trainers add the last two
LLM_KWARGS = ("model", "dtype", "seed", "gpu_memory_utilization", "kv_cache_memory_bytes", "max_model_len",
              "enable_chunked_prefill", "max_num_batched_tokens", "distributed_executor_backend",
              "worker_extension_cls")
# LLM methods called: {name: (positional arguments, keyword arguments)}
LLM_CALLS = {
    "generate": (("prompts", "sampling_params"), ("use_tqdm",)),
    "get_tokenizer": ((), ()),
    "collective_rpc": (("method",), ("args",)),
    "reset_prefix_cache": ((), ()),
}
# SamplingParams(**request): the keys of vllm_backend.build_requests' dicts
SAMPLING_PARAMS = ("n", "seed", "temperature", "top_p", "top_k", "max_tokens", "logprobs", "stop_token_ids",
                   "skip_special_tokens")
TOKENS_PROMPT = ("prompt_token_ids",)  # the prompts given to generate: {"prompt_token_ids": ids}
# the fields the fakes carry (vllm/logprobs.py Logprob, vllm/outputs.py CompletionOutput and RequestOutput)
LOGPROB = ("logprob", "rank", "decoded_token")
COMPLETION_OUTPUT = ("index", "text", "token_ids", "cumulative_logprob", "logprobs", "finish_reason", "stop_reason")
REQUEST_OUTPUT = ("request_id", "prompt", "outputs", "finished")
# what evalkit reads of each
READ = {"RequestOutput": ("outputs",), "CompletionOutput": ("token_ids", "finish_reason", "logprobs"),
        "Logprob": ("logprob",)}
IMPORTS = ("vllm.LLM", "vllm.SamplingParams", "vllm.distributed.parallel_state.cleanup_dist_env_and_memory",
           "vllm.platforms.current_platform")
# environment variables evalkit sets: an in-process engine core for the trainers (evalkit.train.vllm); on the CPU
# build the OpenMP cores, the compile cache that works there, and vLLM's log level (evalkit.scale.vllm_backend)
ENVIRONMENT = ("VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_CPU_OMP_THREADS_BIND", "VLLM_USE_AOT_COMPILE",
               "VLLM_LOGGING_LEVEL")
# the worker extension's route: worker.model_runner.model.load_weights(weights=...) (vLLM's RLHF examples)
WORKER = {"model_runner_attribute": "model", "load_weights_argument": "weights",
          "model_class": "vllm.model_executor.models.llama.LlamaForCausalLM",
          "runner_class": "vllm.v1.worker.gpu_model_runner.GPUModelRunner",
          "worker_class": "vllm.v1.worker.gpu_worker.Worker"}
CHECKED = "vllm 0.33.0: no mismatch in evalkit's calls (tools/vllm_check.py)"  # the last `make vllm-check`
