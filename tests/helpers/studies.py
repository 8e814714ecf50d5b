"""The smallest valid study file, for tests that plan or run one (test_study, test_interpolate)."""

TOY_STUDY = """
title = "t"
base_model = "{base}"
[train_task]
name = "arith"
size = 20
[eval_task]
seed = 1
limit = 3
[budget]
per_method = 16
[methods.es]
population = 2
prompts_per_iteration = 4
max_new_tokens = 8
[methods.grpo]
group_size = 4
prompts_per_step = 2
max_new_tokens = 8
[evaluations.passk]
n = 2
k = [1, 2]
max_new_tokens = 8
"""


def toy_study(base: str = "smollm2-135m", extra: str = "") -> str:
    """TOY_STUDY on `base`, with `extra` TOML tables appended."""
    return TOY_STUDY.replace("{base}", str(base)) + extra
