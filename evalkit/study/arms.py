"""Which arms and seeds a seeded study trains and evaluates: each method's own seeds and the
evaluations' `methods` / `seeds` filters, read from the study file here and asked by the planner
(StudySpec.seeds_of, StudySpec.evaluates).

    [methods.es-large]     seeds = [0, 1, 2]                       that arm on these seeds only
    [evaluations.masked]   methods = ["es-large", "grpo"]  seeds = [0]
    [evaluations.forgetting]  base_once = true                     the base scored once (forgetting-base)

Defaults: a method trains on every seed of the study; an evaluation runs on every arm (masked:
ES, large-step ES and GRPO, as before) and every seed the arm has, and, where it has one, on the
base. A filter only chooses which stages exist and is no part of a stage's identity (a stage
computes the same thing whatever else is evaluated): widening a filter later adds stages and
keeps those done. `base_once` changes how forgetting's stages run, so it is in their identity
(left out at its default, spec.ADDED_KEYS: studies recorded before it still read as done).
"""

from __future__ import annotations

from evalkit.errors import UsageError

__all__ = ["FILTERED", "SEEDS_ONLY", "MASKED_DEFAULT", "PLANNER_KEYS", "method_seeds", "evaluation_scopes"]

FILTERED = {  # evaluation -> whether its `methods` may name "base" (it has a base stage)
    "passk": True, "passk-nucleus": True, "curves": True, "passk-final": False, "masked": False, "diff": False,
    "forgetting": False}
SEEDS_ONLY = ("sparsity", "interpolate")  # they compare ES with GRPO at one seed: `seeds` only
MASKED_DEFAULT = ("es", "grpo", "es-large")  # masked's arms when it names none
PLANNER_KEYS = {"forgetting": {"base_once": False}}  # evaluation keys the planner reads, with their defaults


def _seed_list(value, key: str, allowed: tuple) -> tuple:
    """A non-empty list of distinct seeds, each one of `allowed` (the study's)."""
    if not isinstance(value, list) or not value or any(isinstance(s, bool) or not isinstance(s, int) for s in value):
        raise UsageError(f"{key} {value!r}: give a list of the study's seeds, e.g. [0, 1]")
    if len(set(value)) != len(value):
        raise UsageError(f"{key} {value}: each seed once")
    if stray := [s for s in value if s not in allowed]:
        raise UsageError(f"{key} {value}: seed {stray[0]} is not one of the study's seeds "
                         f"({', '.join(map(str, allowed))})")
    return tuple(s for s in allowed if s in value)  # in the study's order


def method_seeds(table: dict, seeds: tuple) -> tuple[dict, dict]:
    """(the method tables without `seeds`, {method: its seeds} of the methods that give them).
    A variant ([methods.es-large], grpo-guided, grpo-hinted) does not take its parent's seeds."""
    tables, chosen = {}, {}
    for name, options in table.items():
        if not isinstance(options, dict) or "seeds" not in options:
            tables[name] = options
            continue
        if not seeds:
            raise UsageError(f"methods.{name}.seeds: an arm's own seeds are a subset of the study's; give "
                             "seeds = [...] at the top of the study file")
        chosen[name] = _seed_list(options["seeds"], f"methods.{name}.seeds", seeds)
        tables[name] = {k: v for k, v in options.items() if k != "seeds"}
    return tables, chosen


def evaluation_scopes(table: dict, methods: tuple, seeds: tuple) -> tuple[dict, dict]:
    """(the evaluation tables without the planner's keys, {evaluation: {key: value}} of those given):
    `methods` and `seeds` (a seeded study's filters) and forgetting's `base_once`."""
    tables, scopes = {}, {}
    for name, options in table.items():
        if not isinstance(options, dict):
            tables[name] = options
            continue
        keys = {**dict.fromkeys(("methods", "seeds") if name in FILTERED else ("seeds",) if name in SEEDS_ONLY
                                else ()), **PLANNER_KEYS.get(name, {})}
        given = {k: options[k] for k in keys if k in options}
        tables[name] = {k: v for k, v in options.items() if k not in given}
        scope = {}
        for key, value in given.items():
            where = f"evaluations.{name}.{key}"
            if key == "base_once":
                if not isinstance(value, bool):
                    raise UsageError(f"{where} {value!r}: expected true or false")
                scope[key] = value
                continue
            if not seeds:
                raise UsageError(f"{where}: an evaluation chooses its arms and seeds in a seeded study; give "
                                 "seeds = [...]")
            scope[key] = (_seed_list(value, where, seeds) if key == "seeds"
                          else _arms(value, where, methods, FILTERED[name]))
        if scope:
            scopes[name] = scope
    return tables, scopes


def _arms(value, key: str, methods: tuple, base: bool) -> tuple:
    names = (*methods, "base") if base else methods
    if not isinstance(value, list) or not value or not all(isinstance(m, str) for m in value):
        raise UsageError(f"{key} {value!r}: give a list of the study's methods, e.g. [\"es\", \"grpo\"]")
    if stray := [m for m in value if m not in names]:
        raise UsageError(f"{key}: {stray[0]!r} is not a method of this study (choose from {', '.join(names)})")
    if len(set(value)) != len(value):
        raise UsageError(f"{key} {value}: each method once")
    if key == "evaluations.passk.methods" and "base" not in value:
        raise UsageError(f"{key}: the reports and findings read the base's passk run; add \"base\"")
    return tuple(value)
