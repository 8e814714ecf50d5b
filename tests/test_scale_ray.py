"""Ray workers on a local 2-CPU cluster: the same samples and ES weights as one process,
and a killed worker loses or duplicates nothing."""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'evalkit[ray]'")

from evalkit.errors import UsageError  # noqa: E402
from evalkit.passk import PasskOptions, run_passk  # noqa: E402
from evalkit.scale.ray_passk import RayChunks  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _opts(tiny_model, **kw):
    base = PasskOptions(model=str(tiny_model), task="arith", n=4, ks=(1, 2, 4), limit=12,
                        max_new_tokens=8, batch_size=4, grader_workers=1, threads=1)
    return replace(base, **kw)


def _keyed(out):
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return {(r["problem_id"], r["sample_index"]): r for r in records}, len(records)


@pytest.fixture(scope="module")
def reference(tiny_model, tmp_path_factory):
    """The one-process run, 1 CPU thread, 12 problems x 4 samples in 12 chunks."""
    out = tmp_path_factory.mktemp("plain") / "run"
    summary = run_passk(_opts(tiny_model), out)
    keyed, count = _keyed(out)
    assert count == 48 == len(keyed)
    return summary, keyed


def test_two_workers_give_the_one_process_samples(cluster, tiny_model, tmp_path, reference):
    summary, keyed = reference
    out = tmp_path / "ray"
    ray_summary = run_passk(replace(_opts(tiny_model), ray_workers=2), out)
    got, count = _keyed(out)
    assert count == 48
    assert got == keyed  # text, entropy, seed, outcome: bit for bit
    assert ray_summary["pass_at_k"] == summary["pass_at_k"]
    assert json.loads((out / "run.json").read_text())["cpu_threads"] == 1


@pytest.mark.slow
def test_interrupted_run_resumes_on_ray_through_a_killed_worker(cluster, tiny_model, tmp_path, reference):
    """One process writes 2 chunks and stops; Ray resumes it, and worker 0 is
    SIGKILLed after the next chunk is written: it is replaced, its chunks redone."""
    _, keyed = reference
    out = tmp_path / "mixed"

    class Stop(Exception):
        pass

    def stop_after_two_chunks(done, total, tokens):
        if done >= 16:
            raise Stop

    with pytest.raises(Stop):
        run_passk(_opts(tiny_model), out, progress=stop_after_two_chunks)
    assert _keyed(out)[1] == 16

    made, killed = [], []

    def executor(*args):
        made.append(RayChunks(*args, workers=2))
        return made[-1]

    def kill_worker_once(done, total, tokens):
        if done > 16 and not killed:
            killed.append(made[0].pids[0])
            os.kill(made[0].pids[0], signal.SIGKILL)

    run_passk(_opts(tiny_model), out, progress=kill_worker_once, executor=executor)
    got, count = _keyed(out)
    assert killed and made[0].replacements >= 1 and made[0].pids[0] != killed[0]
    assert count == 48 and got == keyed  # nothing lost, nothing twice


def test_other_thread_count_is_refused_on_resume(tiny_model, tmp_path):
    out = tmp_path / "threads"
    run_passk(_opts(tiny_model, limit=2), out)
    with pytest.raises(UsageError, match="cpu_threads=1"):
        run_passk(_opts(tiny_model, limit=2, threads=2), out)


def test_missing_ray_is_a_usage_error(monkeypatch, tiny_model, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(UsageError, match=r"evalkit\[ray\]"):
        run_passk(_opts(tiny_model, threads=0, ray_workers=2), tmp_path / "x")


# ---- ES population on Ray -------------------------------------------------------------


@pytest.fixture(scope="module")
def digit_task(tmp_path_factory):
    """(model folder, task file): a tiny model trained to answer random digits, and a
    task whose answer is its second-likeliest digit, so ES members' rewards differ."""
    import torch
    from helpers.tinymodel import make_tiny_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = tmp_path_factory.mktemp("digit")
    folder = make_tiny_model(root / "model", seed=1)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    questions = [f"Digit {i}?" for i in range(8)]
    prompts = [tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)
               for q in questions]
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    tok.padding_side = "left"
    for _ in range(30):
        digits = torch.randint(0, 10, (len(prompts),), generator=gen).tolist()
        enc = tok([p + str(d) + tok.eos_token for p, d in zip(prompts, digits, strict=True)],
                  return_tensors="pt", padding=True, add_special_tokens=False)
        labels = torch.full_like(enc["input_ids"], -100)
        labels[:, -2:] = enc["input_ids"][:, -2:]  # the digit and the stop token (left padding)
        loss = model(**enc, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.save_pretrained(folder)
    with torch.no_grad():
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        probs = model(**enc).logits[:, -1].softmax(-1).mean(0)
    digit_probs = {d: float(probs[tok.convert_tokens_to_ids(d)]) for d in "0123456789"}
    answer = sorted(digit_probs, key=digit_probs.get, reverse=True)[1]
    task = root / "digit.jsonl"
    task.write_text("".join(json.dumps({"id": f"d{i}", "question": q, "answer": answer}) + "\n"
                            for i, q in enumerate(questions)))
    return folder, task


def _es_opts(digit_task, **kw):
    from evalkit.train.es import ESOptions

    folder, task = digit_task
    base = dict(model=str(folder), task=str(task), population=4, sigma=0.05, alpha=0.02, iterations=3,
                prompts_per_iteration=8, max_new_tokens=2, grader_workers=1, save_every=2, device="cpu")
    return ESOptions(**{**base, **kw})


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _lines(out):
    return (out / "metrics.jsonl").read_text().splitlines()


@pytest.fixture(scope="module")
def es_reference(digit_task, tmp_path_factory):
    """The one-process ES run, at 1 CPU thread like each Ray actor."""
    import torch

    from evalkit.train.es import run_es

    out = tmp_path_factory.mktemp("es-plain") / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        summary = run_es(_es_opts(digit_task), out)
    finally:
        torch.set_num_threads(threads)
    records = [json.loads(line) for line in _lines(out)]
    assert any(not r["zero_spread"] for r in records), "no reward spread: the update would be empty"
    return out, _weights(Path(summary["final_checkpoint"]))


def _ray_worker_pids(name):
    """PIDs of live Ray actor processes titled `name` (ray::ESWorker...), not their grader children."""
    parents = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and name in (entry / "cmdline").read_text():
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
    return sorted(pid for pid, ppid in parents.items() if ppid not in parents)


def test_es_two_workers_give_the_one_process_weights(cluster, digit_task, tmp_path, es_reference):
    import torch

    from evalkit.train import run_es

    plain_out, plain_weights = es_reference
    out = tmp_path / "es"
    killed = []

    def kill_a_worker_after_step_one(step, total, reward):
        if step == 1:  # SIGKILL one actor: its replacement loads the start model and replays step 1
            pids = _ray_worker_pids("ray::ESWorker")
            assert pids
            killed.append(pids[0])
            os.kill(pids[0], signal.SIGKILL)

    summary = run_es(replace(_es_opts(digit_task), ray_workers=2), out, progress=kill_a_worker_after_step_one)
    assert killed and summary["complete"] and summary["ray_replacements"] == 1
    assert _lines(out) == _lines(plain_out)  # rewards, spreads, lengths, entropies
    weights = _weights(Path(summary["final_checkpoint"]))
    assert weights.keys() == plain_weights.keys()
    assert all(torch.equal(weights[k].view(torch.int32), plain_weights[k].view(torch.int32)) for k in weights)
    assert (out / "step-000002").is_dir() and (out / "run.json").read_text() == (plain_out / "run.json").read_text()


def test_replica_mismatch_stops_with_a_clear_error():
    from evalkit.train.es_ray import RayPopulation, ReplicaMismatch

    pop = RayPopulation.__new__(RayPopulation)
    pop.check([[1, 2, 3], [1, 2, 3]], step=4)
    with pytest.raises(ReplicaMismatch, match=r"step 4: worker 2's weights differ .* tensor 1"):
        pop.check([[1, 2, 3], [1, 2, 3], [1, 9, 3]], step=4)
