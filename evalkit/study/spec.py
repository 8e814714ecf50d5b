"""A study file: what to train, with what budget, and how to evaluate it; checked before any work.

    spec = read_spec(Path("studies/seed-cpu.toml"))   # UsageError naming the key on anything wrong

The file is TOML (read with the standard library's `tomllib`):

    title = "ES vs GRPO"            base_model = "smollm2-135m"   dtype = "float32"   device = "auto"
    [train_task]  name, size, seed, config          the training split
    [eval_task]   seed, size, limit                 the held-out split: the same generator, another seed
    [budget]      unit = "completions" | "tokens", per_method
    [methods.es] [methods.grpo] [methods.es-grpo]   trainer options (evalkit.train); es-grpo takes
                                                    es_share and [methods.es-grpo.es] / .grpo tables
    [methods.distill]                               DistillOptions; `teacher` required
    [methods.grpo-guided] [methods.grpo-hinted]     GRPO variants: [methods.grpo]'s options (when
                                                    given) plus their own; guided needs guide_model,
                                                    guided_rollouts, guide_tokens; hinted needs hint
    [methods.es-large]                              an ES variant: [methods.es]'s options overlaid
                                                    with its own (e.g. a larger alpha), the ES trainer
    [evaluations.passk|entropy|length|groups|diff|forgetting|interpolate]   each evaluator's options
    [report]      title

A study you can cite (studies/seed-cpu-v2.toml) adds:

    seeds = [0, 1, 2]           every method trained once per seed (evalkit.study.stages plans it)
    [validation]                the stopping rule's split and rule (evalkit.study.options.ValidationOptions)
    [evaluations.curves]        passk options at every saved checkpoint (pass@1, pass@k, entropy over training)
    [evaluations.passk-nucleus] a second passk setting at the picked checkpoints (e.g. T = 0.6, top-p 0.95)
    [evaluations.passk-final]   passk at each arm's final checkpoint too (the picked one has passk's)
    [evaluations.masked]        MaskOptions: ES's and GRPO's picks with their updates masked to the top q
    [evaluations.sparsity]      SparsityOptions: matched-norm, scale-free statistics, short bf16 runs
    forgetting's kl_task and mc_files: KL on another task's prompts, multiple-choice files by name
    claims = "studies/x.claims.toml"   the pre-registered claims (analyses.claims), recorded before training
    [methods.X] seeds = [0, 1]  that arm on a subset of the study's seeds (evalkit.study.arms)
    methods = [...], seeds = [...] in an evaluation table: which arms and seeds it runs on
    [evaluations.forgetting] base_once = true   the base scored once (a forgetting-base stage)

Methods: a method's name says its trainer; the seven names above are the only ones. GRPO's
guidance keys (guide_model, guide_tokens, guided_rollouts) belong to grpo-guided and its hint
keys (hint, hint_fraction) to grpo-hinted only, so `grpo` and `es-grpo` stay plain GRPO, the arm
the ES-vs-GRPO claims read. Paths (base_model, train_task.name, teacher, guide_model) are read
as written: a relative one from the folder the command runs in. A teacher or guide model whose
tokenizer is not the base model's is refused here, before any work.

Budget: each method's generated completions (ES: iterations x population x prompts per
iteration, greedy; GRPO: steps x prompts per step x group size; ES-then-GRPO: both stages,
`es_share` of it in ES; distillation: steps x prompts per step x samples per prompt, the
student's samples, teacher-forcing generates nothing; guided GRPO: as GRPO, a guided rollout
(the guide's prefix and the policy's continuation) counting as one completion; hinted GRPO: as
GRPO, counting first samplings only: hints sample each all-zero group once more, so it spends
at most twice that, `budget["at_most"]`, and its train stage records the completions the
hints added), or generated tokens counted as completions x max_new_tokens (an upper bound:
completions may stop early; a guided rollout's prefix is part of its max_new_tokens, so
guide_tokens must be below it). Iterations and steps are computed from the budget unless
given, and a study whose methods' budgets (first samplings) differ by more than 10% is refused.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.options import plain
from evalkit.schema import read_toml

__all__ = ["StudySpec", "Trainer", "read_spec", "saved_steps", "METHODS", "EVALUATIONS", "TOLERANCE"]

METHODS = ("es", "grpo", "es-grpo", "es-large", "distill", "grpo-guided", "grpo-hinted")
# a variant is trained with its parent's trainer, on the parent's table overlaid with its own
PARENT = {"es-large": "es", "grpo-guided": "grpo", "grpo-hinted": "grpo"}
VARIANT_KEYS = {"grpo-guided": ("guide_model", "guide_tokens", "guided_rollouts"),  # GRPO options only
                "grpo-hinted": ("hint", "hint_fraction")}                         # these variants take
REQUIRED = {  # method -> {key: what to give}
    "distill": {"teacher": "the teacher: a checkpoint folder (e.g. a trained GRPO step-* folder), a hub name "
                           "or smollm2-135m, with the base model's tokenizer"},
    "grpo-guided": {"guide_model": "the weak model whose prefixes guide (a folder, hub name or smollm2-135m)",
                    "guided_rollouts": "how many of each group's rollouts continue a guide prefix (1 .. group_size-1)",
                    "guide_tokens": "the guide prefix's length in tokens (below max_new_tokens)"},
    "grpo-hinted": {"hint": 'the hint kind: hint = "all-wrong" (an all-wrong group is sampled again from a hint)'},
}
EVALUATIONS = {  # evaluator -> the keys a study file may set (defaults: the evaluator's options class)
    "passk": ("n", "k", "temperature", "top_p", "max_new_tokens", "batch_size", "seed", "limit"),
    "entropy": ("fit",),  # Cui et al.'s law is for one trajectory; the report fits it on trainer logs
    "length": ("quantiles",),
    "groups": ("group_sizes", "target"),
    "diff": ("atol", "threads"),
    "forgetting": ("suite", "limit", "max_new_tokens", "batch_size", "kl_prompts", "kl_samples", "kl_max_new_tokens"),
    "interpolate": ("points", "n", "k", "temperature", "max_new_tokens", "batch_size", "limit", "seed"),
    "curves": ("n", "k", "temperature", "top_p", "max_new_tokens", "batch_size", "seed", "limit"),
    "passk-nucleus": ("n", "k", "temperature", "top_p", "max_new_tokens", "batch_size", "seed", "limit"),
    "passk-final": ("n", "k", "temperature", "top_p", "max_new_tokens", "batch_size", "seed", "limit"),
    "masked": ("fractions", "mask_by", "scope", "mask_seed"),
    "sparsity": ("qs", "bf16_completions", "rank", "bf16_scales"),
}
EVALUATIONS["forgetting"] += ("kl_task", "mc_files")
# Keys added to an evaluation after studies recorded it, at the value that reproduces what those
# studies ran: left out of the options (and so of the stage identity) at that value, so a study
# recorded before them still reads as done.
ADDED_KEYS = {"forgetting": {"kl_task": None, "mc_files": [], "base_once": False}, "sparsity": {"bf16_scales": [1.0]},
              **{k: {"limit": 0} for k in ("passk", "curves", "passk-nucleus", "passk-final")}}  # 0: all
HELD_OUT_LIMIT = ("passk", "curves", "passk-nucleus", "passk-final")  # `limit`: the first N held-out problems; left out: all
SEEDED_ONLY = ("curves", "passk-nucleus", "passk-final", "sparsity", "masked")  # evaluations of a study with `seeds`
TOLERANCE = 0.10  # largest allowed relative difference between the methods' budgets
SAMPLE = 50  # problems generated per split to check names, configs and ids
TOP_KEYS = {"title", "base_model", "dtype", "device", "seed", "seeds", "train_task", "eval_task", "validation",
            "budget", "methods", "evaluations", "report", "claims"}
SET_BY_STUDY = {"model", "task", "task_size", "task_seed", "task_config", "dtype", "device", "out", "preset",
                "question_field", "answer_field", "id_field"}


@dataclass(frozen=True)
class Trainer:
    """One trainer run of a method (ES-then-GRPO has two)."""

    opts: object  # ESOptions, GRPOOptions or DistillOptions: their class is their kind
    share: float  # of the method's budget
    explicit: bool  # iterations / steps given in the file: checked against the budget, not computed

    @property
    def kind(self) -> str:
        return self.opts.kind

    @property
    def count(self) -> int:
        """Its ES iterations or steps."""
        return self.opts.count

    @property
    def completions(self) -> int:
        """Completions its iterations / steps generate (hints' extra samplings not counted)."""
        return self.opts.cost()["completions"]


@dataclass(frozen=True)
class StudySpec:
    path: str
    title: str
    base_model: str
    dtype: str
    device: str
    train_task: dict  # name, size, seed, config
    eval_task: dict  # name, size, seed, config, limit
    budget: dict  # unit, per_method, spent (per method, first samplings), at_most (methods with hints)
    methods: dict  # name -> tuple of Trainer (one; es-grpo: ES then GRPO)
    evaluations: dict  # name -> its evaluator's options object (PasskOptions, DiffOptions, ...), validated
    report_title: str
    seeds: tuple = ()  # training seeds (a seeded study); () = one run at `seed`
    validation: dict | None = None  # ValidationOptions' values with the split's task (seeded studies)
    claims: str | None = None  # the claims file (analyses.claims), registered before the first training stage
    arm_seeds: dict = field(default_factory=dict)  # method -> its own seeds (those giving them; evalkit.study.arms)
    scopes: dict = field(default_factory=dict)  # evaluation -> its planner keys given: methods, seeds, base_once

    def seeds_of(self, method: str) -> tuple:
        """The seeds `method` is trained on: its own, else the study's."""
        return self.arm_seeds.get(method, self.seeds)

    def evaluates(self, name: str, model: str, seed: int | None = None) -> bool:
        """Whether evaluation `name` has a stage for `model` ("base": seed None) at `seed`: the
        evaluation is in the file, the arm and seed pass its filters, the arm was trained on the seed."""
        from evalkit.study.arms import MASKED_DEFAULT

        if name not in self.evaluations:
            return False
        scope = self.scopes.get(name, {})
        arms = scope.get("methods") or (MASKED_DEFAULT if name == "masked" else (*self.methods, "base"))
        if model not in arms:
            return False
        return model == "base" or (seed in self.seeds_of(model) and seed in scope.get("seeds", self.seeds))

    def base_once(self) -> bool:
        """forgetting's base scored once per study (a forgetting-base stage)."""
        return bool(self.scopes.get("forgetting", {}).get("base_once"))

    def recorded(self, name: str) -> dict:
        """Evaluation `name` as stage identities and study.json hold it: the keys a study file may
        set, with the options' values as the file spells them (defaults where it is silent; `limit`
        0, not the None it means); a key added since studies recorded it is left out at the value
        they ran with (ADDED_KEYS)."""
        from evalkit.study.arms import PLANNER_KEYS

        opts = self.evaluations[name]
        values = {key: plain(_spelled(opts, key)) for key in EVALUATIONS[name]}
        values |= {k: self.scopes.get(name, {}).get(k, v) for k, v in PLANNER_KEYS.get(name, {}).items()}
        added = ADDED_KEYS.get(name, {})
        return {k: v for k, v in values.items() if not (k in added and v == added[k])}


def read_spec(path: Path) -> StudySpec:
    """Parse and check a study file (see the module docstring)."""
    path = Path(path)
    raw = read_toml(path, "study file")
    _unknown(raw, TOP_KEYS, "")
    for key in ("train_task", "methods", "budget"):
        if not isinstance(raw.get(key), dict) or not raw[key]:
            raise UsageError(f"{path}: [{key}] is missing; see studies/smoke.toml for a complete study")
    for key in ("eval_task", "evaluations", "report"):
        _typed(raw, key, {}, dict, "")
    for key in ("title", "base_model", "dtype", "device"):
        if key in raw:
            _typed(raw, key, "", str, "")
    for name in raw["methods"]:
        _typed(raw["methods"], name, {}, dict, "methods.")
    common = {"dtype": raw.get("dtype", "float32"), "device": raw.get("device", "auto")}
    train = _train_task(raw["train_task"])
    held_out = _eval_task(raw.get("eval_task") or {}, train)
    seeds = _seeds(raw)
    from evalkit.study.arms import evaluation_scopes, method_seeds

    tables, arm_seeds = method_seeds(raw["methods"], seeds)
    methods = _methods(tables, raw.get("base_model", "smollm2-135m"), train, common,
                       seeds[0] if seeds else raw.get("seed", 0))
    methods, budget = _apply_budget(methods, raw["budget"])
    tables, scopes = evaluation_scopes(raw.get("evaluations") or {"passk": {}}, tuple(methods), seeds)
    evaluations = _evaluations(tables)
    validation = _validation(raw, train, held_out, bool(seeds))
    if seeds:
        _control_checkpoints(methods)
    elif extra := [e for e in SEEDED_ONLY if e in evaluations]:
        raise UsageError(f"evaluations.{extra[0]}: reads checkpoints along training and a picked one; "
                         "give seeds = [...] (and a [validation] table)")
    report = raw.get("report") or {}
    _unknown(report, {"title"}, "report.")
    title = str(raw.get("title", path.stem))
    return StudySpec(str(path), title, raw.get("base_model", "smollm2-135m"), common["dtype"], common["device"],
                     train, held_out, budget, methods, evaluations, str(report.get("title", title)), seeds,
                     validation, _claims(raw, bool(seeds)), arm_seeds, scopes)


def _claims(raw: dict, seeded: bool) -> str | None:
    """`claims = "studies/x.claims.toml"`: the pre-registered claims (analyses.claims), checked
    here; `evalkit study` records them in study.json before its first training stage."""
    if "claims" not in raw:
        return None
    path = _typed(raw, "claims", "", str, "")
    if not seeded:
        raise UsageError("claims: the pre-registered claims read a seeded study's figures; give seeds = [...]")
    from analyses.claims import read_claims

    read_claims(Path(path))  # a UsageError naming the key
    return path


def _seeds(raw: dict) -> tuple:
    """`seeds = [0, 1, 2]`: distinct non-negative integers (then `seed` may not be given)."""
    if "seeds" not in raw:
        return ()
    seeds = raw["seeds"]
    if not isinstance(seeds, list) or not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0
                                                       for s in seeds):
        raise UsageError(f"seeds {seeds!r}: give a list of training seeds, non-negative integers, e.g. [0, 1, 2]")
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"seeds {seeds}: each seed once")
    if "seed" in raw:
        raise UsageError("seed: give seeds = [...] or seed, not both")
    return tuple(seeds)


def _validation(raw: dict, train: dict, held: dict, seeded: bool) -> dict | None:
    """The stopping rule's split: ValidationOptions' values plus the task it draws from."""
    from evalkit.study.options import ValidationOptions

    table = _typed(raw, "validation", {}, dict, "")
    if not seeded:
        if table:
            raise UsageError("validation: the stopping rule picks among checkpoints of a seeded study; "
                             "give seeds = [...]")
        return None
    opts = ValidationOptions.from_table(table, "validation.")
    if opts.seed in (train["seed"], held["seed"]):
        raise UsageError(f"validation.seed {opts.seed}: the validation split needs a seed of its own (training "
                         f"{train['seed']}, held-out {held['seed']})")
    return {**plain(asdict(opts)), "name": train["name"], "config": train["config"]}


def saved_steps(opts) -> list[int]:
    """The steps a trainer saves a checkpoint at: every save_every, and the last."""
    count = opts.count
    return sorted({*range(opts.save_every, count + 1, opts.save_every), count})


def _control_checkpoints(methods: dict) -> None:
    """The GRPO control (GRPO at ES-then-GRPO's GRPO step counts) needs GRPO checkpoints there."""
    if not {"grpo", "es-grpo"} <= set(methods):
        return
    grpo, stage = methods["grpo"][0].opts, methods["es-grpo"][1].opts
    missing = sorted(set(saved_steps(stage)) - set(saved_steps(grpo)))
    if missing:
        raise UsageError(f"methods.grpo.save_every {grpo.save_every}: the GRPO control at ES-then-GRPO's GRPO "
                         f"steps needs a GRPO checkpoint at step {missing[0]} (GRPO saves at "
                         f"{', '.join(map(str, saved_steps(grpo)))}); give a save_every that divides it")


def _unknown(table: dict, known: set, prefix: str) -> None:
    extra = sorted(set(table) - set(known))
    if extra:
        raise UsageError(f"unknown key {prefix}{extra[0]}: valid keys here are {', '.join(sorted(known))}")


def _train_task(table: dict) -> dict:
    _unknown(table, {"name", "size", "seed", "config"}, "train_task.")
    if "name" not in table:
        raise UsageError("train_task.name is missing: a task name (e.g. arith, chain_sum) or a problem file")
    config = table.get("config") or {}
    if not isinstance(config, dict):
        raise UsageError(f"train_task.config: expected a table of the generator's options, got {config!r}")
    task = {"name": _typed(table, "name", "", str, "train_task."), "size": _count(table, "size", 200, "train_task.", 1),
            "seed": _count(table, "seed", 0, "train_task.", 0), "config": dict(config)}
    _load(task | {"size": min(task["size"], SAMPLE)}, "train_task")  # the name and config are valid
    return task


def _typed(table: dict, key: str, default, kind: type, prefix: str):
    """table[key] (default when absent), refused naming the key unless it is of `kind`."""
    value = table.get(key, default)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = {int: "an integer", str: "a string", float: "a number", dict: "a table"}
        raise UsageError(f"{prefix}{key} {value!r}: expected {names.get(kind, kind.__name__)}")
    return value


def _count(table: dict, key: str, default: int, prefix: str, least: int) -> int:
    value = _typed(table, key, default, int, prefix)
    if value < least:
        raise UsageError(f"{prefix}{key} {value}: must be >= {least}")
    return value


def _eval_task(table: dict, train: dict) -> dict:
    """The held-out split: the training generator with another seed, no problem id in common."""
    _unknown(table, {"seed", "size", "limit"}, "eval_task.")
    held = {**train, "seed": _count(table, "seed", train["seed"] + 1, "eval_task.", 0),
            "size": _count(table, "size", train["size"], "eval_task.", 1), "limit": _count(table, "limit", 50, "eval_task.", 1)}
    if held["seed"] == train["seed"]:
        raise UsageError(f"eval_task.seed {held['seed']}: the held-out split needs another seed than train_task.seed")
    # procedural tasks number their problems `name-seed-i`, so a sample shows whether the splits share
    # ids; a file is read whole (it has one split). Generating every problem would make --dry-run slow.
    sample = {"size": min(train["size"], SAMPLE)}
    shared = ({p.id for p in _load(train | sample, "train_task").problems}
              & {p.id for p in _load(held | {"size": min(held["size"], SAMPLE)}, "eval_task").problems})
    if shared:
        raise UsageError(f"eval_task: {len(shared)} problem ids are also in the training split "
                         f"(e.g. {sorted(shared)[0]}); a file task has one split: give another file")
    return held


def _load(task: dict, key: str):
    from evalkit.tasks import load_task

    try:
        return load_task(task["name"], size=task["size"], seed=task["seed"], config=task["config"])
    except UsageError as exc:
        raise UsageError(f"{key}: {exc}") from None


def _methods(table: dict, model: str, train: dict, common: dict, seed: int) -> dict:
    from evalkit.train.distill import DistillOptions
    from evalkit.train.es import ESOptions
    from evalkit.train.grpo import GRPOOptions

    _unknown(table, set(METHODS), "methods.")
    shared = {"model": model, "task": train["name"], "task_size": train["size"], "task_seed": train["seed"],
              "task_config": _json(train["config"]), "seed": seed, **common}
    single = {"es": (ESOptions, table.get("es", {})), "grpo": (GRPOOptions, table.get("grpo", {})),
              "distill": (DistillOptions, table.get("distill", {}))}
    single |= {v: (single[p][0], {**single[p][1], **table.get(v, {})}) for v, p in PARENT.items()}  # the parent's, then its own
    out = {}
    for name in (m for m in METHODS if m in table):
        if name == "es-grpo":
            out[name] = _es_grpo(table, shared, ESOptions, GRPOOptions)
        else:
            cls, options = single[name]
            out[name] = (_trainer(cls, options, shared, f"methods.{name}.", 1.0, name),)
    return out


def _es_grpo(table: dict, shared: dict, es_cls, grpo_cls) -> tuple:
    stage = dict(table["es-grpo"])
    _unknown(stage, {"es", "grpo", "es_share"}, "methods.es-grpo.")
    share = float(stage.get("es_share", 0.5))
    if not 0 < share < 1:
        raise UsageError(f"methods.es-grpo.es_share {share}: must be between 0 and 1")
    return (
        _trainer(es_cls, {**table.get("es", {}), **stage.get("es", {})}, shared, "methods.es-grpo.es.", share),
        _trainer(grpo_cls, {**table.get("grpo", {}), **stage.get("grpo", {})}, shared,
                 "methods.es-grpo.grpo.", 1 - share, "es-grpo"),
    )


def _trainer(cls, table: dict, shared: dict, prefix: str, share: float, method: str = "") -> Trainer:
    names = {f.name for f in fields(cls)} - SET_BY_STUDY - {"seed"}
    _method_keys(method, table, prefix)
    opts = cls.from_table(table, prefix, shared, names)  # values now; the machine when the stage runs
    _study_checks(opts, prefix)
    return Trainer(opts, share, bool({"iterations", "steps"} & set(table)))


def _method_keys(method: str, table: dict, prefix: str) -> None:
    """GRPO's guidance and hint keys make its variants (only they take them); a method's
    defining keys are required."""
    for variant, keys in VARIANT_KEYS.items():
        stray = sorted(set(keys) & set(table))
        if variant != method and stray:
            raise UsageError(f"{prefix}{stray[0]}: this key makes the method {variant}; "
                             f"put it under [methods.{variant}]")
    for key, what in REQUIRED.get(method, {}).items():
        if not table.get(key):
            raise UsageError(f"{prefix}{key} is missing: {what}")


def _study_checks(opts, prefix: str) -> None:
    """What a shared budget needs beyond the trainer's own rules."""
    if getattr(opts, "dynamic_sampling", False):
        raise UsageError(f"{prefix}dynamic_sampling: its completions per step vary, so it cannot "
                         "share a budget; leave it off in a study")


def _json(config: dict) -> str:
    import json

    return json.dumps(config, sort_keys=True)


def _spend(trainer: Trainer, total: int, unit: str) -> tuple[Trainer, int]:
    """The trainer with its iterations/steps from the budget (unless given), and what it spends."""
    opts = trainer.opts
    per = opts.completions_per_unit() * (opts.max_new_tokens if unit == "tokens" else 1)
    if not trainer.explicit:
        trainer = replace(trainer, opts=replace(opts, **{opts.units: max(1, round(total * trainer.share / per))}))
    return trainer, trainer.opts.count * per


def _apply_budget(methods: dict, table: dict) -> tuple[dict, dict]:
    _unknown(table, {"unit", "per_method"}, "budget.")
    unit = table.get("unit", "completions")
    if unit not in ("completions", "tokens"):
        raise UsageError(f"budget.unit {unit!r}: choose completions or tokens")
    total = table.get("per_method")
    if not isinstance(total, int) or total < 1:
        raise UsageError("budget.per_method: give the completions (or tokens) each method may generate, e.g. 3072")
    spent, out, at_most = {}, {}, {}
    for name, trainers in methods.items():
        done = [_spend(t, total, unit) for t in trainers]
        out[name], spent[name] = tuple(t for t, _ in done), sum(s for _, s in done)
        if any(t.opts.hint for t, _ in done if t.kind == "grpo"):  # each all-zero group sampled once more
            at_most[name] = 2 * spent[name]
    if max(spent.values()) > (1 + TOLERANCE) * min(spent.values()):
        listing = ", ".join(f"{m} {v}" for m, v in spent.items())
        raise UsageError(f"budget: the methods spend {listing} {unit}; they must be within {TOLERANCE:.0%} "
                         "of each other (change iterations/steps or the batch sizes)")
    return out, {"unit": unit, "per_method": total, "spent": spent, "at_most": at_most}


def _evaluations(table: dict) -> dict:
    """Each evaluation's options, checked by the options class that runs it (evalkit.options,
    evalkit.diff, evalkit.forgetting), naming the key of anything wrong."""
    _unknown(table, set(EVALUATIONS), "evaluations.")
    if "passk" not in table:
        raise UsageError("evaluations.passk is missing: the other evaluations read its held-out runs")
    out = {}
    for name, options in table.items():
        prefix = f"evaluations.{name}."
        if not isinstance(options, dict):
            raise UsageError(f"evaluations.{name}: expected a table of options")
        if name == "forgetting":
            options = _mc_files(options, prefix)
        out[name] = _evaluator(name).from_table(options, prefix, allowed=set(EVALUATIONS[name]))
        if name in HELD_OUT_LIMIT and "limit" not in options:  # the whole held-out split (the class's 50 is the CLI's)
            out[name] = replace(out[name], limit=None)
    return out


def _mc_files(options: dict, prefix: str) -> dict:
    """forgetting's `mc_files = {name = "path.jsonl"}` as ForgettingOptions holds it, each file there."""
    files = options.get("mc_files")
    if files is None:
        return options
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise UsageError(f'{prefix}mc_files: give a table of benchmark name = "file.jsonl", e.g. '
                         'mc_files = { facts = "studies/data/facts-mc.jsonl" }')
    for name, file in files.items():
        if not Path(file).is_file():
            raise UsageError(f"{prefix}mc_files.{name} {file}: no such file (read from the folder the command "
                             "runs in)")
    return {**options, "mc_files": tuple((name, file) for name, file in files.items())}


def _evaluator(name: str):
    """The options class that runs evaluation `name`."""
    from evalkit.diff import DiffOptions
    from evalkit.forgetting.runner import ForgettingOptions
    from evalkit.interpolate import InterpolateOptions
    from evalkit.masking import MaskOptions
    from evalkit.options import EntropyOptions, GroupsOptions, LengthOptions, PasskOptions
    from evalkit.study.options import SparsityOptions

    return {"passk": PasskOptions, "entropy": EntropyOptions, "length": LengthOptions, "groups": GroupsOptions,
            "diff": DiffOptions, "forgetting": ForgettingOptions, "interpolate": InterpolateOptions,
            "curves": PasskOptions, "passk-nucleus": PasskOptions, "passk-final": PasskOptions,
            "sparsity": SparsityOptions, "masked": MaskOptions}[name]


def _spelled(opts, key: str):
    """The value of the field a study key spells (`k` is PasskOptions' `ks`), as the file spells it."""
    f = next(f for f in fields(opts) if f.metadata.get("name", f.name) == key)
    value = getattr(opts, f.name)
    return f.metadata["none"] if value is None and "none" in f.metadata else value
