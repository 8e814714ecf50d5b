"""The safetensors reader's old home: it moved into `evalkit.checkpoints` (one reader for every
format). These names stay importable from here.

    from evalkit.safetensors_io import ChunkReader, open_checkpoint, read_header
"""

from evalkit.checkpoints import open_checkpoint
from evalkit.checkpoints.safetensors import INDEX, MAX_HEADER, read_header
from evalkit.checkpoints.tensors import (
    CASTS,
    DTYPES,
    FLOATS,
    MODULE_KINDS,
    Checkpoint,
    ChunkReader,
    TensorEntry,
    cast_bits,
    layer_index,
    module_kind,
    to_values,
    value_dtype,
)

__all__ = ["DTYPES", "FLOATS", "CASTS", "INDEX", "MAX_HEADER", "TensorEntry", "Checkpoint", "read_header",
           "open_checkpoint", "ChunkReader", "to_values", "cast_bits", "value_dtype", "MODULE_KINDS",
           "module_kind", "layer_index"]
