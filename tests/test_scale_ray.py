"""Ray workers on a local 2-CPU cluster: the same samples and ES weights as one process,
and a killed worker loses or duplicates nothing."""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import replace

import pytest

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'evalkit[ray]'")

from evalkit.errors import UsageError  # noqa: E402
from evalkit.passk import PasskOptions, run_passk  # noqa: E402
from evalkit.scale.ray_passk import RayChunks, run_passk_ray  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _opts(tiny_model, **kw):
    base = PasskOptions(model=str(tiny_model), task="arith", n=4, ks=(1, 2, 4), limit=12,
                        max_new_tokens=8, batch_size=8, grader_workers=1, threads=1)
    return replace(base, **kw)


def _keyed(out):
    records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return {(r["problem_id"], r["sample_index"]): r for r in records}, len(records)


@pytest.fixture(scope="module")
def reference(tiny_model, tmp_path_factory):
    """The one-process run, 1 CPU thread, 12 problems x 4 samples in 6 chunks."""
    out = tmp_path_factory.mktemp("plain") / "run"
    summary = run_passk(_opts(tiny_model), out)
    keyed, count = _keyed(out)
    assert count == 48 == len(keyed)
    return summary, keyed


def test_two_workers_give_the_one_process_samples(cluster, tiny_model, tmp_path, reference):
    summary, keyed = reference
    out = tmp_path / "ray"
    ray_summary = run_passk_ray(_opts(tiny_model), out, workers=2)
    got, count = _keyed(out)
    assert count == 48
    assert got == keyed  # text, entropy, seed, outcome: bit for bit
    assert ray_summary["pass_at_k"] == summary["pass_at_k"]
    assert json.loads((out / "run.json").read_text())["cpu_threads"] == 1


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
        run_passk_ray(_opts(tiny_model, threads=0), tmp_path / "x", workers=2)
