"""End to end on the real default model (SmolLM2-135M-Instruct): against
itself no difference and zero KL; against a perturbed copy, outcomes flip
and the KL is positive. Kept small: a few multiple-choice items, 3 KL prompts."""

import json
import shutil

import pytest

from evalkit.forgetting.runner import ForgettingOptions, run_forgetting

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("builtin_model")]

EASY = [
    ("The capital of France is", ["Paris", "a banana", "seven"], 0),
    ("Water freezes at a temperature of zero degrees", ["Celsius", "purple", "ladder"], 0),
    ("One, two, three, four,", ["five", "blue", "cat"], 0),
    ("The opposite of up is", ["down", "cheese", "run"], 0),
    ("Monday, Tuesday,", ["Wednesday", "January", "seven"], 0),
    ("A cat says", ["meow", "quack", "moo moo moo"], 0),
    ("The sun rises in the", ["east", "fridge", "pocket"], 0),
    ("Red, green and", ["blue", "table", "running"], 0),
]


@pytest.fixture(scope="module")
def base_path():
    from evalkit.models import resolve_model

    try:
        return resolve_model("smollm2-135m").path
    except Exception as exc:  # the package with the weights is not installed
        pytest.skip(f"default model unavailable: {exc}")


@pytest.fixture(scope="module")
def perturbed(base_path, tmp_path_factory):
    """A copy with seeded Gaussian noise (0.3 x each tensor's std) on every weight."""
    import torch
    from safetensors.torch import load_file, save_file

    folder = tmp_path_factory.mktemp("perturbed") / "model"
    shutil.copytree(base_path, folder, ignore=shutil.ignore_patterns("*.safetensors"))
    weights = load_file(f"{base_path}/model.safetensors")
    gen = torch.Generator().manual_seed(0)
    noisy = {k: (w + 0.3 * w.float().std() * torch.randn(w.shape, generator=gen)).to(w.dtype)
             if w.is_floating_point() and w.numel() > 1 else w for k, w in weights.items()}
    save_file(noisy, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


@pytest.fixture(scope="module")
def mc_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("mc") / "easy.jsonl"
    path.write_text("".join(json.dumps({"question": q, "choices": c, "answer": a}) + "\n" for q, c, a in EASY))
    return path


def _opts(base, model, mc_file):
    return ForgettingOptions(base=str(base), model=str(model), suite="easy", mc_files=(("easy", str(mc_file)),),
                             train_task="letter_counting", kl_prompts=3, kl_max_new_tokens=8, device="cpu")


def test_default_model_against_itself(base_path, mc_file):
    report = run_forgetting(_opts(base_path, base_path, mc_file))
    row = report["benchmarks"][0]
    assert row["base_accuracy"] >= 0.75  # easy items: the model itself is not random
    assert row["difference"] == 0.0 and row["mcnemar"]["p_value"] == 1.0
    assert report["kl"]["kl_sequence"] == 0.0


def test_default_model_against_a_perturbed_copy(base_path, perturbed, mc_file, tmp_path):
    report = run_forgetting(_opts(base_path, perturbed, mc_file), tmp_path)
    row = report["benchmarks"][0]
    assert row["mcnemar"]["b"] + row["mcnemar"]["c"] > 0
    assert row["difference"] < 0  # noise destroys more than it fixes
    assert report["kl"]["kl_sequence"] > 0.1
    assert report["kl"]["kl_sequence_se"] is not None
    assert (tmp_path / "items.jsonl").read_text().count("\n") == len(EASY)
