"""Score the base on some families of the v3 forgetting candidates (issue 44, part 5: the extension).

    python studies/score_facts_v3.py --out results/pilot-v3/facts-v3-extension.json --log /tmp/facts.log \
        FAMILY [FAMILY ...]

The base (smollm2-135m, fp32 on the CPU) scores each named family's items in
studies/data/facts-mc-v3-candidates.jsonl exactly as the pilot's score_facts (studies/pilot_v3.py) and
evalkit forgetting score them: evalkit.forgetting.multiple_choice.evaluate with EvalSettings()
(log-likelihood, mc_norm sum, batch size 8). One family at a time, in the order given; each family's
row (items, correct, accuracy, seconds, every item's outcome) is written to --out as soon as it is
done, so a rerun resumes after the last finished family. The rule (the pilot's, unchanged): a family
is kept when its base accuracy lies in [0.40, 0.85].
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).parent
CANDIDATES = HERE / "data" / "facts-mc-v3-candidates.jsonl"
MODEL = "smollm2-135m"
BAND = (0.40, 0.85)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()

    from evalkit.forgetting import multiple_choice as mc
    from evalkit.forgetting.generate import EvalSettings
    from evalkit.models import load_model, resolve_model

    data = CANDIDATES.read_bytes()
    lines = data.decode("utf-8").splitlines()
    by_family: dict[str, list[str]] = {}
    for line in lines:
        by_family.setdefault(json.loads(line)["id"].rsplit("-", 1)[0], []).append(line)
    unknown = [f for f in args.families if f not in by_family]
    if unknown:
        parser.error(f"no such family in {CANDIDATES}: {', '.join(unknown)}")

    sha = hashlib.sha256(data).hexdigest()
    result = json.loads(args.out.read_text()) if args.out.exists() else {}
    if result and result.get("candidates_sha256") != sha:
        raise SystemExit(f"{args.out}: scored on another candidates file; move it away to score again")
    result.setdefault("model", MODEL)
    result.setdefault("candidates", str(CANDIDATES.relative_to(HERE.parent)))
    result["candidates_sha256"] = sha
    result.setdefault("generator_commit", _git("log", "-1", "--format=%H", "--", "make_facts_mc_v3.py"))
    result.setdefault("band", list(BAND))
    settings = EvalSettings()
    result.setdefault("settings", {"mc_norm": settings.mc_norm, "batch_size": settings.batch_size,
                                   "dtype": "float32", "device": "cpu"})
    families = result.setdefault("families", {})

    def log(msg: str) -> None:
        with args.log.open("a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {msg}\n")

    todo = [f for f in args.families if f not in families]
    log(f"start: {len(todo)} families to score ({sum(len(by_family[f]) for f in todo)} items)")
    if not todo:
        return
    start = time.perf_counter()
    model, tokenizer = load_model(resolve_model(MODEL), dtype="float32", device="cpu")
    log(f"model loaded in {time.perf_counter() - start:.1f} s")
    for family in todo:
        items = mc.McItems(family, str(CANDIDATES), sha, mc.read_items("\n".join(by_family[family]), family))
        t0, c0 = time.perf_counter(), time.process_time()
        found = mc.evaluate(items, model, tokenizer, settings)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        correct = sum(int(o.correct) for o in found)
        acc = correct / len(found)
        families[family] = {"items": len(found), "correct": correct, "accuracy": acc,
                            "kept": BAND[0] <= acc <= BAND[1], "seconds": round(seconds, 1),
                            "cpu_seconds": round(cpu, 1), "load": [round(x, 2) for x in os.getloadavg()],
                            "outcomes": {o.item_id: int(o.correct) for o in found}}
        kept = [f for f, r in families.items() if r["kept"]]
        result["kept"] = kept
        result["items"] = sum(r["items"] for r in families.values())
        result["seconds"] = round(sum(r["seconds"] for r in families.values()), 1)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        log(f"{family}: {correct}/{len(found)} = {acc:.3f} {'kept' if BAND[0] <= acc <= BAND[1] else 'out'} "
            f"({seconds:.0f} s, {seconds / len(found):.2f} s/item)")
    log("done")


if __name__ == "__main__":
    main()
