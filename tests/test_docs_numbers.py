"""Documented numbers are what the code gives (the cheapest check of benchmarks/check_docs.py).

``python benchmarks/check_docs.py`` runs every check (about a minute); this test runs the
FedForest Quantiles row of docs/results.md's FedHeart tables: 10 fixed-seed fits of
``fedforest experiment fedheart``, compared on accuracy (mean, sd, per center), rounds
and MB per fit.
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
