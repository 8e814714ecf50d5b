"""Samples someone else generated, as an ordinary evalkit run folder.

    from evalkit.importers import ImportOptions, run_import
    summary = run_import("lm-eval", Path("out/model/samples_gsm8k_2025.jsonl"), Path("runs/lm"), ImportOptions())

One module per format, each with `read(path, opts) -> Imported` and its writer's source file
cited in its docstring: lm_eval (lm-evaluation-harness `--log_samples`), lighteval (details
parquet), verl (rollout/validation dumps, main_generation parquet), trl (GRPO completions
parquet), opencompass (predictions json), evalscope (reviews jsonl), vllm_jsonl (RequestOutput-
shaped JSONL), generic (any JSONL/CSV with named fields). `run` matches, grades and writes.
"""

from evalkit.importers.base import Imported, ImportOptions
from evalkit.importers.run import FORMATS, run_import

__all__ = ["FORMATS", "ImportOptions", "Imported", "run_import"]
