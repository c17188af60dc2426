"""Documented numbers are what the code gives (the cheapest checks of benchmarks/check_docs.py).

``python benchmarks/check_docs.py`` runs every check (about two minutes); these tests run
the FedForest Quantiles row of docs/results.md's FedHeart tables: 10 fixed-seed fits of
``fedforest experiment fedheart``, compared on accuracy (mean, sd, per center), rounds
and MB per fit; and the default ``fedforest simulate`` (the README's quick start), compared
on the numbers docs/simulate.md quotes.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "check_docs.py"


@pytest.fixture(scope="module")
def check_docs():
    spec = importlib.util.spec_from_file_location("check_docs", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_printed_numbers_match_within_their_rounding_only(check_docs):
    printed = check_docs.Printed.parse("3.19", "here")
    assert printed.matches(3.1865) and printed.matches(3.194)
    assert not printed.matches(3.1849) and not printed.matches(3.196)
    assert check_docs.Printed.parse("17", "here").matches(17.0)
    assert not check_docs.Printed.parse("17", "here").matches(18.0)
    assert not check_docs.Comparison.missing(check_docs.DocError("gone")).ok


def test_missing_sentence_is_drift(check_docs):
    with pytest.raises(check_docs.DocError):
        check_docs._quoted(lambda: "no numbers here", check_docs.FEDHEART_MB_SENTENCE, "doc")


def test_fedheart_quantiles_as_documented(check_docs):
    comparisons = check_docs.check_fedheart(methods=(check_docs.M.QUANTILES,))
    # accuracy mean and sd, rounds, MB; pooled test and the 4 centers: nothing skipped
    assert len(comparisons) == 9
    drift = [c.line() for c in comparisons if not c.ok]
    assert not drift, "docs/results.md no longer matches the code:\n" + "\n".join(drift)


def test_simulate_default_as_documented(check_docs):
    """The README's quick start: the default ``fedforest simulate``'s numbers that
    docs/simulate.md quotes (test MSE, gap, rounds, MB sent, centralized RF)."""
    comparisons = check_docs.check_simulate(commands=1)
    assert [c.where.rsplit(", ", 1)[1] for c in comparisons] == [
        "test MSE", "% gap", "rounds", "MB sent", "centralized RF"
    ]  # fmt: skip
    drift = [c.line() for c in comparisons if not c.ok]
    assert not drift, "docs/simulate.md no longer matches the code:\n" + "\n".join(drift)


def test_simulate_quotes_are_read_and_a_changed_one_is_drift(check_docs, tmp_path, monkeypatch):
    """Each commented command of docs/simulate.md runs with its own options; a number that
    differs from what the command prints is drift (the command faked here: no fit)."""
    text = check_docs.SIMULATE.read_text(encoding="utf-8")
    ran = []

    def printed(args):
        ran.append(list(args))
        return {"mse": 0.5482, "gap": 2.1, "rounds": 19.0, "mb": 68.878, "centralized": 0.5368}

    monkeypatch.setattr(check_docs, "_simulate", printed)
    doc = tmp_path / "simulate.md"
    monkeypatch.setattr(check_docs, "SIMULATE", doc)
    doc.write_text(text, encoding="utf-8")
    comparisons = check_docs.check_simulate()
    assert ran[:3] == [[], ["--privacy", "none"], ["--privacy", "none", "--binning", "global"]]
    assert len(ran) == 3  # the dp command quotes a range, not a result: not run
    assert all(c.ok for c in comparisons[:5])  # the default command's, as faked above
    doc.write_text(text.replace("test MSE 0.548, +2.1 %", "test MSE 0.558, +2.1 %"))
    ran.clear()
    drift = [c.where for c in check_docs.check_simulate(commands=1) if not c.ok]
    assert drift == ["simulate.md, fedforest simulate, test MSE"]
