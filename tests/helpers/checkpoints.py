"""Checkpoints written by hand for evalkit diff: safetensors files with planted changes."""

import json

import numpy as np

SHAPES = {
    "model.embed_tokens.weight": (64, 16),
    "model.layers.0.self_attn.q_proj.weight": (16, 16),
    "model.layers.0.mlp.down_proj.weight": (16, 32),
    "model.layers.0.input_layernorm.weight": (16,),
    "model.layers.1.self_attn.q_proj.weight": (16, 16),
    "model.layers.1.mlp.down_proj.weight": (16, 32),
    "model.norm.weight": (16,),
    "lm_head.weight": (64, 16),
}
# planted: tensor -> (flat positions, update magnitude); planted entries sit at 1.0 in the base
PLAN = {
    "model.layers.0.self_attn.q_proj.weight": ([0, 5, 255], 0.5),
    "model.layers.1.mlp.down_proj.weight": (list(range(100, 140)), 0.25),
    "model.norm.weight": ([3], 2.0**-7),  # one bf16 ulp at 1.0
    "lm_head.weight": ([7, 700, 1023], -0.5),
}
CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 16,
          "num_hidden_layers": 2, "vocab_size": 64, "tie_word_embeddings": False}


def to_bits(values: np.ndarray, dtype: str) -> np.ndarray:
    f32 = values.astype(np.float32)
    return (f32.view(np.uint32) >> 16).astype(np.uint16) if dtype == "BF16" else f32


def write_st(path, tensors: dict, metadata=None) -> None:
    """A safetensors file written by hand: {name: (dtype, array of raw values or bits)}."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def base_values(dtype: str, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    values = {}
    for name, shape in SHAPES.items():
        v = (rng.standard_normal(shape) * 0.02).astype(np.float32)
        if dtype == "BF16":  # make every value exact in bf16
            v = (to_bits(v, "BF16").astype(np.uint32) << 16).view(np.float32)
        if name in PLAN:
            v.reshape(-1)[PLAN[name][0]] = 1.0
        values[name] = v
    return values


def planted(values: dict) -> dict:
    out = {name: v.copy() for name, v in values.items()}
    for name, (pos, m) in PLAN.items():
        out[name].reshape(-1)[pos] += m
    return out


def save(folder, values: dict, dtype: str, shards: int = 1, config=CONFIG):
    """A checkpoint folder, single file or `shards` files with an index."""
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    names = list(values)
    if shards == 1:
        write_st(folder / "model.safetensors", {n: (dtype, to_bits(values[n], dtype)) for n in names})
        return folder
    weight_map = {}
    for i in range(shards):
        shard = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = names[i::shards]  # interleaved: a different grouping than the other side
        write_st(folder / shard, {n: (dtype, to_bits(values[n], dtype)) for n in part})
        weight_map.update(dict.fromkeys(part, shard))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return folder
