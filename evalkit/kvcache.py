"""The sampler's key/value cache: preallocated per layer, written in place, compacted rarely.

    cache = preallocate(prefill_cache, repeats=n, max_len=prompt_len + max_new_tokens)

Each layer holds its keys and values in `[rows, kv heads, max_len, head_dim]` buffers, allocated
once after the prefill; a decode step writes its position in place (`copy_` into a slice) and
attention reads a view of the positions filled so far. transformers' DynamicLayer instead grows
by `torch.cat` every step, a copy of the layer's whole cache per layer and step
(transformers/cache_utils.py, `DynamicLayer.update`). Rows whose sample has finished stay where
they are (the sampler stops drawing for them); `batch_select_indices(slots)` keeps only the given
rows, one copy of the filled positions, which the sampler does only when few rows are live
(evalkit.sampling.COMPACT_BELOW).

Why not transformers' StaticCache: its layers (`StaticLayer.update`) hand attention all max_len
positions every step, masked, so each step attends over the empty tail too, and its position
counter is a tensor (made for torch.compile). This layer returns views of the filled positions
only, and answers the Cache interface the models call: `update(key_states, value_states,
layer_idx)`, `get_seq_length()`, `get_mask_sizes(query_length, layer_idx)`.

Limits: full-attention layers only. A prefill cache with any other layer (sliding window, linear
attention, quantized) is kept as transformers made it, repeated, and compacted the same way
(`batch_select_indices`); it still grows by concatenation.
"""

from __future__ import annotations

__all__ = ["InPlaceLayer", "preallocate", "is_preallocated"]


def _layer_base():
    from transformers.cache_utils import DynamicLayer

    return DynamicLayer


class InPlaceLayer(_layer_base()):
    """One layer's keys/values in preallocated buffers; `length` positions are filled."""

    def __init__(self, keys, values, max_len: int, repeats=1):
        """Buffers of `max_len` positions holding `keys`/`values` ([rows, heads, length, dim]), each row
        repeated `repeats` times in place (as `batch_repeat_interleave(repeats)` orders them); `repeats`
        may also be a sequence, row r repeated `repeats[r]` times (as `repeat_interleave` with counts)."""
        import torch

        super().__init__()
        rows, heads, length, _ = keys.shape
        assert length <= max_len, (length, max_len)
        counts = None if isinstance(repeats, int) else torch.as_tensor(repeats, device=keys.device)
        total = rows * repeats if counts is None else int(counts.sum())
        self.device = keys.device
        self.key_buffer = torch.empty((total, heads, max_len, keys.shape[-1]), dtype=keys.dtype, device=keys.device)
        self.value_buffer = torch.empty((total, heads, max_len, values.shape[-1]), dtype=values.dtype,
                                        device=values.device)
        for buffer, filled in ((self.key_buffer, keys), (self.value_buffer, values)):
            if counts is None:
                buffer.view(rows, repeats, *buffer.shape[1:])[:, :, :, :length].copy_(filled[:, None])
            else:
                buffer[:, :, :length].copy_(filled.repeat_interleave(counts, dim=0))
        self.length, self.max_len = length, max_len
        self.is_initialized = True
        self._views()

    def _views(self) -> None:
        self.keys = self.key_buffer[:, :, : self.length]
        self.values = self.value_buffer[:, :, : self.length]

    def lazy_initialization(self, key_states, value_states) -> None:  # built filled, never lazily
        raise AssertionError("InPlaceLayer is built from a filled cache")

    def update(self, key_states, value_states, *args, **kwargs):
        """Write the new positions in place; return views of every filled position."""
        end = self.length + key_states.shape[-2]
        assert end <= self.max_len, (end, self.max_len)
        self.key_buffer[:, :, self.length : end].copy_(key_states)
        self.value_buffer[:, :, self.length : end].copy_(value_states)
        self.length = end
        self._views()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return self.max_len

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def batch_select_indices(self, indices) -> None:
        """Keep only the rows `indices`: one copy of their filled positions into new buffers."""
        import torch

        for name in ("key_buffer", "value_buffer"):
            old = getattr(self, name)
            new = torch.empty((len(indices), *old.shape[1:]), dtype=old.dtype, device=old.device)
            torch.index_select(old[:, :, : self.length], 0, indices, out=new[:, :, : self.length])
            setattr(self, name, new)
        self._views()

    def batch_repeat_interleave(self, repeats: int) -> None:
        raise AssertionError("repeat before preallocating: InPlaceLayer(keys, values, max_len, repeats)")

    def crop(self, tokens_to_remove: int) -> None:
        assert tokens_to_remove <= 0
        self.length -= abs(tokens_to_remove)
        self._views()

    def reset(self) -> None:
        self.length = 0
        self._views()


def preallocate(cache, repeats, max_len: int):
    """A cache for decoding `max_len` positions: `cache`'s rows each repeated `repeats` times (an int,
    or one count per row), in InPlaceLayers when every layer of `cache` is a plain full-attention
    DynamicLayer, else `cache` itself repeated (transformers' layers; see the module's limits)."""
    from transformers.cache_utils import Cache, DynamicLayer

    if not cache.layers or any(type(layer) is not DynamicLayer for layer in cache.layers):
        if isinstance(repeats, int):
            cache.batch_repeat_interleave(repeats)
        else:
            import torch

            counts = torch.as_tensor(repeats)
            cache.batch_select_indices(torch.arange(len(counts)).repeat_interleave(counts).to(cache.layers[0].keys.device))
        return cache
    return Cache(layers=[InPlaceLayer(layer.keys, layer.values, max_len, repeats) for layer in cache.layers])


def is_preallocated(cache) -> bool:
    """Whether `preallocate` gave InPlaceLayers (it falls back to the model's own layers)."""
    return bool(cache.layers) and all(isinstance(layer, InPlaceLayer) for layer in cache.layers)
