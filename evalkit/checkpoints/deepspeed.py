"""DeepSpeed ZeRO checkpoint folders, through deepspeed's own merger where deepspeed is installed.

    evalkit diff base/ runs/openrlhf/ckpt/_actor --format deepspeed

Writer and reader: microsoft/DeepSpeed (`deepspeed/runtime/engine.py` `save_checkpoint`:
`global_step{N}/mp_rank_00_model_states.pt` and one `zero_pp_rank_{r}_mp_rank_00_optim_states.pt`
per data-parallel rank, `latest` naming the step; `deepspeed/utils/zero_to_fp32.py`
`get_fp32_state_dict_from_zero_checkpoint` merges the fp32 partitions). That function is
called as it is: it returns the fp32 master weights, which show updates a bf16 copy rounds
away (say so beside the figures: `notes`). It holds the whole fp32 state dict in memory, and
it unpickles the optimizer files with `weights_only=False`: read only ZeRO folders you trust.
Without deepspeed, a ZeRO folder is refused with one line naming the fix.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path

from evalkit.checkpoints.tensors import TensorEntry, bad

__all__ = ["is_deepspeed", "read_deepspeed", "NOTE"]

NOTE = ("DeepSpeed ZeRO: the fp32 master weights (deepspeed's get_fp32_state_dict_from_zero_checkpoint); "
        "they show updates that a bf16 copy of the same model rounds away")


@contextlib.contextmanager
def _quiet():
    """deepspeed's import and merger print ("Processing zero checkpoint ...", "Setting accelerator
    to CPU") to stdout, where evalkit's tables go: while they run, prints go to stderr, and its
    logger (a handler bound to the stdout of its import, deepspeed/utils/logging.py) is held at
    ERROR once it exists; lines it logs while being imported go to stderr too."""
    logger = logging.getLogger("DeepSpeed")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        logger.setLevel(level)


def is_deepspeed(folder: Path) -> bool:
    if (folder / "latest").is_file() and any(folder.glob("global_step*")):
        return True
    return any(folder.glob("*zero_pp_rank_*_optim_states.pt")) or any(folder.glob("global_step*/*_optim_states.pt"))


def read_deepspeed(folder: Path) -> dict[str, TensorEntry]:
    with _quiet():
        try:
            from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
        except ImportError:
            raise bad(folder, "a DeepSpeed ZeRO checkpoint: reading it needs deepspeed, which is not installed "
                              "(pip install deepspeed; or convert it with its zero_to_fp32.py)") from None
    from evalkit.checkpoints.pickled import Loaded
    from evalkit.checkpoints.tensors import TORCH_DTYPES

    try:
        with _quiet():
            state = get_fp32_state_dict_from_zero_checkpoint(str(folder))
    except Exception as exc:  # deepspeed's own errors: a missing step, partitions, files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise bad(folder, f"deepspeed could not merge the ZeRO checkpoint ({first[:160]})") from None
    tensors = {}
    for name, t in state.items():
        dtype = TORCH_DTYPES.get(str(t.dtype).removeprefix("torch."))
        if dtype is not None:
            tensors[name] = Loaded(str(folder), dtype, tuple(t.shape), t.detach().contiguous()).entry(name)
    return tensors
