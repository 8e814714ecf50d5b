"""Zero-advantage estimator vs brute force, reports, training logs, and `evalkit groups`."""

import itertools
import json
import shutil
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from typer.testing import CliRunner

from evalkit.cli import app
from evalkit.errors import UsageError
from metrics.groups import (
    difficulty_buckets,
    smallest_group_size,
    uniform_problems,
    zero_advantage,
    zero_advantage_by_bucket,
    zero_advantage_table,
)


def brute_force(n: int, c: int, g: int) -> tuple[Fraction, Fraction]:
    """Enumerate every G-subset of n samples (c correct): exact fractions uniform."""
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), g))
    all_correct = sum(all(outcomes[i] for i in s) for s in subsets)
    all_wrong = sum(not any(outcomes[i] for i in s) for s in subsets)
    return Fraction(all_correct, len(subsets)), Fraction(all_wrong, len(subsets))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 10])
def test_estimator_matches_enumeration_of_every_subset(n):
    for c in range(n + 1):
        for g in range(1, n + 1):
            want_c, want_w = brute_force(n, c, g)
            got_c, got_w = zero_advantage(n, c, g)
            assert got_c == pytest.approx(float(want_c), abs=1e-15)
            assert got_w == pytest.approx(float(want_w), abs=1e-15)
            assert Fraction(comb(c, g) + comb(n - c, g), comb(n, g)) == want_c + want_w


def test_large_n_does_not_overflow():
    got_c, got_w = zero_advantage(2048, 1500, 512)
    assert np.isfinite(got_c) and np.isfinite(got_w)
    assert got_c == pytest.approx(comb(1500, 512) / comb(2048, 512), rel=1e-9)


def test_table_averages_over_problems_and_counts_exclusions():
    ns, cs = [4, 4, 2], [1, 4, 1]
    table = zero_advantage_table(ns, cs, [2, 4]).set_index("group_size")
    # G=2: problem 0: C(1,2)=0, C(3,2)/C(4,2)=3/6; problem 1: 1, 0; problem 2: 0, 0
    assert table.loc[2, "frac_all_correct"] == pytest.approx((0 + 1 + 0) / 3)
    assert table.loc[2, "frac_all_wrong"] == pytest.approx((0.5 + 0 + 0) / 3)
    assert table.loc[2, "n_excluded"] == 0
    # G=4: problem 2 has n=2 < 4: left out and counted
    assert table.loc[4, "n_problems"] == 2 and table.loc[4, "n_excluded"] == 1
    assert table.loc[4, "frac_zero"] == pytest.approx((0 + 1) / 2)
    assert table.loc[4, "frac_informative"] == pytest.approx(0.5)


def test_buckets_and_uniform_problems():
    ns, cs = [4, 4, 4, 4, 4, 8], [0, 1, 2, 3, 4, 7]
    assert list(difficulty_buckets(ns, cs)) == ["0", "(0,0.25]", "(0.25,0.5]", "(0.5,0.75]", "1", "(0.75,1)"]
    by_bucket = zero_advantage_by_bucket(ns, cs, [2])
    assert set(by_bucket["bucket"]) == {"0", "(0,0.25]", "(0.25,0.5]", "(0.5,0.75]", "(0.75,1)", "1"}
    assert by_bucket.set_index("bucket").loc["0", "frac_all_wrong"] == 1.0
    uniform = uniform_problems(list("abcdef"), ns, cs)
    assert uniform == {"all_correct": ["e"], "all_wrong": ["a"]}


def test_smallest_group_size_reaching_target():
    ns, cs = [16, 16], [8, 2]
    informative = {g: zero_advantage_table(ns, cs, [g]).iloc[0]["frac_informative"] for g in range(2, 17)}
    for target in (0.3, 0.6, 0.75, 0.9):
        want = next((g for g, f in informative.items() if f >= target), None)
        assert smallest_group_size(ns, cs, target) == want
    assert smallest_group_size([8, 8], [0, 8], 0.1) is None  # uniform problems never inform


# ---- training logs --------------------------------------------------------

def test_reads_evalkit_metrics_jsonl_and_ignores_torn_line(tmp_path):
    from analyses.group_stats import read_train_log

    log = tmp_path / "metrics.jsonl"
    lines = [{"step": 1, "frac_reward_zero_std": 0.5, "reward": 0.1}, {"step": 2, "loss": 1.0},
             {"step": 3, "frac_reward_zero_std": 0.25}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"step": 4, "frac_rew')
    table = read_train_log(log)
    assert table["step"].tolist() == [1, 3]
    assert table["observed_frac_zero"].tolist() == [0.5, 0.25]
    assert read_train_log(tmp_path)["step"].tolist() == [1, 3]  # the folder works too


def test_reads_trl_trainer_state(tmp_path):
    from analyses.group_stats import read_train_log

    state = {"log_history": [{"step": 10, "frac_reward_zero_std": 0.75, "loss": 0.1},
                             {"step": 20, "train/frac_reward_zero_std": 0.5}, {"step": 20, "eval_loss": 1}]}
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    table = read_train_log(tmp_path / "trainer_state.json")
    assert table.to_dict("list") == {"step": [10, 20], "observed_frac_zero": [0.75, 0.5]}


@pytest.mark.parametrize("content", ["not json at all\n", '{"log_history": 3}', '{"step": 1}\n'])
def test_unreadable_logs_are_usage_errors(tmp_path, content):
    from analyses.group_stats import read_train_log

    path = tmp_path / ("log.jsonl" if content.endswith("\n") else "trainer_state.json")
    path.write_text(content)
    with pytest.raises(UsageError):
        read_train_log(path)


# ---- CLI on real run folders ------------------------------------------------

@pytest.fixture(scope="module")
def run_dir(tiny_model, tmp_path_factory):
    """A real passk run of the tiny model, outcomes then relabelled so that
    problems span all-wrong, mixed and all-correct (the random model is never right)."""
    from evalkit.passk import PasskOptions, run_passk

    out = tmp_path_factory.mktemp("groups") / "run"
    opts = PasskOptions(model=str(tiny_model), task="arith", n=4, ks=(1, 2, 4), limit=3,
                        max_new_tokens=6, batch_size=16, grader_workers=1)
    run_passk(opts, out)
    records = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    order = sorted({r["problem_id"] for r in records})
    for r in records:  # problem 0: 0 of 4 correct, problem 1: 2 of 4, problem 2: 4 of 4
        rank = order.index(r["problem_id"])
        r["outcome"] = "correct" if r["sample_index"] < 2 * rank else "incorrect"
    (out / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return out


def test_groups_cli_writes_json_and_csv(run_dir, tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps({"step": s, "frac_reward_zero_std": f}) + "\n"
                           for s, f in [(1, 0.9), (2, 0.7)]))
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["groups", str(run_dir), "--group-sizes", "2,4,8", "--train-log",
                                      str(log), "--train-group-size", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "groups.json").read_text())
    identity = report["runs"][0]
    assert identity["task"]["name"] == "arith" and len(identity["model"]["sha256"]) == 64
    assert identity["sampling"]["n"] == 4
    sizes = {row["group_size"]: row for row in report["tables"]["sizes"]}
    # problems (n=4): c=0 -> all wrong; c=2 -> 1/6 + 1/6 at G=2, 0 at G=4; c=4 -> all correct
    assert sizes[2]["frac_all_wrong"] == pytest.approx((1 + 1 / 6) / 3)
    assert sizes[2]["frac_all_correct"] == pytest.approx((1 + 1 / 6) / 3)
    assert sizes[4]["frac_zero"] == pytest.approx(2 / 3)
    assert sizes[8]["n_excluded"] == 3 and sizes[8]["frac_zero"] is None
    assert report["uniform_problems"]["all_wrong"] and report["uniform_problems"]["all_correct"]
    assert report["smallest_group_size"] is None  # 2 of 3 problems never inform: at most 1/3
    train = report["tables"]["train_log"]
    assert [row["observed_frac_zero"] for row in train] == [0.9, 0.7]
    assert train[0]["predicted_frac_zero"] == pytest.approx(sizes[2]["frac_zero"])
    for name in ("sizes", "buckets", "problems", "train_log"):
        assert (out / f"groups_{name}.csv").is_file()
    assert "zero-advantage" in result.output


def test_groups_cli_bad_input_exits_2(run_dir, tmp_path):
    runner = CliRunner()
    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(run_dir / "summary.json", empty / "summary.json")
    (empty / "samples.jsonl").write_text("")
    bad_log = tmp_path / "trainer_state.json"
    bad_log.write_text("{oops")
    cases = [
        ["groups", str(empty)],
        ["groups", str(tmp_path / "missing")],
        ["groups", str(run_dir), "--group-sizes", "2,x"],
        ["groups", str(run_dir), "--train-log", str(bad_log)],
        ["groups", str(run_dir), "--target", "1.5"],
    ]
    for args in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert "error:" in result.output
