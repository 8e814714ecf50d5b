"""evalkit's trainers against named baselines, on the default model (smollm2-135m, fp32).

    python benchmarks/bench_trainers.py                 # everything, one subprocess per measurement
    python benchmarks/bench_trainers.py --no-trl        # skip TRL (installed for the benchmark only)

Workloads (same prompts for every method, the first problems of the default task `arith`):
- ES: 16 prompts, 32 greedy new tokens per member, sigma 1e-3, alpha 5e-4.
- GRPO: 4 prompts x 8 samples, 64 new tokens, temperature 1, loss dapo, lr 1e-6.

Measurements (each its own subprocess; peak memory = VmHWM, the resident high-water mark;
model loading is inside it for every method; times exclude imports and loading):
- `infer`: inference only, the 16 ES prompts decoded greedily by evalkit's sampler.
- `es`: one evalkit ES iteration with `--members` members (perturb, score, restore each, then
  the update); time per member and the exactness of every restore (bitwise, against the
  checkpoint reloaded from disk).
- `plain_es`: a plain layer-by-layer implementation of the published algorithm (Qiu et al.
  2025 code): per tensor `gen.manual_seed(seed + i)`, `p.add_(sigma * randn(p.shape))`,
  `model.generate(do_sample=False)` on the left-padded batch, then `p.sub_(sigma * randn)`;
  time per member and the share of weights its restore left changed.
- `grpo`: one evalkit GRPO step (sample groups, grade, loss, backward, AdamW).
- `trl`: one step of TRL's GRPOTrainer on the same 4 prompts, 8 generations each, 64 tokens,
  same loss type, reward from the same scorer; timed from on_step_begin to on_step_end.
Targets: ES peak <= 1.1x inference; ES peak <= 0.3x evalkit GRPO peak; evalkit GRPO <= 0.8x
TRL's step time and <= 0.5x its peak; evalkit ES member <= 0.6x the plain member's time
(issue 19; 0.85x in the first round).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from record import result

ROOT = Path(__file__).resolve().parents[1]
ES_PROMPTS, ES_TOKENS, GRPO_PROMPTS, GROUP, GRPO_TOKENS = 16, 32, 4, 8, 64


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _task(k: int):
    from evalkit.tasks import Task, load_task

    task = load_task("arith")
    return Task(task.spec, task.problems[:k])


def _load():
    from evalkit.models import load_model, resolve_model

    ref = resolve_model("smollm2-135m")
    model, tok = load_model(ref, dtype="float32", device="cpu")
    return ref, model, tok


def _changed_share(model, ref) -> float:
    """Share of weights whose bits differ from the checkpoint on disk."""
    from safetensors.torch import load_file

    from evalkit.train.es import _bits

    disk = load_file(Path(ref.path) / "model.safetensors")
    changed = total = 0
    for name, p in model.named_parameters():
        d = disk.get(name)
        if d is None:
            continue
        changed += int((_bits(p.detach().view(-1)) != _bits(d.view(-1))).sum())
        total += p.numel()
    return changed / total


def run_infer(args) -> dict:
    from evalkit.sampling import SamplingConfig, render_prompt, sample_chunk, stop_token_ids

    _, model, tok = _load()
    problems = _task(ES_PROMPTS).problems
    cfg = SamplingConfig(n=1, temperature=0.0, max_new_tokens=ES_TOKENS, seed=0)
    t = time.perf_counter()
    sample_chunk(model, tok, [render_prompt(tok, p.prompt) for p in problems], [p.id for p in problems], cfg,
                 stop_ids=stop_token_ids(model, tok))
    return {"seconds": time.perf_counter() - t}


def run_es(args) -> dict:
    from evalkit.grading import Grader
    from evalkit.sampling import stop_token_ids
    from evalkit.train import common, es

    ref, model, tok = _load()
    model.requires_grad_(False)
    task = _task(ES_PROMPTS)
    opts = es.ESOptions(population=args.members, prompts_per_iteration=ES_PROMPTS, max_new_tokens=ES_TOKENS,
                        alpha=0.0)  # alpha 0: the update leaves the weights as they were, so restores are checkable
    with Grader(task.spec, workers=1) as grader:
        grader.grade([("0", task.problems[0])])  # start the worker outside the timing
        t = time.perf_counter()
        record = es.es_iteration(common.Policy(model, tok, grader, tuple(stop_token_ids(model, tok)), opts), task, 1)
        seconds = time.perf_counter() - t
    peak = peak_rss_mb()  # before the exactness check, which loads the checkpoint again
    return {"peak_mb": peak, "seconds_per_member": seconds / args.members,
            "restore_residual": record["restore_residual"],
            "fixups_per_member": record["restore_fixups_per_member"],
            "changed_after": _changed_share(model, ref), "fitness": record["fitness/mean"]}


def run_plain_es(args) -> dict:
    import torch

    ref, model, tok = _load()
    model.requires_grad_(False)
    from evalkit.tasks import scorer_for

    task = _task(ES_PROMPTS)
    problems, score = task.problems, scorer_for(task.spec)
    score("0", problems[0])  # warm the scorer's imports outside the timing
    texts = [tok.apply_chat_template([{"role": "user", "content": p.prompt}], add_generation_prompt=True,
                                     tokenize=False) for p in problems]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    sigma, params = 1e-3, list(model.parameters())
    per = {"perturb": 0.0, "eval": 0.0, "restore": 0.0}
    for member in range(args.members):
        seed = 1000 + member
        t0 = time.perf_counter()
        for i, p in enumerate(params):  # layer by layer, in place, as the published code
            gen = torch.Generator().manual_seed(seed + i)
            p.data.add_(sigma * torch.randn(p.shape, generator=gen, dtype=p.dtype))
        t1 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=ES_TOKENS, do_sample=False, top_k=None, top_p=None,
                                 temperature=None, pad_token_id=tok.pad_token_id)
        texts_out = [tok.decode(o[enc["input_ids"].shape[1]:], skip_special_tokens=True) for o in out]
        sum(score(t, p).outcome == "correct" for t, p in zip(texts_out, problems, strict=True))
        t2 = time.perf_counter()
        for i, p in enumerate(params):
            gen = torch.Generator().manual_seed(seed + i)
            p.data.add_(-sigma * torch.randn(p.shape, generator=gen, dtype=p.dtype))
        t3 = time.perf_counter()
        for key, dt in zip(per, (t1 - t0, t2 - t1, t3 - t2), strict=True):
            per[key] += dt / args.members
    peak = peak_rss_mb()
    return {"peak_mb": peak, "seconds_per_member": sum(per.values()), **{f"{k}_seconds": v for k, v in per.items()},
            "changed_after": _changed_share(model, ref)}


def _plain_member(model, enc, tok, problems, score, seed: int, sigma: float = 1e-3) -> float:
    """Perturb, greedy generate, score the rewards (in process), restore: the published loop."""
    import torch

    params = list(model.parameters())
    for i, p in enumerate(params):
        p.data.add_(sigma * torch.randn(p.shape, generator=torch.Generator().manual_seed(seed + i), dtype=p.dtype))
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=ES_TOKENS, do_sample=False, top_k=None, top_p=None,
                             temperature=None, pad_token_id=tok.pad_token_id)
    texts = [tok.decode(o[enc["input_ids"].shape[1]:], skip_special_tokens=True) for o in out]
    reward = sum(score(t, p).outcome == "correct" for t, p in zip(texts, problems, strict=True)) / len(problems)
    for i, p in enumerate(params):
        p.data.add_(-sigma * torch.randn(p.shape, generator=torch.Generator().manual_seed(seed + i), dtype=p.dtype))
    return reward


def run_interleaved(args) -> dict:
    """Member times of evalkit and plain ES alternated in one process (the machine's load hits both)."""
    from evalkit.grading import Grader
    from evalkit.sampling import stop_token_ids
    from evalkit.train import es
    from evalkit.train.common import derive_seed

    _, model, tok = _load()
    model.requires_grad_(False)
    task = _task(ES_PROMPTS)
    texts = [tok.apply_chat_template([{"role": "user", "content": p.prompt}], add_generation_prompt=True,
                                     tokenize=False) for p in task.problems]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    opts = es.ESOptions(prompts_per_iteration=ES_PROMPTS, max_new_tokens=ES_TOKENS)
    params, stop, times = es._params(model), stop_token_ids(model, tok), {"evalkit": [], "plain": []}
    from evalkit.tasks import scorer_for

    plain_score = scorer_for(task.spec)
    plain_score("0", task.problems[0])  # warm the scorer's imports outside the timing
    with Grader(task.spec, workers=1) as grader:
        grader.grade([("0", task.problems[0])])
        for m in range(args.members):
            seed = derive_seed(0, "bench", m)
            t = time.perf_counter()
            fixes = es.perturb_(params, seed, opts.sigma, opts.noise)
            es.member_fitness(model, tok, task.problems, grader, opts, stop)
            es.restore_(params, seed, opts.sigma, opts.noise, fixes)
            times["evalkit"].append(time.perf_counter() - t)
            t = time.perf_counter()
            _plain_member(model, enc, tok, task.problems, plain_score, 1000 + m)
            times["plain"].append(time.perf_counter() - t)
    return {"evalkit_seconds_per_member": sum(times["evalkit"]) / args.members,
            "plain_seconds_per_member": sum(times["plain"]) / args.members, "times": times}


def run_grpo(args) -> dict:
    from evalkit.grading import Grader
    from evalkit.sampling import stop_token_ids
    from evalkit.train import common, grpo

    _, model, tok = _load()
    task = _task(GRPO_PROMPTS)
    opts = grpo.GRPOOptions(prompts_per_step=GRPO_PROMPTS, group_size=GROUP, max_new_tokens=GRPO_TOKENS,
                            micro_batch=args.micro_batch)
    optimizer = common.make_optimizer(model, opts)
    with Grader(task.spec, workers=1) as grader:
        grader.grade([("0", task.problems[0])])
        t = time.perf_counter()
        policy = grpo.Policy(model, tok, grader, tuple(stop_token_ids(model, tok)), opts)
        groups, record = grpo.collect_batch(policy, task, 1)
        t_sample = time.perf_counter() - t
        record.update(grpo.grpo_update(model, None, optimizer, groups, opts, tok.pad_token_id))
        seconds = time.perf_counter() - t
    return {"seconds": seconds, "sample_seconds": t_sample, "reward": record["reward"],
            "mean_length": record["completions/mean_length"]}


def run_trl(args) -> dict:
    import datasets
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from evalkit.tasks import Problem
    from evalkit.tasks.mathgrade import score

    ref, _, _ = _load()
    problems = _task(GRPO_PROMPTS).problems
    data = datasets.Dataset.from_list(
        [{"prompt": [{"role": "user", "content": p.prompt}], "answer": p.answer} for p in problems])

    def reward(completions, answer, **_):
        return [1.0 if score(c[0]["content"], Problem("p", "", a)).outcome == "correct" else 0.0
                for c, a in zip(completions, answer, strict=True)]

    times = {}

    class Timer(TrainerCallback):
        def on_step_begin(self, *a, **k):
            times["begin"] = time.perf_counter()

        def on_step_end(self, *a, **k):
            times["end"] = time.perf_counter()

    config = GRPOConfig(
        output_dir=str(Path(args.tmp) / "trl"), use_cpu=True, bf16=False, per_device_train_batch_size=GRPO_PROMPTS * GROUP,
        num_generations=GROUP, max_completion_length=GRPO_TOKENS, temperature=1.0, loss_type="dapo",
        learning_rate=1e-6, beta=0.0, max_steps=1, logging_steps=1, save_strategy="no", report_to=[],
        gradient_accumulation_steps=1, seed=0, dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(model=ref.path, reward_funcs=reward, args=config, train_dataset=data,
                          callbacks=[Timer()])
    trainer.train()
    return {"seconds": times["end"] - times["begin"]}


MODES = {"infer": run_infer, "es": run_es, "plain_es": run_plain_es, "interleaved": run_interleaved,
         "grpo": run_grpo, "trl": run_trl}


def child(args) -> None:
    result = MODES[args.mode](args)
    result.setdefault("peak_mb", peak_rss_mb())
    print("RESULT " + json.dumps(result), flush=True)


def measure(mode: str, args) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--members", str(args.members), "--tmp", args.tmp,
           "--micro-batch", str(args.micro_batch)]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        print(f"{mode} failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
        return {}
    result = json.loads(lines[-1][7:])
    print(f"{mode:9s} {json.dumps(result)}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", dest="mode", choices=sorted(MODES))
    parser.add_argument("--members", type=int, default=3, help="ES members timed (per-member figures)")
    parser.add_argument("--tmp", default="/tmp/bench_trainers")
    parser.add_argument("--no-trl", action="store_true", help="skip the TRL comparison")
    parser.add_argument("--micro-batch", type=int, default=2, help="evalkit GRPO sequences per forward/backward")
    parser.add_argument("--only", default="", help="comma-separated modes to run (default: all)")
    args = parser.parse_args()
    if args.mode:
        return child(args)
    Path(args.tmp).mkdir(parents=True, exist_ok=True)
    modes = [m for m in MODES if not (args.no_trl and m == "trl")]
    modes = [m for m in modes if not args.only or m in args.only.split(",")]
    r = {m: measure(m, args) for m in modes}
    report(r)


def _ratio(a: dict, b: dict, key: str) -> str:
    if not a or not b:
        return "n/a (a measurement failed or was skipped)"
    return f"{a[key] / b[key]:.2f}x  ({a[key]:.1f} vs {b[key]:.1f})"


def _record(name: str, a: dict, b: dict, key: str, baseline: str, target: str | None, unit: str,
            note: str = "") -> None:
    if a and b:
        result(name, measured=f"{a[key]:.1f} {unit}", baseline=f"{baseline} {b[key]:.1f} {unit}",
               ratio=a[key] / b[key], target=target, note=note)
    else:  # a row that says so, not a silent gap in the table
        result(name, measured="not measured (a side failed or was skipped: see bench_trainers.txt)",
               baseline=baseline, ratio=float("nan"), target=target, note=note)


def report(runs: dict) -> None:
    r = {m: runs.get(m) or {} for m in MODES}
    _record("ES iteration peak memory", r["es"], r["infer"], "peak_mb", "inference only", "<= 1.1", "MB")
    _record("ES iteration peak vs GRPO step peak", r["es"], r["grpo"], "peak_mb", "evalkit GRPO step", "<= 0.3", "MB")
    _record("GRPO step time vs TRL", r["grpo"], r["trl"], "seconds", "TRL GRPOTrainer step", "<= 0.8", "s")
    _record("GRPO step peak memory vs TRL", r["grpo"], r["trl"], "peak_mb", "TRL GRPOTrainer step", "<= 0.5", "MB")
    _record("ES member time, separate processes", r["es"], r["plain_es"], "seconds_per_member",
            "plain ES member", "<= 0.6", "s")
    if r["infer"] and r["plain_es"]:  # what a member costs if perturb and restore were free
        _record("ES member floor: its greedy fitness alone (inference)", r["infer"],
                {"seconds": r["plain_es"]["seconds_per_member"]}, "seconds", "plain ES member", None, "s",
                note="profile: one sample_chunk over the member's prompts, no perturb or restore")
    if r["interleaved"]:
        i = r["interleaved"]
        result("ES member time, alternated in one process", measured=f"{i['evalkit_seconds_per_member']:.2f} s",
               baseline=f"plain ES member {i['plain_seconds_per_member']:.2f} s",
               ratio=i["evalkit_seconds_per_member"] / i["plain_seconds_per_member"], target="<= 0.6")
    print("\nratios (target in brackets)")
    print(f"ES iteration peak / inference-only peak [<= 1.1]:   {_ratio(r['es'], r['infer'], 'peak_mb')} MB")
    print(f"ES iteration peak / evalkit GRPO step peak [<= 0.3]: {_ratio(r['es'], r['grpo'], 'peak_mb')} MB")
    print(f"evalkit GRPO step / TRL GRPOTrainer step, time [<= 0.8]: {_ratio(r['grpo'], r['trl'], 'seconds')} s")
    print(f"evalkit GRPO step / TRL GRPOTrainer step, peak [<= 0.5]: {_ratio(r['grpo'], r['trl'], 'peak_mb')} MB")
    print(f"evalkit ES member / plain ES member, separate processes [<= 0.6]: "
          f"{_ratio(r['es'], r['plain_es'], 'seconds_per_member')} s")
    i = r["interleaved"]
    if i:
        print(f"evalkit ES member / plain ES member, alternated in one process [<= 0.6]: "
              f"{i['evalkit_seconds_per_member'] / i['plain_seconds_per_member']:.2f}x  "
              f"({i['evalkit_seconds_per_member']:.1f} vs {i['plain_seconds_per_member']:.1f}) s")
    if r["plain_es"]:
        p = r["plain_es"]
        print(f"plain ES member: perturb {p['perturb_seconds']:.2f} s, greedy generate and score "
              f"{p['eval_seconds']:.2f} s, restore {p['restore_seconds']:.2f} s")
    if r["infer"] and r["es"]:
        print(f"evalkit ES member {r['es']['seconds_per_member']:.2f} s = its greedy fitness alone "
              f"{r['infer']['seconds']:.2f} s + perturb, restore, grading "
              f"{r['es']['seconds_per_member'] - r['infer']['seconds']:.2f} s")
    if r["es"] and r["plain_es"]:
        print(f"weights changed after restore: evalkit {r['es']['changed_after']:.4%} "
              f"(restore_residual {r['es']['restore_residual']}), plain {r['plain_es']['changed_after']:.4%}")


if __name__ == "__main__":
    main()
