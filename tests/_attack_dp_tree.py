"""privacy="dp" audited inside a tree: an entry of Round A or B, moved by the canary's count.

Red team 15 audited the first grid round's targets histogram, where a row counts once.
Inside a tree a row counts as often as its bootstrap draws it: the root node's Round A
summary carries ``sum c_i z_i`` (``c_i`` the row's secret count, ``z_i`` its standardised,
clipped target). The code caps ``c_i`` at ``max_weight`` under "dp" (``Client._counts``)
and scales the entry's noise by ``max_weight * clip`` (``SecureParty.bounds``), so a
replaced row moves it by at most 2 of those units, which the accountant charges.

The audit: three clients of 20 rows, one tree of depth 1. ``D``: row 0 of ``c0`` has the
target ``-1e6``, ``D'``: ``+1e6``; both clip (``z = -clip`` or ``+clip``). Each fit runs to
its first Round A; the release is the sum of the clients' noisy summaries (what the server
decodes: the masks cancel mod ``2^64``), recorded with the values before noise and the
canary's count in tree 0 (white box: the auditor knows everything but the noise, the
strongest auditor). The statistic is the release less every other row's exact part, in
units of the plan's noise for that entry: ``N(-c0 clip / s, 1)`` under ``D``, ``N(+c0 clip
/ s, 1)`` under ``D'`` (``s = sigma * max_weight * clip``). ``force``: the canary's raw
count set to ``force`` in every tree (a row drawn many times); ``cap_off``: the cap
lifted for it (the control, with ``force`` above ``max_weight``).

Red team 17 audits more entries (``where``, :data:`WHERE`): the root's Round B increment
holding the canary (its interval between consecutive candidates: the clients send
increments under "dp", so a row is in one; in no increment when above every candidate,
counted as count 0), and the summary of the depth-1 node holding it (a tree of depth 2,
run to its second Round A; the canary's node found from its client's routing, white box),
and the root's category group holding it (``where="group"``: the feature as a category
column of 4 levels, declared; the group from the request's ``group_map``).
``task="classification"``: labels 0 and 1, the canary's 0 in ``D`` and 1 in ``D'``; the
statistic is the class columns' difference over ``sqrt(2)`` (the Neyman-Pearson direction
for equal noise on both), which the canary moves by ``sqrt(2) c`` of the bound
``max_weight``. Fits without the audited entry (the root not split; no candidate) are
left out. The clients' noise shares are recorded per thread (they answer in threads).
"""

from __future__ import annotations

import math
import threading
import warnings
from typing import Any, TypedDict, Unpack

import numpy as np
import pandas as pd
import pytest

import fedforest as ff
from fedforest.federated import client as client_module
from fedforest.federated import client_secure
from fedforest.federated.privacy import dp
from fedforest.federated.protocol import ROUND_A, ROUND_B, Message
from tests._attack_dp import dp_epsilon, epsilon_lower, mu_of, scaled_noise, seeded_secrets
from tests.test_privacy import RecordingFederation

SUM_Z = 2  # the summary's column of sum c z (rows, weight, sum z, sum z^2)
#: The audited entries: the root's Round A summary, the root's Round B increment the
#: canary falls in (its interval between two candidates), the depth-1 node's summary.
WHERE = ("root", "round_b", "deep", "group")
#: The round after which the fit stops (the audited release is made): (kind, level).
_STOP = {"root": (ROUND_A, 0), "round_b": (ROUND_B, 0), "deep": (ROUND_A, 1), "group": (ROUND_B, 0)}
#: ``where="group"``: the one feature as a category column of these levels (its quartiles).
LEVELS = ["L0", "L1", "L2", "L3"]


def tree_clients(
    sign: float, seed: int = 0, task: str = "regression", n_rows: int = 20, group: bool = False
) -> list[ff.Client]:
    """Three clients of ``n_rows`` rows, one feature; row 0 of ``c0`` is the canary.

    Regression: its target ``sign * 1e6`` (clipped either way). Classification: labels 0
    and 1 (the target above its median), the canary's ``0`` for ``sign < 0``, else ``1``.
    ``group``: the feature as a category column ``c`` of :data:`LEVELS` (its quartiles).
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(3 * n_rows, 1))
    y = X[:, 0] + 0.3 * rng.normal(size=3 * n_rows)
    if task == "classification":
        y = (y > np.median(y)).astype(np.int64)
        y[0] = 0 if sign < 0 else 1
    else:
        y[0] = sign * 1e6
    if group:
        codes = np.digitize(X[:, 0], np.quantile(X[:, 0], [0.25, 0.5, 0.75]))
        frame = pd.DataFrame({"c": pd.Categorical.from_codes(codes, categories=LEVELS)})
        return [
            ff.Client(frame.iloc[i::3].reset_index(drop=True), y[i::3], name=f"c{i}")
            for i in range(3)
        ]
    return [ff.Client(X[i::3], y[i::3], name=f"c{i}") for i in range(3)]


class _Audited(Exception):
    """The audited release is made: the rest of the fit would not change the test."""


class _UpToTheEntry(RecordingFederation):
    """Records the rounds up to the audited one (``stop``: its kind and level), then stops."""

    def __init__(self, inner: Any, stop: tuple[str, int]) -> None:
        super().__init__(inner)
        self.stop, self.seen = stop, {ROUND_A: -1, ROUND_B: -1}

    def send_and_receive(self, requests: dict[str, Message], round_index: int) -> Any:
        replies = super().send_and_receive(requests, round_index)
        kind = next(iter(requests.values())).kind
        if kind in self.seen:
            self.seen[kind] += 1
            if (kind, self.seen[kind]) == self.stop:
                raise _Audited
        return replies


class _Recorder:
    """Every client's noisy calls per (client, round kind, level), and the canary's place.

    The clients answer in threads: the round being answered is kept per thread.
    """

    def __init__(self) -> None:
        self.here = threading.local()
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """A new fit."""
        self.calls: dict[tuple[str, str, int], list[tuple[np.ndarray, np.ndarray]]] = {}
        self.levels: dict[tuple[str, str], int] = {}
        self.canary: dict[tuple[str, int], dict[str, Any]] = {}
        self.y0 = 0.0

    def enter(self, name: str, kind: str, fit: Any) -> tuple[str, str, int]:
        with self.lock:
            level = self.levels.get((name, kind), -1) + 1
            self.levels[(name, kind)] = level
        key = (name, kind, level)
        self.calls[key] = []
        self.here.key = key
        if name == "c0":  # the canary's in-bag entry, if any: its node (slot) and count
            at = np.flatnonzero((fit.rows == 0) & (fit.slot >= 0))
            self.canary[(kind, level)] = {
                "slot": int(fit.slot[at[0]]) if at.size else -1,
                "count": float(fit.w[at].sum()),
                "pair_off": None if fit.pair_off is None else np.array(fit.pair_off),
                "y0": float(fit.y[0]),  # standardised and clipped, or its class code
            }
        return key

    def patch(self, mp: pytest.MonkeyPatch) -> None:
        noisy = client_secure.SecureParty.noisy
        round_a, round_b = client_secure.SecureParty.round_a, client_secure.SecureParty.round_b
        left_stats = client_module.Client._left_stats
        rec = self

        def record_round_a(self: Any, msg: Message, fit: Any, summary: np.ndarray) -> Message:
            rec.enter(self.client.name, ROUND_A, fit)
            try:
                return round_a(self, msg, fit, summary)
            finally:
                rec.here.key = None

        def record_round_b(self: Any, msg: Message, fit: Any) -> Message:
            key = rec.enter(self.client.name, ROUND_B, fit)
            if key[0] == "c0":  # the category groups asked for, and the canary's code
                names = ("group_pair", "group_off", "group_map", "n_groups")
                rec.canary[key[1:]]["groups"] = [np.array(msg.arrays[a]) for a in names]
                rec.canary[key[1:]]["code"] = int(self.client.Xt[0, 0])
            try:
                return round_b(self, msg, fit)
            finally:
                rec.here.key = None

        def record_left(self: Any, fit: Any, cand_off: Any, cand: Any, *a: Any) -> Any:
            key = getattr(rec.here, "key", None)
            if key is not None and key[0] == "c0":
                rec.canary[key[1:]]["cands"] = (np.array(cand_off), np.array(cand))
            return left_stats(self, fit, cand_off, cand, *a)

        def record_noisy(self: Any, msg: Message, values: Any, *a: Any, **k: Any) -> Any:
            out = noisy(self, msg, values, *a, **k)
            key = getattr(rec.here, "key", None)
            if key is not None:
                rec.calls[key].append((np.array(values, dtype=np.float64), np.array(out)))
            return out

        mp.setattr(client_secure.SecureParty, "round_a", record_round_a)
        mp.setattr(client_secure.SecureParty, "round_b", record_round_b)
        mp.setattr(client_module.Client, "_left_stats", record_left)
        mp.setattr(client_secure.SecureParty, "noisy", record_noisy)

    def entry(self, where: str, x0: float) -> tuple[int, float] | None:
        """The audited entry's row in the first noisy array of the round, and the canary's
        count in it (0 if the canary is in no such entry); None if there is no entry."""
        kind, level = _STOP[where]
        place = self.canary.get((kind, level))
        if place is None:
            return None
        slot, count = place["slot"], place["count"]
        self.y0 = place["y0"]
        if kind == ROUND_A:
            return (slot, count) if slot >= 0 else (0, 0.0)
        if where == "group":
            if slot < 0:
                return None
            pair, off, group_map, n_groups = place["groups"]
            at = np.flatnonzero(pair == int(place["pair_off"][slot]))
            if not at.size:
                return None
            i = int(at[0])
            g = int(group_map[int(off[i]) + place["code"]])
            return (int(np.sum(n_groups[:i])) + g, count) if g >= 0 else None
        if slot < 0 or "cands" not in place:
            return None
        cand_off, cand = place["cands"]
        p = int(place["pair_off"][slot])  # one feature: the node's one pair
        lo, hi = int(cand_off[p]), int(cand_off[p + 1])
        if hi == lo:
            return None
        i = int(np.searchsorted(cand[lo:hi], x0, side="left"))  # rows x <= e go left
        return (lo + i, count) if i < hi - lo else (lo, 0.0)  # above every candidate: none


def run_tree_fits(
    sign: float,
    n_fits: int,
    epsilon: float,
    seed: int = 0,
    force: int | None = None,
    cap_off: bool = False,
    noise_factor: float = 1.0,
    where: str = "root",
    task: str = "regression",
    n_rows: int = 20,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """``n_fits`` fits; per fit the statistic and the canary's count, and a report.

    ``where``: the audited entry (:data:`WHERE`); ``task``: ``"classification"`` audits
    the class columns (the canary's label 0 or 1) of the same entry.
    """
    stats, counts = [], []
    counts_of = client_module.Client._counts_of
    classifier = task == "classification"

    def forced(self: Any, trees: range) -> Any:
        raw = counts_of(self, trees)
        if force is not None and self.name == "c0":
            raw = raw.copy()
            raw[:, 0] = force if cap_off else min(force, int(self._secure.dp["max_weight"]))
        return raw

    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mp.setattr(client_module.Client, "_counts_of", forced)
        if noise_factor != 1.0:
            scaled_noise(mp, noise_factor)
        report: dict[str, Any] = {}
        rec = _Recorder()
        rec.patch(mp)
        for r in range(n_fits):
            seeded_secrets(mp, 1_000_003 * seed + r)
            rec.reset()
            kw: dict[str, Any] = {
                "n_estimators": 1,
                "max_depth": 2 if where == "deep" else 1,
                "privacy": "dp",
                "epsilon": epsilon,
                "random_state": r,
            }
            if where == "group":
                kw["categories"] = {"c": LEVELS}
            model = ff.FedForestClassifier(classes=[0, 1], **kw) if classifier else (
                ff.FedForestRegressor(**kw)
            )  # fmt: skip
            clients = tree_clients(sign, seed, task, n_rows, where == "group")
            fed = (
                RecordingFederation(ff.LocalFederation(clients))
                if r == 0
                else _UpToTheEntry(ff.LocalFederation(clients), _STOP[where])
            )
            try:
                model.fit_federated(fed)
                report = model.privacy_report_
            except _Audited:
                pass
            got = rec.entry(where, float(clients[0].X[0, 0]))
            if got is None:
                continue  # no such entry in this fit (a node left a leaf, no candidate)
            row, c0 = got
            kind, level = _STOP[where]
            call = 1 if where == "group" else 0  # Round B: the increments, then the groups
            parts = [rec.calls[(f"c{i}", kind, level)][call] for i in range(3)]
            if classifier:  # the class columns' difference, label 1 less label 0
                u = np.zeros(parts[0][0].shape[1])
                u[2], u[3] = -1 / math.sqrt(2), 1 / math.sqrt(2)
                canary = c0 * u[2 + int(rec.y0)]
                bound = dp.MAX_WEIGHT
            else:
                u = np.zeros(parts[0][0].shape[1])
                u[SUM_Z] = 1.0
                canary = c0 * rec.y0
                bound = dp.MAX_WEIGHT * dp.TARGET_CLIP
            exact = sum(float(v[row] @ u) for v, _ in parts)
            release = sum(float(o[row] @ u) for _, o in parts)
            stats.append((release - exact + canary) / (report_sigma(report) * bound))
            counts.append(c0)
    return np.asarray(stats), np.asarray(counts), report


def report_sigma(report: dict[str, Any]) -> float:
    """The released noise of a tree entry, in units of its bound (colluders' shares in)."""
    k, t = int(report["n_clients"]), int(report["colluders"])
    return float(report["sigma"]) * math.sqrt(k / (k - t))


def report_scale(report: dict[str, Any]) -> float:
    """The plan's noise of the audited entry: sigma times its bound ``max_weight * clip``."""
    return report_sigma(report) * dp.MAX_WEIGHT * dp.TARGET_CLIP


class FitOptions(TypedDict, total=False):
    """:func:`run_tree_fits`'s options after ``epsilon``, passed on by :func:`tree_audit`."""

    seed: int
    force: int | None
    cap_off: bool
    noise_factor: float
    where: str
    n_rows: int


def tree_audit(
    n_fits: int, epsilon: float, *, task: str = "regression", **options: Unpack[FitOptions]
) -> dict[str, Any]:
    """The audit of one entry (see the module's text): measured against charged.

    ``options`` and ``task`` are :func:`run_tree_fits`'s, with its defaults.
    """
    # The first fit of each side runs to its end: its report gives the plan.
    a, ca, report = run_tree_fits(-1.0, n_fits, epsilon, task=task, **options)
    b, cb, _ = run_tree_fits(+1.0, n_fits, epsilon, task=task, **options)
    delta = float(report["delta"])
    n_fits = min(a.size, b.size)  # fits without the entry (no candidate) left out
    a, ca, b, cb = a[:n_fits], ca[:n_fits], b[:n_fits], cb[:n_fits]
    half = n_fits // 2
    # The Neyman-Pearson direction is known (D' moves the sum up): threshold on half.
    best, t = -1.0, 0.0
    for cut in np.unique(np.concatenate([a[:half], b[:half]])):
        e = epsilon_lower(int((a[:half] > cut).sum()), int((b[:half] > cut).sum()), half, delta)
        if e > best:
            best, t = e, float(cut)
    fp, tp, n = int((a[half:] > t).sum()), int((b[half:] > t).sum()), n_fits - half
    # The Gaussian view, per count: mean shift over pooled deviation, D' against D.
    by_count, resid = {}, []
    for c in sorted(set(ca.tolist()) | set(cb.tolist())):
        sa, sb = a[ca == c], b[cb == c]
        resid += [g - g.mean() for g in (sa, sb) if g.size > 1]
        if sa.size > 2 and sb.size > 2:
            sd = math.sqrt((sa.var(ddof=1) + sb.var(ddof=1)) / 2)
            mu = (sb.mean() - sa.mean()) / sd
            se = math.sqrt(1 / sa.size + 1 / sb.size + mu**2 / (2 * (sa.size + sb.size)))
            by_count[c] = {"fits": (int(sa.size), int(sb.size)), "mu": mu, "mu_low": mu - 1.96 * se}
    charged = 2.0 / report_sigma(report)  # 2 units a replacement
    top = max(by_count) if by_count else 0.0
    # What the canary's count moves it by, in the entry's noise: a regression target
    # from -clip to +clip (2 units at the cap), a label from one class column to the
    # other (sqrt(2) units at the cap, on their difference).
    per_unit = math.sqrt(2) if task == "classification" else 2.0
    expected = per_unit * top / dp.MAX_WEIGHT * charged / 2.0
    mu_low = max(by_count[top]["mu_low"], 0.0) if by_count else 0.0
    return {
        "epsilon": float(report["epsilon_guarantee"]),
        "delta": delta,
        "mu_fit": mu_of(float(report["epsilon_guarantee"]), delta),
        "mu_entry": charged,  # the accountant's charge for this entry, as a Gaussian mu
        "mu_expected": expected,  # the canary's move at the top count, as a Gaussian mu
        "noise_sd": float(np.std(np.concatenate(resid), ddof=len(resid))),
        "by_count": by_count,
        "max_count": top,
        "mu_low_max_count": mu_low,
        "epsilon_gauss": dp_epsilon(1.0 / mu_low, delta) if mu_low > 0 else 0.0,
        "epsilon_cp": epsilon_lower(fp, tp, n, delta),
        "rates": (fp, tp, n),
        "fits": n_fits,
    }
