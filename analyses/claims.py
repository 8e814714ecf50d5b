"""A study's pre-registered claims: the claims file, its rules, and what was registered when.

    claims = read_claims(Path("studies/seed-cpu-v2.claims.toml"))   # UsageError naming the key
    record = registration(claims, "studies/seed-cpu-v2.claims.toml")  # what `evalkit study` stores
    revisions(record, claims)        # per claim: unchanged, revised / added / dropped after data

A claims file (TOML) holds one `[claims.<id>]` table per claim, each ONE statement with one
primary endpoint (`ENDPOINTS`), the contrast it reads ("grpo - base"), the side the statement
puts it on (`direction`, above or below `threshold`: the margin), and the `[test]` every claim
shares (the interval, its replicates, the power, Holm, the stability check). `evalkit study`
stores `registration()` in study.json before its first training stage: the settings, their
sha256, and the sha256 of every file of verdict code (`VERDICT_CODE`). The findings compare that
record with the claims file and the code as they are then; a claim whose settings differ is
"revised after data" and its verdict under the registered settings stands beside the new one.

The rule (`interval_verdict`): the two-sided bootstrap p of the threshold (metrics.inference.
bootstrap_p), Holm-adjusted over every claim that has one; below alpha, the claim is supported
when the replicates lie on its side of the threshold, contradicted on the other; otherwise
inconclusive. A claim measured once per run without sampling error (a diff is exact) is judged
run by run (`per_run_verdict`: every run on its side, supported; none, contradicted; else
inconclusive) and has no p, so it is not in Holm's family.

A claim may have a gate (`gate = ["es"]`, `gate_share`, default 0.5): it is judged only when
each arm named beat the base on the validation split (analyses.arm_checks.validation_control, the
positive control at alpha / m over the arm's m candidate checkpoints) in at least that share of
the seeds; otherwise its verdict is "not tested" and it leaves Holm's family (issue 44: no ES
comparison is judged unless ES first beats the base).

A study whose claims were written after its data (v2's) says so in `[registration]`
(`retrospective = true`); a claim's `[claims.<id>.first_written]` table then gives the settings
its rule had before the data (with `commit` and `why`), and those are the registered ones.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.schema import read_toml

__all__ = ["Claim", "ClaimTest", "ClaimsFile", "read_claims", "parse_claims", "registration", "revisions",
           "interval_verdict", "per_run_verdict", "gate_passed", "claim_from_settings", "verdict_code", "settings_hash", "ENDPOINTS",
           "VERDICT_CODE", "VERDICTS"]

VERDICTS = ("supported", "contradicted", "inconclusive", "not tested")
# endpoint -> (keys it needs, keys it may have, what it measures); every claim also has statement,
# contrast, direction, threshold and may have from, note, also_at, sensitivity, first_written
ENDPOINTS = {
    "pass@k": (("setting", "k", "pairing"), (), "mean pass@k (Chen et al.'s unbiased estimator) over the held-out "
                                                "problems at a picked checkpoint; setting `control`: ES-then-GRPO's pick "
                                                "against GRPO at the same GRPO step, from the curve runs"),
    "entropy": (("setting", "pairing"), (), "mean token entropy, nats per generated token (token-weighted per problem)"),
    "accuracy": (("benchmark", "pairing"), (), "accuracy on a forgetting benchmark the arm was not trained on"),
    "changed-fraction": ((), (), "share of bf16 weights an update changes (the short bf16-trained runs), one run each"),
    "top-share": (("q",), ("reference_margin",), "share of ||dW||^2 in the top q of entries at matched update norm, "
                                                 "per seed; with reference_margin, ES must also exceed an i.i.d. "
                                                 "Gaussian update's share by that much (relative)"),
    "gain-retained": (("q", "mask_by"), ("scope", "reference_margin"),
                      "share of the arm's validation gain over the base that its update keeps when masked to its "
                      "top q entries (mask_by abs: |dW|, rel: |dW| / |W|; evalkit masked), per seed with a masked "
                      "stage; with reference_margin, it must also exceed the random mask's share at the same q by "
                      "that much (absolute); contrast 'ARM - base'"),
}
PAIRINGS = {"problem": "each arm minus the base on the same problem (the base is one run)",
            "seed": "paired by seed (ES-then-GRPO's seed s repeats ES seed s's first iterations and draws GRPO "
                    "seed s's prompts)",
            "apart": "each arm's seeds resampled apart, the problems shared"}
ARMS = ("base", "es", "grpo", "es-grpo", "es-large")
COMMON = {"statement", "contrast", "direction", "threshold", "endpoint", "from", "note", "also_at", "sensitivity",
          "first_written", "gate", "gate_share"}
HISTORY = ("commit", "revised", "why")  # keys of a first_written table that are not settings
# the files whose code turns the study's files into verdicts: their sha256 is registered
VERDICT_CODE = ("analyses/claims.py", "analyses/claim_endpoints.py", "analyses/preregistered.py", "metrics/inference.py",
                "metrics/seeds.py", "metrics/passk.py", "metrics/placebo.py", "analyses/arm_checks.py",
                "metrics/positive_control.py", "analyses/study_seeded.py")
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ClaimTest:
    """The test every claim shares; its rules in the field metadata."""

    confidence: float = field(default=0.95, metadata={"range": (0.5, 0.9999)})
    alpha: float = field(default=0.05, metadata={"range": (1e-6, 0.5)})
    power: float = field(default=0.8, metadata={"range": (0.5, 0.9999)})
    n_boot: int = field(default=2000, metadata={"range": (200, 10**7)})
    boot_seed: int = field(default=0, metadata={"range": (0, 2**32 - 1)})
    holm: bool = True
    stability_window: float = field(default=0.01, metadata={"range": (0.0, 1.0)})
    stability_boot: int = field(default=20000, metadata={"range": (20000, 10**7)})  # issue 44: at least 20,000
    stability_streams: int = field(default=10, metadata={"range": (2, 1000)})


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    endpoint: str
    contrast: tuple[str, str]  # (a, b): the endpoint reads a - b
    direction: str  # "above" or "below": the side of `threshold` the statement puts a - b on
    threshold: float
    settings: dict  # the claim's table as written, less first_written: what is hashed
    first_written: dict | None = None  # the settings its rule had before the data, with commit / why

    def get(self, key: str, default=None):
        return self.settings.get(key, default)

    @property
    def parent(self) -> str | None:
        return self.settings.get("from")

    def as_first_written(self) -> Claim | None:
        """This claim under the settings its rule had before the data (None when unrevised)."""
        if not self.first_written:
            return None
        changed = {k: v for k, v in self.first_written.items() if k not in HISTORY}
        return _claim(self.id, {**self.settings, **changed}, None)


@dataclass(frozen=True)
class ClaimsFile:
    path: str
    test: ClaimTest
    claims: tuple[Claim, ...]
    retrospective: bool
    note: str
    written: str = ""
    limitations: tuple[str, ...] = ()

    def settings(self) -> dict:
        return {"test": asdict(self.test), "claims": {c.id: c.settings for c in self.claims}}

    def registered_settings(self) -> dict:
        """The settings before the data: each claim's first_written values where it has them."""
        return {"test": asdict(self.test),
                "claims": {c.id: (c.as_first_written() or c).settings for c in self.claims}}


def read_claims(path: Path) -> ClaimsFile:
    path = Path(path)
    raw = read_toml(path, "claims file")
    return parse_claims(raw, str(path))


def parse_claims(raw: dict, path: str = "<claims>") -> ClaimsFile:
    """A claims file's tables, checked (module docstring); a UsageError names the key."""
    _unknown(raw, {"registration", "test", "claims"}, "")
    reg = _table(raw, "registration", "")
    _unknown(reg, {"retrospective", "written", "note", "limitations"}, "registration.")
    test = _test(_table(raw, "test", ""))
    table = _table(raw, "claims", "")
    if not table:
        raise UsageError(f"{path}: [claims] is missing: give one [claims.<id>] table per claim")
    claims = tuple(_claim(cid, dict(body), path) for cid, body in table.items())
    if not isinstance(reg.get("retrospective", False), bool):
        raise UsageError("registration.retrospective: expected true or false")
    limits = reg.get("limitations", [])
    if not isinstance(limits, list) or not all(isinstance(x, str) for x in limits):
        raise UsageError("registration.limitations: expected a list of sentences")
    return ClaimsFile(path, test, claims, bool(reg.get("retrospective", False)), str(reg.get("note", "")),
                      str(reg.get("written", "")), tuple(limits))


def _unknown(table: dict, known: set, prefix: str) -> None:
    extra = sorted(set(table) - set(known))
    if extra:
        raise UsageError(f"unknown key {prefix}{extra[0]}: valid keys here are {', '.join(sorted(known))}")


def _table(raw: dict, key: str, prefix: str) -> dict:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise UsageError(f"{prefix}{key}: expected a table")
    return value


def _test(table: dict) -> ClaimTest:
    known = {f.name: f for f in fields(ClaimTest)}
    _unknown(table, set(known), "test.")
    for key, value in table.items():
        kind = known[key].type
        ok = (isinstance(value, bool) if kind == "bool" else
              isinstance(value, int) and not isinstance(value, bool) if kind == "int" else
              isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value))
        if not ok:
            raise UsageError(f"test.{key} {value!r}: expected {'true or false' if kind == 'bool' else 'a ' + kind}")
        lo, hi = known[key].metadata.get("range", (None, None))
        if lo is not None and not lo <= value <= hi:
            raise UsageError(f"test.{key} {value}: must be between {lo} and {hi}")
    return ClaimTest(**table)


def _claim(cid: str, body: dict, path: str | None) -> Claim:
    p = f"claims.{cid}."
    first = body.pop("first_written", None)
    endpoint = body.get("endpoint")
    if endpoint not in ENDPOINTS:
        raise UsageError(f"{p}endpoint {endpoint!r}: choose {', '.join(ENDPOINTS)}")
    needs, may, _ = ENDPOINTS[endpoint]
    _unknown(body, COMMON | set(needs) | set(may), p)
    for key in ("statement", "contrast", "direction", "threshold", *needs):
        if key not in body:
            raise UsageError(f"{p}{key} is missing ({endpoint} claims need {', '.join(needs) or 'no more keys'})")
    if not isinstance(body["statement"], str) or not body["statement"].strip():
        raise UsageError(f"{p}statement: one sentence, the claim as the study tests it")
    a, _, b = str(body["contrast"]).partition(" - ")
    if a not in ARMS or b not in ARMS or a == b:
        raise UsageError(f"{p}contrast {body['contrast']!r}: write 'A - B' with two of {', '.join(ARMS)}")
    if body["direction"] not in ("above", "below"):
        raise UsageError(f"{p}direction {body['direction']!r}: choose above or below (the side of the threshold "
                         "the statement puts A - B on)")
    if isinstance(body["threshold"], bool) or not isinstance(body["threshold"], int | float):
        raise UsageError(f"{p}threshold {body['threshold']!r}: expected a number (the margin; 0 for a sign)")
    if "pairing" in needs and body["pairing"] not in PAIRINGS:
        raise UsageError(f"{p}pairing {body['pairing']!r}: choose {', '.join(PAIRINGS)}")
    if "pairing" in needs and (body["pairing"] == "problem") != (b == "base"):
        raise UsageError(f"{p}pairing {body['pairing']}: a contrast with the base is paired by problem, one "
                         "between two arms by seed or apart")
    if endpoint == "gain-retained" and (b != "base" or body["mask_by"] not in ("abs", "rel")
                                        or isinstance(body["q"], bool) or not isinstance(body["q"], int | float)
                                        or not 0 < body["q"] < 1):
        raise UsageError(f"{p}: a gain-retained claim reads 'ARM - base', mask_by abs or rel, and 0 < q < 1")
    margin = body.get("reference_margin") if endpoint == "gain-retained" else None
    if margin is not None and (isinstance(margin, bool) or not isinstance(margin, int | float)
                               or body["direction"] != "above"):
        raise UsageError(f"{p}reference_margin {margin!r}: a number, with direction above (the share must exceed "
                         "the reference's by it)")
    if endpoint == "pass@k" and (isinstance(body["k"], bool) or not isinstance(body["k"], int) or body["k"] < 1):
        raise UsageError(f"{p}k {body['k']!r}: expected a positive integer (at most n / 2 of the runs read)")
    for key in ("also_at", "sensitivity"):
        if not isinstance(body.get(key, []), list):
            raise UsageError(f"{p}{key}: expected a list")
    _gate(body, p)
    if first is not None and (not isinstance(first, dict) or not {"commit", "why"} <= set(first)):
        raise UsageError(f"{p}first_written: a table of the settings before the data, with commit and why")
    return Claim(cid, body["statement"], endpoint, (a, b), body["direction"], float(body["threshold"]), body, first)


def _gate(body: dict, p: str) -> None:
    """`gate = ["es"]`: the claim is judged only when each arm named passes the positive control
    (analyses.arm_checks.validation_control) in at least `gate_share` of the seeds (default 0.5);
    otherwise its verdict is "not tested" and it leaves Holm's family."""
    gate = body.get("gate")
    if gate is None:
        if "gate_share" in body:
            raise UsageError(f"{p}gate_share: give gate = [arms] too")
        return
    if not isinstance(gate, list) or not gate or any(a not in ARMS or a == "base" for a in gate):
        raise UsageError(f"{p}gate {gate!r}: a list of the trained arms whose positive control the claim needs "
                         f"({', '.join(a for a in ARMS if a != 'base')})")
    share = body.get("gate_share", 0.5)
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
        raise UsageError(f"{p}gate_share {share!r}: the share of seeds that must pass, in (0, 1]")


def gate_passed(gate: list[str], share: float, controls: dict) -> bool:
    """Every arm of `gate` passes its positive control in at least `share` of its seeds
    (`controls`: arm -> [validation_control results, one per seed])."""
    return all(controls.get(arm) and sum(c["passed"] for c in controls[arm]) >= share * len(controls[arm])
               for arm in gate)


# ---------------------------------------------------------------- the rules


def interval_verdict(p: dict | None, alpha: float, direction: str, adjusted: float | None = None) -> str:
    """From metrics.inference.bootstrap_p's result: the two-sided p (or its Holm-adjusted value
    `adjusted`) below alpha decides, on the side the replicates lie; else inconclusive."""
    if p is None:
        return "not tested"
    value = p["two_sided"] if adjusted is None else adjusted
    if not value < alpha:
        return "inconclusive"
    side = "above" if p["above"] < p["below"] else "below"
    return "supported" if side == direction else "contradicted"


def per_run_verdict(holds: list[bool] | None) -> str:
    """A claim measured exactly once per run: every run on the claim's side, supported; none,
    contradicted; runs disagreeing, inconclusive; nothing measured, not tested."""
    if not holds:
        return "not tested"
    return "supported" if all(holds) else "contradicted" if not any(holds) else "inconclusive"


# ---------------------------------------------------------------- registration


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def settings_hash(settings: dict) -> str:
    """sha256 of the settings as canonical JSON (keys sorted)."""
    return _sha(json.dumps(settings, sort_keys=True, separators=(",", ":")).encode())


def verdict_code() -> dict:
    """sha256 of every file of VERDICT_CODE, and of the list."""
    files = {name: _sha((ROOT / name).read_bytes()) for name in VERDICT_CODE}
    return {"files": files, "hash": settings_hash(files)}


def _commit() -> str | None:
    """The checkout's git commit, when there is one (the registered code can be read there)."""
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def registration(claims: ClaimsFile, path: str, *, done_before=(), synthesized: bool = False) -> dict:
    """What study.json keeps: the registered settings (first_written values where a claim has
    them), their hashes, the verdict code's hashes and commit, when, and the training stages
    already done then (none when registered before the data). `synthesized`: built by a
    re-analysis from the claims file alone (a study that recorded none): no time, no commit, so
    that the re-analysis's files do not change from one run to the next."""
    import datetime

    settings = claims.registered_settings()
    when = None if synthesized else datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"claims_file": str(path), "settings": settings, "settings_hash": settings_hash(settings),
            "claim_hashes": {cid: settings_hash(s) for cid, s in settings["claims"].items()},
            "verdict_code": verdict_code(), "commit": None if synthesized else _commit(), "recorded_at": when,
            "written": claims.written, "training_done_before": list(done_before),
            "retrospective": bool(claims.retrospective or done_before), "synthesized": synthesized}


def claim_from_settings(cid: str, settings: dict) -> Claim:
    """A claim as registered (a registration's `settings["claims"][cid]`)."""
    return _claim(cid, dict(settings), None)


def revisions(record: dict, claims: ClaimsFile) -> dict:
    """The claims file and code now against the registration: per claim `unchanged`, `revised
    after data` (the keys that changed, registered -> now), `added after data`, or `dropped after
    data` (in the registration only); and the verdict code files that changed."""
    now = claims.settings()
    was = record["settings"]
    out = {}
    for cid in dict.fromkeys([*was["claims"], *now["claims"]]):
        old, new = was["claims"].get(cid), now["claims"].get(cid)
        if old is None:
            out[cid] = {"status": "added after data"}
        elif new is None:
            out[cid] = {"status": "dropped after data", "registered": old}
        elif old == new:
            out[cid] = {"status": "unchanged"}
        else:
            keys = sorted(k for k in {*old, *new} if old.get(k) != new.get(k))
            out[cid] = {"status": "revised after data", "changed": {k: [old.get(k), new.get(k)] for k in keys}}
    code = verdict_code()["files"]
    changed_code = sorted(f for f in {*code, *record["verdict_code"]["files"]}
                          if code.get(f) != record["verdict_code"]["files"].get(f))
    return {"claims": out, "test_changed": was["test"] != now["test"], "verdict_code_changed": changed_code,
            "settings_hash_now": settings_hash(now), "settings_hash_registered": record["settings_hash"]}
