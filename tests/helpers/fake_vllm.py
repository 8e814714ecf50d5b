"""Objects of vLLM's documented data shapes (vllm.sequence.Logprob, vllm.outputs.CompletionOutput
and RequestOutput, SamplingParams as a bag of fields), for tests without vLLM."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Logprob:  # vllm.sequence.Logprob
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:  # vllm.outputs.CompletionOutput
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:  # vllm.outputs.RequestOutput
    request_id: str
    prompt: str
    outputs: list[CompletionOutput] = field(default_factory=list)
    finished: bool = True


class FakeSamplingParams:
    def __init__(self, **kw):
        self.__dict__.update(kw)
