"""The chunk executors' shared code: a run's fixed chunks and how one chunk is sampled.

A passk run processes its problems in fixed chunks of `max(1, batch_size // n)` problems in
task order (`chunk_problems`), so a resumed run recomputes exactly the chunks it had and draws
bitwise the same samples. An executor turns chunks into samples: `LocalChunks` (one model
replica in this process) here; `evalkit.scale.ray_passk.RayChunks` and
`evalkit.scale.vllm_backend.VllmChunks` elsewhere, all with the interface of `LocalChunks`.

Float results on CPU depend on torch's thread count, so the sampler runs with a fixed
`threads` (recorded as `cpu_threads` in run.json).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from evalkit.options import PasskOptions
from evalkit.sampling import SamplingConfig

__all__ = ["cpu_threads", "chunk_problems", "LocalChunks", "sampling_config", "draw_chunk"]


def cpu_threads(opts: PasskOptions, device: str) -> int | None:
    """The intra-op thread count the samples depend on (None off CPU)."""
    import torch

    if not device.startswith("cpu"):
        return None
    return opts.threads or torch.get_num_threads()


def chunk_problems(problems: Sequence, opts: PasskOptions) -> list:
    """The run's fixed chunks: `max(1, batch_size // n)` problems each, in task order."""
    size = max(1, opts.batch_size // opts.n)
    return [problems[start : start + size] for start in range(0, len(problems), size)]


class LocalChunks:
    """One model replica in this process; samples chunks in order.

    An executor has `tokenizer`, `sampling` (the settings that shape the
    samples, for run.json), `extra` (fields added to every sample record),
    `map(jobs)` yielding `(chunk index, {(problem id, j): (text, Sample)})`
    for `jobs = [(chunk index, problems)]` in any order, and `close()`.
    """

    def __init__(self, ref, opts: PasskOptions, device: str):
        import torch

        from evalkit.models import load_model
        from evalkit.sampling import stop_token_ids

        self.threads_before = torch.get_num_threads()
        if threads := cpu_threads(opts, device):
            torch.set_num_threads(threads)
        self.model, self.tokenizer = load_model(ref, dtype=opts.dtype, device=device)
        self.stop = stop_token_ids(self.model, self.tokenizer)
        self.cfg = sampling_config(opts)
        self.sampling = self.cfg.effective()
        self.extra: dict = {}

    def map(self, jobs) -> Iterator[tuple[int, dict]]:
        for index, part in jobs:
            yield index, draw_chunk(self.model, self.tokenizer, part, self.cfg, self.stop)

    def close(self) -> None:
        import torch

        torch.set_num_threads(self.threads_before)


def sampling_config(opts: PasskOptions) -> SamplingConfig:
    return SamplingConfig(opts.n, opts.temperature, opts.top_p, opts.max_new_tokens, opts.seed)


def draw_chunk(model, tokenizer, part, cfg: SamplingConfig, stop) -> dict:
    """{(problem id, j): (completion text, Sample)} for one chunk of problems."""
    from evalkit.sampling import decode_completion, sample_problems

    samples = sample_problems(model, tokenizer, part, cfg, stop_ids=stop)
    return {(part[s.problem_index].id, s.sample_index): (decode_completion(tokenizer, s.token_ids), s) for s in samples}
