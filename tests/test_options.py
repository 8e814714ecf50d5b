"""The options classes own their rules (evalkit.options): one declaration per default, limit
and help line, asked by the CLI, the study file and the library alike."""

from __future__ import annotations

import ast
import pathlib
from dataclasses import fields

import pytest

from evalkit.errors import UsageError
from evalkit.options import GradingOptions, OptionError, PasskOptions, ScaleOptions
from evalkit.train.es import ESOptions
from evalkit.train.grpo import GRPOOptions

ROOT = pathlib.Path(__file__).resolve().parents[1]

# An option name has one meaning in every command: each command's help starts with it.
MEANINGS = {
    "--threads": "CPU threads that compute",
    "--batch-size": "Sequences per forward pass",
    "--grader-workers": ("Grader processes", "Grader / sandbox processes"),
    "--device": ("auto, cpu, cuda", "With --model: auto, cpu, cuda"),
}


def _command_helps() -> dict[str, dict[str, str]]:
    from typer.main import get_command

    from evalkit.cli import app

    helps: dict[str, dict[str, str]] = {}

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])
            return
        for param in command.params:
            if type(param).__name__.endswith("Option"):
                helps.setdefault(param.opts[0], {})[" ".join(path)] = param.help or ""

    walk(get_command(app), [])
    return helps


@pytest.mark.parametrize("name", sorted(MEANINGS))
def test_an_option_name_means_one_thing_in_every_command(name):
    helps = _command_helps()[name]
    assert len(helps) >= 2, f"{name} is in one command only: {helps}"
    for command, text in helps.items():
        assert text.startswith(MEANINGS[name]), f"evalkit {command} {name}: {text!r}"


def test_rules_live_in_field_metadata_and_every_field_has_help():
    for cls in (PasskOptions, GRPOOptions, ESOptions):
        for f in fields(cls):
            assert f.metadata.get("help"), f"{cls.__name__}.{f.name} has no help line"


@pytest.mark.parametrize(("opts", "message"), [
    (PasskOptions(n=2, ks=(1, 32)), "--k 32: every k must be between 1 and n = 2"),
    (PasskOptions(temperature=-1.0), "--temperature -1.0: must be >= 0"),
    (PasskOptions(top_p=0.0), "--top-p 0.0: must be > 0"),
    (PasskOptions(preset="gsm9k"), "--preset gsm9k: choose gsm8k, math or aime"),
    (PasskOptions(temperature=float("nan")), "--temperature nan: give a finite number"),
    (GradingOptions(grader_workers=0), "--grader-workers 0: must be >= 1"),
    (GRPOOptions(group_size=1), "--group-size 1: must be >= 2"),
    (ESOptions(population=1), "--population 1: must be >= 2 (ES z-scores need at least 2 members)"),
])
def test_validate_names_the_option_and_the_rule(opts, message):
    with pytest.raises(OptionError) as caught:
        opts.validate(values_only=True)
    assert str(caught.value).startswith(message), str(caught.value)


def test_a_toml_table_is_the_same_class_through_the_same_validation():
    opts = PasskOptions.from_table({"n": 4, "k": [1, 2, 4]}, "evaluations.passk.")
    assert opts == PasskOptions(n=4, ks=(1, 2, 4)).validate(values_only=True)
    with pytest.raises(OptionError, match=r"^evaluations\.passk\.k 32: every k must be between 1 and n = 2"):
        PasskOptions.from_table({"n": 2, "k": [1, 32]}, "evaluations.passk.")
    with pytest.raises(OptionError, match=r"^evaluations\.passk\.n x: expected"):
        PasskOptions.from_table({"n": "x"}, "evaluations.passk.")
    with pytest.raises(UsageError, match=r"unknown key evaluations\.passk\.nn"):
        PasskOptions.from_table({"nn": 2}, "evaluations.passk.")


def test_identity_leaves_out_how_the_work_is_spread_not_what_it_computes():
    base = PasskOptions().identity()
    assert PasskOptions(grader_workers=7, ray_workers=3, threads=5).identity() == base
    assert PasskOptions(temperature=0.5).identity() != base
    assert "model" not in base and "grader_workers" not in base


def test_the_trainer_kind_is_the_class():
    assert GRPOOptions.kind == "grpo" and ESOptions.kind == "es"
    assert isinstance(GRPOOptions(), ScaleOptions) and GRPOOptions().scale() is not ESOptions().scale()


def test_no_guessing_of_option_kinds_and_one_backend_table():
    """`hasattr(opts, ...)` guessing is gone, and the backend names are declared once."""
    for path in (ROOT / "evalkit").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "hasattr" and node.args:
                target = ast.unparse(node.args[0])
                assert "opts" not in target and "options" not in target, f"{path}:{node.lineno}: {ast.unparse(node)}"
            if isinstance(node, ast.Tuple) and {ast.unparse(e) for e in node.elts} == {"'hf'", "'vllm'"}:
                assert path.name == "options.py", f"{path}:{node.lineno} declares the backends again"


def _defaults(command: str) -> dict:
    """The defaults `evalkit COMMAND --help` shows, by option name."""
    from typer.main import get_command

    from evalkit.cli import app

    cmd = get_command(app).commands[command]
    return {p.name: p.default for p in cmd.params if type(p).__name__.endswith("Option")}


@pytest.mark.parametrize(("command", "classes"), [
    ("passk", "PasskOptions"), ("groups", "GroupsOptions"), ("length", "LengthOptions"),
    ("entropy", "EntropyOptions"), ("interpolate", "InterpolateOptions")])
def test_a_command_and_the_study_agree_on_every_default(command, classes):
    """Every option a command shares with its options class (which the study file reads) has the
    class's default: the command's options are made from the class, none declared again."""
    import evalkit.interpolate
    import evalkit.options

    cls = getattr(evalkit.options, classes, None) or getattr(evalkit.interpolate, classes)
    shown = _defaults(command)
    for f in fields(cls):
        name = f.metadata.get("name", f.name)
        if name in shown and f.name not in ("model",):
            default = ",".join(map(str, f.default)) if isinstance(f.default, tuple) else f.default
            assert shown[name] == default, f"evalkit {command} --{name}: {shown[name]!r}, the class says {default!r}"


def test_a_renamed_option_keeps_its_old_name_hidden():
    from typer.testing import CliRunner

    from evalkit.cli import app

    shown = CliRunner().invoke(app, ["passk", "--help"]).output
    assert "--ray-workers" in shown and "--workers" not in shown
    used = CliRunner().invoke(app, ["passk", "--workers", "2", "--backend", "vllm"])
    assert used.exit_code == 2 and "drop --ray-workers" in used.output, used.output  # --workers is --ray-workers


def test_zero_means_all_problems_in_the_class_as_on_the_command_line():
    assert PasskOptions(limit=0).limit is None and PasskOptions(limit=7).limit == 7
    assert PasskOptions.from_table({"limit": 0}, "evaluations.passk.").limit is None


def _declared_fields() -> dict[str, list[str]]:
    """Every annotated field of every class named *Options or *Settings in the library, by
    name: where each name is declared (ClassVars are not fields)."""
    where: dict[str, list[str]] = {}
    for top in ("evalkit", "analyses"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(node, ast.ClassDef) and node.name.endswith(("Options", "Settings"))):
                    continue
                for item in node.body:
                    if (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                            and "ClassVar" not in ast.unparse(item.annotation)):
                        where.setdefault(item.target.id, []).append(f"{path.relative_to(ROOT)}:{node.name}")
    return where


def test_no_option_field_is_declared_in_two_classes():
    """A field several commands share is declared once, in the class they inherit; a command that
    needs another default names it in `own_defaults`, and a name with two meanings gets two names."""
    twice = {name: places for name, places in _declared_fields().items() if len(places) > 1}
    assert not twice, "declared in more than one class:\n" + "\n".join(
        f"  {name}: {', '.join(places)}" for name, places in sorted(twice.items()))
