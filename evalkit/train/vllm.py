"""vLLM sampling for the trainers: a colocated engine that follows the HF model's weights.

    evalkit train grpo --backend vllm --device cuda --out runs/grpo-vllm --steps 50
    evalkit train es --backend vllm --device cuda --out runs/es-vllm --iterations 50
    evalkit train es-grpo --backend vllm --device cuda --out runs/es-grpo   # both stages

What runs where (TRL's `vllm_mode="colocate"`): one `vllm.LLM` in the
trainer's own process, on the same GPU, samples each step's groups; the
loss, the log-probs it needs (old, reference, current) and the optimizer stay
in the Hugging Face model, as in TRL. After every `grpo_update` the HF
model's `state_dict()` is pushed into the engine and its prefix cache reset,
so the next step samples from the updated policy (and no prompt's cached
keys/values from the old weights are reused).

Requests (identical to `evalkit passk --backend vllm`, built by
`vllm_backend.build_requests`): one per (problem, sample j), `n=1`, seed
`sample_seed(step seed, problem id, j)`, `temperature`, `top_p`, `top_k=-1`,
`max_tokens`, `stop_token_ids` = the HF path's `stop_token_ids(model, tok)`,
`logprobs=ENTROPY_TOPK`. Prompts go in as token ids
(`{"prompt_token_ids": ids}`, vLLM's TokensPrompt) tokenized exactly as the
loss sees them (`add_special_tokens=False`), so vLLM adds no BOS the loss
would not see. Outputs are parsed by `vllm_backend.parse_completion` into the
HF path's `Sample`s (stop token counted, dropped, then re-appended as eos by
`grpo._sample_groups`, exactly as for HF samples), graded by the same scorer.

Entropy: the `entropy` metric is vLLM's truncated top-k bound
(`-sum_{top-k} p log p` <= the exact entropy; docs/references.md "Token
entropy"), and each metrics line says `entropy_kind: "topk_lower_bound"`.

Weight push, the route documented for the `vllm` extra (`vllm>=0.8`, the V1
engine): the engine is built with `distributed_executor_backend=
"external_launcher"` (its worker lives in this process, as TRL's colocate
mode builds it: RANK/LOCAL_RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set for a
world of 1) and `worker_extension_cls=WeightSyncExtension`; weights go in by
`llm.collective_rpc("evalkit_load_weights", args=(named_tensors,))`, whose
worker-side method calls `self.model_runner.model.load_weights(weights)`
(vLLM's own loader: it fuses q/k/v and gate/up and skips a tied lm_head),
then `llm.reset_prefix_cache()`. Sources: vLLM
examples/offline_inference/rlhf_utils.py (`WorkerExtension`,
`ColocateWorkerExtension`: `self.model_runner.model.load_weights`) and
rlhf_colocate.py (`worker_extension_cls`, `collective_rpc`), docs
https://docs.vllm.ai/en/v0.8.3/getting_started/examples/rlhf_utils.html;
TRL trl/trainer/grpo_trainer.py `_move_model_to_vllm` (colocate:
`llm.llm_engine.model_executor.driver_worker.model_runner.model.load_weights`,
then `llm.reset_prefix_cache()`), whose pre-V1 path `collective_rpc` replaces.

Limits: never run against a real engine (no GPU here): tested with an engine of `vllm.LLM`'s
shape, built from evalkit.scale.vllm_surface's lists, which `make vllm-check` checks against
the newest vLLM release (its own virtual environment; vLLM's CUDA torch never enters .venv).
Samples differ from the HF backend's (other kernels, other random streams),
so `backend` is part of the run's identity in run.json and resuming with the
other backend is refused. GPU memory: the engine takes
`VLLM_GPU_MEMORY` of the GPU (TRL's colocate default 0.3); the HF model,
its gradients and AdamW states need the rest.

ES (`evalkit train es --backend vllm`, and es-grpo's ES stage): the HF model
on the GPU stays the master copy. `evalkit.train.es` perturbs it, restores it
exactly (fix-ups, checksums) and applies `es_update_` unchanged, so seeds,
noise and weights are those of the HF backend. Only scoring moves: for each
member, after `perturb_`, `fitness_sampler` pushes the perturbed weights
into the engine (the push above, prefix cache reset) and generates greedily
(`temperature=0`, `n=1` per prompt, `max_tokens`, the stop ids), then
`restore_` runs on the HF model; after the update the next member's push
brings the engine up to date. Fitness is the same mean 0/1 reward from the
same scorer; samples are parsed into `Sample`s as above, so metrics.jsonl's
`completions/*` hold, and `entropy` is the top-k bound (`entropy_kind`).
Greedy completions can still differ from the HF backend's where two logits
nearly tie (other kernels), so fitnesses, and hence updates, may differ.
Costs, honestly: a second copy of the weights lives in the engine (plus its
KV cache), so ES's inference-sized memory (one model, no optimizer) holds for
the HF backend, not this one; and every member costs one full weight push
(`state_dict()` through `load_weights`), population pushes per iteration.
Checkpoints are saved from the HF model. `--workers` (Ray) with `--backend
vllm` is refused.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from evalkit.sampling import Sample, SamplingConfig
from evalkit.scale.vllm_backend import ENTROPY_KIND

__all__ = [
    "ENTROPY_KIND",
    "ENTROPY_TOPK",
    "VLLM_GPU_MEMORY",
    "check_vllm_backend",
    "WeightSyncExtension",
    "VllmPolicySampler",
]

ENTROPY_TOPK = 20  # top-k logprobs per token for the entropy bound (vLLM's default max_logprobs)
VLLM_GPU_MEMORY = 0.3  # fraction of the GPU the colocated engine may take (TRL colocate default)
EXTENSION = "evalkit.train.vllm.WeightSyncExtension"


def check_vllm_backend(device: str) -> None:
    """Refuse early (before any run folder or stage is made): vLLM missing, or built for another
    device than `device` (its CPU build runs on --device cpu, its CUDA build on cuda)."""
    from evalkit.scale.vllm_backend import check_engine_device, import_vllm

    check_engine_device(import_vllm(), str(device))


class WeightSyncExtension:
    """Mixed into vLLM's worker class by `worker_extension_cls`; called by `collective_rpc`."""

    def evalkit_load_weights(self, weights) -> int:
        """Load (name, tensor) pairs; returns how many came in. The model runner's
        `reload_weights` (vLLM 0.32 and later; vllm/model_executor/model_loader/reload/inplace.py)
        loads checkpoint-format tensors layer by layer and redoes each layer's weight processing,
        which the CPU build needs (its linear layers repack their weights after loading, and the
        repacked parameters have no `weight_loader`); older vLLM: the model's own `load_weights`."""
        weights = list(weights)
        reload = getattr(self.model_runner, "reload_weights", None)
        if reload is not None:
            reload(weights_iterator=iter(weights), is_checkpoint_format=True)
        else:
            self.model_runner.model.load_weights(weights=weights)
        return len(weights)


def _launcher_env() -> None:
    """A world of one process for `external_launcher`, as TRL sets it in colocate mode."""
    import socket

    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1")):
        os.environ.setdefault(key, value)
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(sock.getsockname()[1])
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine core in this process


class VllmPolicySampler:
    """The colocated engine: `sample` draws GRPO groups, `push` loads the policy's weights,
    `fitness_sampler` scores ES members."""

    def __init__(self, weights_folder: str, opts, tokenizer, stop_ids: Sequence[int], device: str):
        """`weights_folder`: the folder the HF policy was loaded from (start model or checkpoint)."""
        from evalkit.scale.vllm_backend import import_vllm, start_engine

        vllm = import_vllm()
        _launcher_env()
        self.vllm = vllm
        self.tokenizer = tokenizer
        self.stop = sorted(set(stop_ids))
        seqs = min(opts.completions_per_unit(), 256)  # ES scores one member's prompts at a time: fewer
        self.llm, self.engine = start_engine(
            vllm, weights_folder, opts, device, seqs, gpu_share=VLLM_GPU_MEMORY,
            distributed_executor_backend="external_launcher", worker_extension_cls=EXTENSION,
        )
        self.pushes = 0

    def sample(self, prompts: Sequence[str], problems, cfg: SamplingConfig, stop) -> list[Sample]:
        """cfg.n samples per rendered prompt, as `sample_chunk` returns them (same order, seeds)."""
        from evalkit.scale.vllm_backend import build_requests, parse_completion, token_prompts

        requests = build_requests([p.id for p in problems], cfg, logprobs=ENTROPY_TOPK, stop_ids=stop)
        inputs = token_prompts(self.tokenizer, prompts, cfg.n)
        params = [self.vllm.SamplingParams(**r) for r in requests]
        outputs = self.llm.generate(inputs, params, use_tqdm=False)
        samples = []
        for r, (request, out) in enumerate(zip(requests, outputs, strict=True)):
            i, j = divmod(r, cfg.n)
            samples.append(parse_completion(out.outputs[0], i, j, request["seed"], stop, self.tokenizer)[1])
        return samples

    def push(self, model) -> None:
        """Load the policy's current weights into the engine and drop its stale prefix cache."""
        weights = list(model.state_dict().items())
        loaded = self.llm.collective_rpc("evalkit_load_weights", args=(weights,))
        if not loaded or any(n != len(weights) for n in loaded):
            raise RuntimeError(f"vLLM weight push: sent {len(weights)} tensors, workers took {loaded}")
        self.llm.reset_prefix_cache()
        self.pushes += 1

    def close(self) -> None:
        """Free the engine and its memory (es-grpo builds another one for its GRPO stage)."""
        from evalkit.scale.vllm_backend import close_engine

        llm, self.llm = self.llm, None
        close_engine(llm)

    def fitness_sampler(self, model):
        """ES's `sampler=`: push `model`'s current (perturbed) weights, then sample.

        evalkit.train.es.member_fitness calls it once per member, after `perturb_`
        and before `restore_`, so the engine scores exactly the member's weights."""

        def sample(prompts: Sequence[str], problems, cfg: SamplingConfig, stop) -> list[Sample]:
            self.push(model)
            return self.sample(prompts, problems, cfg, stop)

        return sample
