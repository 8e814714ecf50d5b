import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """Folder of a tiny random fp32 Llama with a char tokenizer and chat template."""
    from tinymodel import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
