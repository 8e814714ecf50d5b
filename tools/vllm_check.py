"""Check every vLLM call evalkit makes against an installed vLLM (`make vllm-check`).

    make vllm-check                                   # newest vLLM into build/venv-vllm, then this
    build/venv-vllm/bin/python tools/vllm_check.py    # this alone, in any environment that has vLLM

Runs on a CPU machine: vLLM is imported, never started. What is checked, each entry of
evalkit.scale.vllm_surface (the lists evalkit's code and the tests' fakes use):
- the imports resolve; the environment variables are ones vLLM reads (vllm/envs.py);
- `vllm.LLM(...)` takes every keyword evalkit passes (its own parameters, or EngineArgs fields
  through its **kwargs), with evalkit's values allowed by their Literal types (dtype
  "float32", distributed_executor_backend "external_launcher");
- each LLM method evalkit calls has the arguments evalkit passes, by position and by name
  (`inspect.signature`);
- the real `SamplingParams(**request)` accepts evalkit's `build_requests` output (a 63-bit
  hashed seed, top_k=-1) and keeps each value; a `token_prompts` prompt is a valid `TokensPrompt`;
- the fakes' fields (Logprob, CompletionOutput, RequestOutput) are constructor parameters of
  the real classes; real objects built by keyword are parsed by evalkit's `parse_completion`
  and `topk_entropy` to the values a hand computation gives;
- the trainers' weight-push route: the model class's `load_weights(weights)`, the runner's
  `model` attribute, no clash of the extension's method with vLLM's worker.
Prints one line per check (`ok`, `MISMATCH`, or `skip` with the reason) and a last line naming
the vLLM version and the first mismatch; exits 1 on any mismatch.
"""

from __future__ import annotations

import importlib
import inspect
import math
import sys
import typing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # evalkit from this checkout, not installed

from evalkit.scale import vllm_surface as surface  # noqa: E402

RESULTS: list[tuple[str, str, str]] = []  # (status, check, detail)


def check(name: str, ok: bool, detail: str = "") -> None:
    RESULTS.append(("ok" if ok else "MISMATCH", name, detail))


def skip(name: str, reason: str) -> None:
    RESULTS.append(("skip", name, reason))


def resolve(dotted: str):
    """The object a dotted name names (module attributes after the longest importable module)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def literal_allows(annotation, value) -> bool | None:
    """Whether a (possibly nested Union of) Literal annotation allows `value`; None if no Literal in it."""
    if typing.get_origin(annotation) is typing.Literal:
        return value in typing.get_args(annotation)
    found = [literal_allows(a, value) for a in typing.get_args(annotation)]
    found = [f for f in found if f is not None]
    if not found:
        return None
    other = [a for a in typing.get_args(annotation) if typing.get_origin(a) is not typing.Literal]
    return any(found) or any(a is str or a is typing.Any for a in other)


def check_imports() -> None:
    for name in surface.IMPORTS:
        try:
            resolve(name)
            check(f"import {name}", True)
        except (ImportError, AttributeError) as exc:
            check(f"import {name}", False, repr(exc))
    import vllm.envs as envs

    known = set(getattr(envs, "environment_variables", {})) | set(dir(envs))
    for var in surface.ENVIRONMENT:
        check(f"environment variable {var}", var in known, "" if var in known else "not in vllm.envs")


def check_llm() -> None:
    import dataclasses

    import vllm
    from vllm.config import ParallelConfig
    from vllm.engine.arg_utils import EngineArgs

    params = inspect.signature(vllm.LLM.__init__).parameters
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
    engine = {f.name: f for f in dataclasses.fields(EngineArgs)}
    for kw in surface.LLM_KWARGS:
        ok = kw in params or (takes_kwargs and kw in engine)
        where = "LLM parameter" if kw in params else "EngineArgs field via **kwargs" if ok else "neither"
        check(f"LLM({kw}=...)", ok, where)
    values = {"dtype": ("float32", params.get("dtype")),
              "distributed_executor_backend": ("external_launcher", _field(ParallelConfig, "distributed_executor_backend"))}
    for kw, (value, where) in values.items():
        annotation = getattr(where, "annotation", getattr(where, "type", None))
        allowed = literal_allows(annotation, value) if annotation is not None else None
        if allowed is None:
            skip(f"LLM({kw}={value!r}) allowed", f"no Literal annotation ({annotation!r})")
        else:
            check(f"LLM({kw}={value!r}) allowed", allowed, str(annotation))
    for method, (positional, keywords) in surface.LLM_CALLS.items():
        fn = getattr(vllm.LLM, method, None)
        if fn is None:
            check(f"LLM.{method}", False, "no such method")
            continue
        sig = list(inspect.signature(fn).parameters.values())[1:]  # after self
        pos = [p.name for p in sig if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = {p.name for p in sig if p.kind is not p.POSITIONAL_ONLY}
        ok = pos[: len(positional)] == list(positional) and all(k in names for k in keywords)
        check(f"LLM.{method}{tuple(positional) + tuple(keywords)}", ok, f"signature {inspect.signature(fn)}")


def _field(cls, name):
    import dataclasses

    return next((f for f in dataclasses.fields(cls) if f.name == name), None)


def check_requests() -> None:
    import vllm

    from evalkit.sampling import SamplingConfig
    from evalkit.scale.vllm_backend import build_requests, token_prompts

    params = inspect.signature(vllm.SamplingParams).parameters
    for name in surface.SAMPLING_PARAMS:
        check(f"SamplingParams({name}=...)", name in params)
    cfg = SamplingConfig(n=2, temperature=0.7, top_p=0.9, max_new_tokens=33, seed=5)
    requests = build_requests(["p0"], cfg, logprobs=20, stop_ids=[2, 7])
    check("build_requests' keys are vllm_surface.SAMPLING_PARAMS", all(set(r) == set(surface.SAMPLING_PARAMS)
                                                                      for r in requests))
    try:
        built = [vllm.SamplingParams(**r) for r in requests]
        kept = all(getattr(b, k) == v for b, r in zip(built, requests, strict=True) for k, v in r.items())
        check("SamplingParams(**build_requests(...)) keeps every value (63-bit seed, top_k=-1)", kept,
              f"seed {requests[0]['seed']}")
    except Exception as exc:  # noqa: BLE001 (any refusal is the finding)
        check("SamplingParams(**build_requests(...))", False, repr(exc))
    greedy = build_requests(["p0"], SamplingConfig(n=1, temperature=0.0, max_new_tokens=4), logprobs=20, stop_ids=[2])
    try:
        vllm.SamplingParams(**greedy[0])
        check("SamplingParams(temperature=0, ...) (ES's greedy fitness)", True)
    except Exception as exc:  # noqa: BLE001
        check("SamplingParams(temperature=0, ...)", False, repr(exc))
    prompts = token_prompts(_Tokenizer(), ["abc"], 2)
    tokens_prompt = resolve("vllm.inputs.TokensPrompt") if _has("vllm.inputs.TokensPrompt") else vllm.TokensPrompt
    keys = set(typing.get_type_hints(tokens_prompt)) if hasattr(tokens_prompt, "__annotations__") else set()
    required = set(getattr(tokens_prompt, "__required_keys__", set()))
    check("token_prompts' keys are TokensPrompt keys, its required keys included",
          all(set(p) <= keys and required <= set(p) for p in prompts) and set(surface.TOKENS_PROMPT) <= keys,
          f"TokensPrompt keys {sorted(keys)}, required {sorted(required)}")


def _has(dotted: str) -> bool:
    try:
        resolve(dotted)
        return True
    except (ImportError, AttributeError):
        return False


class _Tokenizer:
    """Token ids 11.. for letters; enough for evalkit's prompt building and decoding."""

    def __call__(self, text, add_special_tokens):
        assert add_special_tokens is False
        return {"input_ids": [11 + ord(c) - ord("a") for c in text]}

    def decode(self, ids, skip_special_tokens):
        return "".join(chr(ord("a") + i - 11) for i in ids)


def check_outputs() -> None:
    from vllm.logprobs import Logprob
    from vllm.outputs import CompletionOutput, RequestOutput

    from evalkit.scale.vllm_backend import parse_completion

    for cls, fields in ((Logprob, surface.LOGPROB), (CompletionOutput, surface.COMPLETION_OUTPUT),
                        (RequestOutput, surface.REQUEST_OUTPUT)):
        params = inspect.signature(cls).parameters
        missing = [f for f in fields if f not in params]
        check(f"{cls.__name__} has the fakes' fields {fields}", not missing, f"missing {missing}" if missing else "")
        extra = [n for n, p in params.items() if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
                 and n not in fields]
        if extra:
            skip(f"{cls.__name__}: required fields the fakes do not carry", f"{extra} (evalkit does not read them)")
    lps = [{11: Logprob(logprob=-0.5, rank=1, decoded_token="a"), 12: Logprob(logprob=-1.5, rank=2, decoded_token="b")},
           {2: Logprob(logprob=-0.1, rank=1, decoded_token="</s>")}]
    done = CompletionOutput(index=0, text="a", token_ids=[11, 2], cumulative_logprob=-0.6, logprobs=lps,
                            finish_reason="stop", stop_reason=None)
    out = RequestOutput(request_id="0", prompt=None, prompt_token_ids=[1, 2], prompt_logprobs=None, outputs=[done],
                        finished=True)
    text, sample = parse_completion(out.outputs[0], 0, 1, 99, [2], _Tokenizer())
    by_hand = (-(math.exp(-0.5) * -0.5 + math.exp(-1.5) * -1.5) - math.exp(-0.1) * -0.1) / 2
    check("parse_completion(real CompletionOutput): stop token counted, dropped; entropy bound",
          (text, sample.token_ids, sample.num_tokens, sample.finish_reason) == ("a", (11,), 2, "stop")
          and math.isclose(sample.mean_entropy, by_hand, rel_tol=1e-12), f"{text!r} {sample}")
    for cls, names in (("RequestOutput", surface.READ["RequestOutput"]),
                       ("CompletionOutput", surface.READ["CompletionOutput"]), ("Logprob", surface.READ["Logprob"])):
        obj = {"RequestOutput": out, "CompletionOutput": done, "Logprob": lps[0][11]}[cls]
        check(f"{cls} has the attributes evalkit reads {names}", all(hasattr(obj, n) for n in names))


def check_worker() -> None:
    from evalkit.train.vllm import EXTENSION, WeightSyncExtension

    route = surface.WORKER
    for key in ("model_class", "runner_class", "worker_class"):
        try:
            cls = resolve(route[key])
        except Exception as exc:  # noqa: BLE001 (CUDA-only modules may not import on CPU)
            skip(f"{key} {route[key]}", f"not importable here: {exc!r}"[:200])
            continue
        if key == "model_class":
            params = inspect.signature(cls.load_weights).parameters
            check(f"{route[key]}.load_weights({route['load_weights_argument']}=...)",
                  route["load_weights_argument"] in params, str(inspect.signature(cls.load_weights)))
        elif key == "runner_class":
            source = inspect.getsource(cls)
            check(f"{route[key]} sets self.{route['model_runner_attribute']}",
                  f"self.{route['model_runner_attribute']} =" in source or
                  f"self.{route['model_runner_attribute']}:" in source)
        else:
            clash = [m for m in vars(WeightSyncExtension) if not m.startswith("_") and hasattr(cls, m)]
            check(f"{EXTENSION}'s methods do not clash with {route[key]}", not clash, f"clash {clash}")


def main() -> int:
    import vllm

    for step in (check_imports, check_llm, check_requests, check_outputs, check_worker):
        try:
            step()
        except Exception as exc:  # noqa: BLE001 (a step that cannot run is a mismatch, named)
            check(step.__name__, False, f"raised {exc!r}")
    for status, name, detail in RESULTS:
        print(f"{status:8s} {name}" + (f"  [{detail}]" if detail else ""))
    bad = [r for r in RESULTS if r[0] == "MISMATCH"]
    skipped = sum(r[0] == "skip" for r in RESULTS)
    first = f"first mismatch: {bad[0][1]} [{bad[0][2]}]" if bad else "no mismatch"
    print(f"vllm {vllm.__version__}: {len(RESULTS)} checks, {len(bad)} mismatches, {skipped} skipped; {first}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
