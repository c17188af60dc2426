"""Check that documented numbers are still what the code gives.

Recomputes a small set of cheap, deterministic numbers (fixed seeds, one process, one
thread per fit) the way the documented command computes them, parses the same numbers
out of the docs, and exits with status 1 and one line per drifted number when they
differ. A documented number is compared within half a unit of its last printed digit
(the docs round); a number the docs no longer contain where expected is drift too.

Checks (about 5.5 minutes on 2 idle cores in total; ``--list`` prints them):

- ``fedheart``: the whole FedHeart table of docs/results.md (accuracy mean ± sd, rounds,
  MB per fit of every method over the 10 repetitions of ``fedforest experiment
  fedheart``), its per-center table, and the FedHeart megabytes quoted in the
  "Communication" section of docs/results.md and in docs/heterogeneity.md.
- ``fig2-homogeneous``: the FedForest Quantiles row of the Figure 2(a) table of
  docs/results.md (test MSE mean ± sd, rounds, MB per fit over the 20 repetitions of
  ``fedforest experiment fig2-homogeneous``; AvgImp's 20 fits would take a minute more).
- ``appendix-b``: both Appendix B tables of docs/results.md (every dataset's mean ± sd
  per method over the 3 repetitions of ``fedforest experiment appendix-b``, and each
  method's rounds and MB, the mean over the datasets; about 90 s idle).
- ``table3-fragmentation``: the Table 3 table of docs/results.md (every method's mean ±
  sd at each K over the 3 repetitions of ``fedforest experiment table3-fragmentation``,
  its rounds and MB per fit, the mean over K; about 2 minutes idle).
- ``simulate``: the numbers docs/simulate.md quotes beside its ``fedforest simulate``
  commands (the main job of the README's quick start: fedforest's test MSE, its gap to
  centralized RF, rounds and MB sent, and centralized RF's test MSE), each command run as
  written; the ``--privacy dp`` one is left out (its noise is not seeded).

Usage::

    python benchmarks/check_docs.py                 # every check
    python benchmarks/check_docs.py --only fedheart
    python benchmarks/check_docs.py --list

``tests/test_docs_numbers.py`` runs the cheapest comparisons (FedHeart, FedForest
Quantiles; the default ``fedforest simulate``) in the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

try:  # running from a checkout without ``pip install -e .``
    import fedforest  # noqa: F401
except ModuleNotFoundError as exc:
    if exc.name != "fedforest":
        raise
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd

from fedforest.cli import main as fedforest_main
from fedforest.experiments import _methods as M
from fedforest.experiments._runner import summarize
from fedforest.experiments.paper import get_experiment
from fedforest.experiments.real import FRAGMENTATION_METHODS, PANEL_METHODS

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results.md"
HETEROGENEITY = ROOT / "docs" / "heterogeneity.md"
SIMULATE = ROOT / "docs" / "simulate.md"

FEDHEART_SECTION = "Figure 2 (d): FedHeart"
FIG2A_SECTION = "(a) Homogeneous"
COMMUNICATION_SECTION = "Communication"
APPENDIX_B_SECTION = "Appendix B: real tabular datasets"
TABLE3_SECTION = "Table 3: fragmentation"
FEDHEART_FEDERATED = (M.QUANTILES, M.QUANTILES_H, M.AVGIMP, M.AVGIMP_H, M.HISTOGRAM)


# --------------------------------------------------------------------------- docs


class DocError(ValueError):
    """A number the check expects is not where the docs should have it."""


def section(path: Path, heading: str) -> str:
    """The text under the first Markdown heading that starts with ``heading``, up to the next
    heading of its level or above.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"(#+)\s+(.*)", line)
        if m and m.group(2).strip().startswith(heading):
            level = len(m.group(1))
            body = []
            for nxt in lines[i + 1 :]:
                n = re.match(r"(#+)\s", nxt)
                if n and len(n.group(1)) <= level:
                    break
                body.append(nxt)
            return "\n".join(body)
    raise DocError(f"{path.name}: no heading {heading!r}")


def tables(text: str) -> list[list[dict[str, str]]]:
    """Every Markdown table of ``text``: a list of rows, each {header: cell}."""
    found, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
            continue
        if len(block) >= 2:
            header, rows = block[0], block[2:]
            found.append([dict(zip(header, row, strict=True)) for row in rows])
        block = []
    return found


def table_with(text: str, column: str, where: str) -> dict[str, dict[str, str]]:
    """The first table of ``text`` with a column ``column``, keyed by its first column."""
    for rows in tables(text):
        if rows and column in rows[0]:
            first = next(iter(rows[0]))
            return {row[first]: row for row in rows}
    raise DocError(f"{where}: no table with a column {column!r}")


@dataclass(frozen=True)
class Printed:
    """A number as the docs print it."""

    value: float
    decimals: int

    @classmethod
    def parse(cls, text: str, where: str) -> Printed:
        m = re.fullmatch(r"\s*(-?\d+(?:\.(\d+))?)\s*", text.replace("−", "-"))
        if not m:
            raise DocError(f"{where}: {text!r} is not a number")
        return cls(float(m.group(1)), len(m.group(2) or ""))

    def matches(self, computed: float) -> bool:
        """``computed`` printed with the docs' decimals gives the documented number."""
        return abs(computed - self.value) <= 0.5 * 10.0**-self.decimals + 1e-9

    def __str__(self) -> str:
        return f"{self.value:.{self.decimals}f}"


def mean_sd(cell: str, where: str) -> tuple[Printed, Printed]:
    """``"0.800 ± 0.016"`` -> the two printed numbers."""
    parts = cell.split("±")
    if len(parts) != 2:
        raise DocError(f"{where}: {cell!r} is not 'mean ± sd'")
    return Printed.parse(parts[0], where), Printed.parse(parts[1], where)


# --------------------------------------------------------------------------- comparing


@dataclass(frozen=True)
class Comparison:
    """One documented number against the code's."""

    where: str
    documented: Printed | None = None
    computed: float | None = None

    @classmethod
    def missing(cls, exc: DocError) -> Comparison:
        """A number the docs should hold and do not (always drift)."""
        return cls(str(exc))

    @property
    def ok(self) -> bool:
        if self.documented is None or self.computed is None:
            return False
        return self.documented.matches(self.computed)

    def line(self) -> str:
        if self.computed is None:
            return f"DRIFT {self.where}"
        status = "ok   " if self.ok else "DRIFT"
        return (
            f"{status} {self.where}: docs {self.documented}, code "
            f"{self.computed:.{max(self.documented.decimals, 3) + 1}f}"
        )


def _run(name: str, methods: Sequence[str], seed: int = 0) -> pd.DataFrame:
    """``fedforest experiment NAME --seed SEED`` restricted to ``methods``, in process.

    Same data, seeds and aggregation as the command (repetition r uses seed 1000 s + r,
    one thread per fit); only the other methods are left out, which changes nothing for
    these (every method is fitted on its own).
    """
    exp = get_experiment(name)
    exp = replace(exp, run=partial(exp.run, methods=tuple(methods)))
    records: list[dict[str, Any]] = []
    for rep in range(exp.default_reps):
        for setting in exp.settings:
            for r in exp.run(setting, rep, 1000 * seed + rep, 1):
                records.append({"rep": rep, **r})
    return pd.DataFrame(records)


def _compare_rows(
    doc: Callable[[], dict[str, dict[str, str]]],
    summary: pd.DataFrame,
    score_column: str,
    where: str,
) -> list[Comparison]:
    """Mean ± sd, rounds and MB of every method of ``summary`` against the doc's table."""
    try:
        table = doc()
    except DocError as exc:
        return [Comparison.missing(exc)]
    out = []
    for _, row in summary.iterrows():
        method = row["method"]
        at = f"{where}, {method}"
        try:
            if method not in table:
                raise DocError(f"{where}: no row {method!r}")
            cells = table[method]
            mean, sd = mean_sd(cells[score_column], at)
            out += [
                Comparison(f"{at}, {score_column} mean", mean, row["mean"]),
                Comparison(f"{at}, {score_column} sd", sd, row["std"]),
            ]
            for column, value in (("rounds", row["rounds"]), ("MB per fit", row["megabytes"])):
                out.append(Comparison(f"{at}, {column}", Printed.parse(cells[column], at), value))
        except (DocError, KeyError) as exc:
            out.append(Comparison.missing(DocError(f"{at}: {exc}")))
    return out


def _quoted(text: Callable[[], str], pattern: str, where: str) -> list[Printed]:
    m = re.search(pattern, text(), re.S)
    if not m:
        raise DocError(f"{where}: no sentence matching {pattern!r}")
    return [Printed.parse(g, where) for g in m.groups()]


#: "(FedHeart: 4.1 MB for AvgImp + Top-L against 3.2 MB exact)"
FEDHEART_MB_SENTENCE = (
    r"FedHeart:\s*([\d.]+)\s*MB for AvgImp\s*\+\s*Top-L\s+against\s*([\d.]+)\s*MB exact"
)


def check_fedheart(methods: Sequence[str] = tuple(M.METHOD_ORDER)) -> list[Comparison]:
    """docs/results.md's FedHeart tables (and the FedHeart MB quoted elsewhere)."""
    frame = _run("fedheart", methods)
    summary = summarize(get_experiment("fedheart"), frame)
    where = f"results.md {FEDHEART_SECTION!r}"

    def text() -> str:
        return section(RESULTS, FEDHEART_SECTION)

    score = "accuracy (pooled test)"
    out = _compare_rows(lambda: table_with(text(), score, where), summary, score, where)
    by_group = frame.pivot_table(index="method", columns="group", values="score", aggfunc="mean")
    try:
        per_center = table_with(text(), "Cleveland", where + " per center")
        for method in summary["method"]:
            for group in by_group.columns:
                column = "pooled test" if group == "all" else group
                at = f"{where} per center, {method}, {column}"
                try:
                    printed = Printed.parse(per_center[method][column], at)
                except KeyError as exc:
                    raise DocError(f"{at}: no cell {exc}") from exc
                out.append(Comparison(at, printed, by_group.loc[method, group]))
    except DocError as exc:
        out.append(Comparison.missing(exc))
    mb = dict(zip(summary["method"], summary["megabytes"], strict=True))
    if M.QUANTILES in mb and M.AVGIMP in mb:
        quoted = (
            ("heterogeneity.md", lambda: HETEROGENEITY.read_text(encoding="utf-8")),
            (
                f"results.md {COMMUNICATION_SECTION!r}",
                lambda: section(RESULTS, COMMUNICATION_SECTION),
            ),
        )
        for at, doc_text in quoted:
            try:
                avg, exact = _quoted(doc_text, FEDHEART_MB_SENTENCE, at)
            except DocError as exc:
                out.append(Comparison.missing(exc))
                continue
            out += [
                Comparison(f"{at}, FedHeart AvgImp + Top-L MB", avg, mb[M.AVGIMP]),
                Comparison(f"{at}, FedHeart exact MB", exact, mb[M.QUANTILES]),
            ]
    return out


def check_fig2_homogeneous(methods: Sequence[str] = (M.QUANTILES,)) -> list[Comparison]:
    """docs/results.md's Figure 2(a) table, FedForest Quantiles row."""
    frame = _run("fig2-homogeneous", methods)
    summary = summarize(get_experiment("fig2-homogeneous"), frame)
    where = f"results.md {FIG2A_SECTION!r}"

    def doc() -> dict[str, dict[str, str]]:
        return table_with(section(RESULTS, FIG2A_SECTION), "test MSE", where)

    return _compare_rows(doc, summary, "test MSE", where)


def _mean_sd_cells(
    summary: pd.DataFrame, at_of: Callable[[Any], str], cell_of: Callable[[Any], str]
) -> list[Comparison]:
    """Each summary row's mean and sd against its "mean (sd)" cell (``cell_of(row)``)."""
    out: list[Comparison] = []
    for _, row in summary.iterrows():
        at = at_of(row)
        try:
            mean, sd = mean_sd(cell_of(row), at)
        except (DocError, KeyError) as exc:
            out.append(Comparison.missing(DocError(f"{at}: no cell {exc}")))
            continue
        out += [
            Comparison(f"{at}, mean", mean, row["mean"]),
            Comparison(f"{at}, sd", sd, row["std"]),
        ]
    return out


def _cost_cells(
    summary: pd.DataFrame,
    at_of: Callable[[Any], str],
    cells_of: Callable[[str], dict[str, str]],
    mb_column: str,
) -> list[Comparison]:
    """Each method's mean rounds and MB against its row's ``rounds`` and ``mb_column``."""
    out: list[Comparison] = []
    comm = summary.groupby("method", sort=False)[["rounds", "megabytes"]].mean()
    for method, row in comm.iterrows():
        at = at_of(method)
        try:
            cells = cells_of(str(method))
            mb = Printed.parse(cells[mb_column], at)
            out += [
                Comparison(f"{at}, rounds", Printed.parse(cells["rounds"], at), row["rounds"]),
                Comparison(f"{at}, MB", mb, row["megabytes"]),
            ]
        except (DocError, KeyError) as exc:
            out.append(Comparison.missing(DocError(f"{at}: no cell {exc}")))
    return out


def compare_appendix_b(frame: pd.DataFrame) -> list[Comparison]:
    """``frame`` (records of ``fedforest experiment appendix-b``) against results.md's tables."""
    summary = summarize(get_experiment("appendix-b"), frame)
    where = f"results.md {APPENDIX_B_SECTION!r}"
    try:
        text = section(RESULTS, APPENDIX_B_SECTION)
        scores = table_with(text, "dataset", where)
        costs = table_with(text, "rounds", where + " communication")
    except DocError as exc:
        return [Comparison.missing(exc)]
    return _mean_sd_cells(
        summary,
        lambda row: f"{where}, {row['dataset']}, {row['method']}",
        lambda row: scores[row["dataset"]][row["method"]].replace("**", ""),  # bold: the best
    ) + _cost_cells(
        summary,
        lambda method: f"{where} communication, {method}",
        lambda method: costs[method],
        "MB (mean over datasets)",
    )


def check_appendix_b() -> list[Comparison]:
    """docs/results.md's Appendix B tables: every dataset and method, and the communication."""
    return compare_appendix_b(_run("appendix-b", PANEL_METHODS))


def compare_table3(frame: pd.DataFrame) -> list[Comparison]:
    """``frame`` (records of ``fedforest experiment table3-fragmentation``) against Table 3."""
    summary = summarize(get_experiment("table3-fragmentation"), frame)
    where = f"results.md {TABLE3_SECTION!r}"
    try:
        table = table_with(section(RESULTS, TABLE3_SECTION), "K = 1", where)
    except DocError as exc:
        return [Comparison.missing(exc)]
    return _mean_sd_cells(
        summary,
        lambda row: f"{where}, {row['method']}, K = {row['K']}",
        lambda row: table[row["method"]][f"K = {row['K']}"],
    ) + _cost_cells(summary, lambda method: f"{where}, {method}", lambda m: table[m], "MB per fit")


def check_table3() -> list[Comparison]:
    """docs/results.md's Table 3: every method at every K, and its communication."""
    return compare_table3(_run("table3-fragmentation", FRAGMENTATION_METHODS))


#: A command of docs/simulate.md and the numbers its comment quotes:
#: "fedforest simulate --privacy none   # 0.538, +0.2 %, 17 rounds, 77.9 MB"
SIMULATE_COMMAND = re.compile(
    r"^fedforest simulate(?P<args>[^#\n]*)#[^\d\n]*(?P<mse>\d+\.\d+),\s*"
    r"(?P<gap>[+-]\d+(?:\.\d+)?)\s*%,\s*(?P<rounds>\d+) rounds,\s*(?P<mb>\d+(?:\.\d+)?) MB",
    re.M,
)
SIMULATE_CENTRALIZED = r"\(centralized RF (\d+\.\d+) in each"
#: What ``fedforest simulate`` prints: its table's rows and the gap line.
SIMULATE_PRINTED = {
    "mse": r"^fedforest\s+(\d+\.\d+)\s",
    "rounds": r"^fedforest\s+\S+\s+\S+\s+(\d+)\s",
    "mb": r"^fedforest\s+\S+\s+\S+\s+\S+\s+(\d+\.\d+)\s*$",
    "gap": r"^fedforest vs centralized RF: ([+-]\d+\.\d+) %",
    "centralized": r"^centralized RF\s+(\d+\.\d+)\s",
}


def _simulate(args: Sequence[str]) -> dict[str, float]:
    """``fedforest simulate ARGS`` as the doc writes it, in process: its printed numbers."""
    with tempfile.TemporaryDirectory() as tmp:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = fedforest_main(["simulate", *args, "--out", str(Path(tmp) / "s.png")])
    if status != 0:
        raise RuntimeError(f"fedforest simulate {' '.join(args)}: exit status {status}")
    printed = {}
    for key, pattern in SIMULATE_PRINTED.items():
        m = re.search(pattern, out.getvalue(), re.M)
        if not m:
            raise RuntimeError(f"fedforest simulate printed no {key!r}:\n{out.getvalue()}")
        printed[key] = float(m.group(1))
    return printed


def check_simulate(commands: int | None = None) -> list[Comparison]:
    """docs/simulate.md's quoted `fedforest simulate` results (its first ``commands``)."""
    where = "simulate.md"
    text = SIMULATE.read_text(encoding="utf-8")
    found = list(SIMULATE_COMMAND.finditer(text))[:commands]
    if not found:
        return [Comparison.missing(DocError(f"{where}: no commented fedforest simulate line"))]
    try:
        (centralized,) = _quoted(lambda: text, SIMULATE_CENTRALIZED, where)
    except DocError as exc:
        centralized = None
        out = [Comparison.missing(exc)]
    else:
        out = []
    for m in found:
        args = m.group("args").split()
        at = f"{where}, fedforest simulate {' '.join(args)}".rstrip()
        printed = _simulate(args)
        for key, label in (("mse", "test MSE"), ("gap", "% gap"), ("rounds", "rounds")):
            documented = Printed.parse(m.group(key).lstrip("+"), at)
            out.append(Comparison(f"{at}, {label}", documented, printed[key]))
        out.append(Comparison(f"{at}, MB sent", Printed.parse(m.group("mb"), at), printed["mb"]))
        if centralized is not None:
            out.append(Comparison(f"{at}, centralized RF", centralized, printed["centralized"]))
    return out


CHECKS: dict[str, Callable[[], list[Comparison]]] = {
    "fedheart": check_fedheart,
    "fig2-homogeneous": check_fig2_homogeneous,
    "appendix-b": check_appendix_b,
    "table3-fragmentation": check_table3,
    "simulate": check_simulate,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--only", nargs="+", choices=list(CHECKS), help="checks to run")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.add_argument("--verbose", action="store_true", help="print every comparison")
    args = parser.parse_args(argv)
    if args.list:
        for name, fn in CHECKS.items():
            print(f"{name:<21} {(fn.__doc__ or '').strip()}")
        return 0
    drift = 0
    for name in args.only or list(CHECKS):
        start = time.perf_counter()
        comparisons = CHECKS[name]()
        bad = [c for c in comparisons if not c.ok]
        drift += len(bad)
        for c in comparisons if args.verbose else bad:
            print(c.line())
        seconds = time.perf_counter() - start
        print(
            f"{name}: {len(comparisons) - len(bad)} of {len(comparisons)} numbers as documented"
            f" ({seconds:.0f} s)"
        )
    if drift:
        print(
            f"{drift} documented number(s) differ from what the code gives: rerun the command"
            " the doc cites and update the doc (or fix the code).",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
