import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """Folder of a tiny random fp32 Llama with a char tokenizer and chat template."""
    from helpers.tinymodel import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def builtin_model():
    """The built-in model's checkpoint folder, converted before any test captures output: on a
    fresh machine the one-time conversion prints a line that would join the first test's output."""
    from evalkit.models import resolve_model

    return resolve_model("smollm2-135m").path
