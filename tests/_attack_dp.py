"""privacy="dp" audited from outside: a canary row in or out, many fits, one test.

Two neighbouring federations (``privacy="dp"``'s unit: one row of one client replaced):
in ``D`` row 0 of client ``c0`` is an ordinary row, in ``D'`` its target is ``1e6``,
whose ``asinh`` falls in a bin of the targets' histogram no other row reaches. The
server of each fit records every reply (``RecordingFederation``) and decodes the first
grid round's masked ``y_hist`` as the server does (the replies summed mod ``2^64``). The
distinguisher is the Neyman-Pearson test for the canary on that release: the noisy
counts minus ``D``'s exact ones, projected on ``D' - D`` (the canary's bin up, the old
row's bin down), in units of the noise the plan claims. Under ``D`` it is ``N(0, 1)``,
under ``D'`` ``N(mu, 1)`` with ``mu = sqrt(2) / target_sigma``: the one release
carries most of this small fit's budget (its noise is ``TARGET_NOISE_RATIO`` times less
than the trees').

Two bounds, each at 95 % confidence, against the accountant's:

- nonparametric: the threshold chosen on the first half of the fits, its false and true
  positive rates on the second half bounded by Clopper-Pearson; ``epsilon >= log((TPR -
  delta) / FPR)`` (and with the roles swapped) for any ``(epsilon, delta)``-DP mechanism
  (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021);
- Gaussian: the two groups' mean difference over their pooled deviation, ``mu``'s lower
  bound, against the ``mu`` of the reported ``epsilon_guarantee`` (the accountant takes
  the whole fit for one Gaussian mechanism), and as an epsilon at the plan's delta. It assumes the
  statistic is Gaussian (it is: a sum of discrete Gaussian shares), and so sees a
  shortfall of noise far smaller than the nonparametric bound can.

A bound on one release of the transcript is a bound on the whole (the rest is
post-processing of more data): the audit can only under-estimate the fit's loss.
"""

from __future__ import annotations

import math
import random
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from scipy import stats

import fedforest as ff
from fedforest.federated import client_secure
from fedforest.federated.client_secure import target_grid
from fedforest.federated.privacy import dp
from fedforest.federated.privacy.secagg import from_fixed
from fedforest.federated.protocol import GRID, Message
from fedforest.federated.server import secure_setup
from tests.test_privacy import RecordingFederation

#: The canary's target: ``asinh(1e6) = 14.5``, a bin of the targets' grid nobody else is in.
CANARY = 1e6
#: Beyond this ``mu`` (no noise to speak of) the Gaussian epsilon is reported as infinite.
MU_CAP = 40.0


class _Lost(ff.Client):
    """A client whose node is lost when the first grid round reaches it."""

    def handle(self, msg: Message) -> Message:
        if msg.kind == GRID and msg.header.get("stage") == "moments":
            raise RuntimeError("node lost")
        return super().handle(msg)


def canary_clients(canary: bool, seed: int = 0, drop: bool = False) -> list[ff.Client]:
    """Three clients of 20 rows, one feature; with ``canary`` row 0 of ``c0`` is the canary.

    ``drop``: ``c2`` is lost in the first grid round (recovered: its noise share is gone).
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 1))
    y = X[:, 0] + 0.3 * rng.normal(size=60)
    if canary:
        y = y.copy()
        y[0] = CANARY
    kinds = [ff.Client, ff.Client, _Lost if drop else ff.Client]
    return [kind(X[i::3], y[i::3], name=f"c{i}") for i, kind in enumerate(kinds)]


def exact_hist(clients: list[ff.Client]) -> np.ndarray:
    """The targets' histogram without noise (as each client bins its rows)."""
    y = np.concatenate([np.asarray(c.y_raw, dtype=np.float64) for c in clients])
    ay = np.clip(np.arcsinh(y), -dp.ASINH_CLIP, dp.ASINH_CLIP)
    return np.histogram(ay, bins=target_grid())[0].astype(np.float64)


def recorded_hist(fed: RecordingFederation) -> np.ndarray:
    """The first grid round's ``y_hist`` as the server decodes it from the recorded replies."""
    for requests, replies in fed.rounds:
        first = next(iter(requests.values()))
        if first.kind == GRID and first.header.get("stage") == "moments":
            total = np.zeros_like(next(iter(replies.values())).arrays["y_hist"])
            for reply in replies.values():
                total = total + reply.arrays["y_hist"]  # uint64: mod 2^64, the masks cancel
            return np.asarray(from_fixed(total, 0))[0]
    raise AssertionError("no first grid round recorded")


def seeded_secrets(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """The clients' noise and bootstrap secrets from a seeded generator (a repeatable test)."""
    rng = random.Random(seed)
    monkeypatch.setattr(client_secure.secrets, "randbits", rng.getrandbits)


def scaled_noise(monkeypatch: pytest.MonkeyPatch, factor: float) -> None:
    """The control: every discrete noise share at ``factor`` of its planned scale."""
    draw = client_secure.discrete_gaussian
    monkeypatch.setattr(
        client_secure, "discrete_gaussian", lambda sigma, rng: draw(sigma * factor, rng)
    )


@dataclass
class Audit:
    """What the audit measured, and the accountant's figures it is held against."""

    epsilon: float  # the accountant's (the report's epsilon_guarantee)
    delta: float
    mu_fit: float  # the Gaussian mu of the reported epsilon_guarantee (the whole fit's)
    mu_canary: float  # what the plan's noise gives the canary's release
    noise_sd: float  # the statistic's deviation under D: the released noise over the plan's
    noise_charged: float  # the noise the report charges over the plan's (1 without drops)
    mu_hat: float
    mu_low: float  # 95 % lower bound
    epsilon_gauss: float  # epsilon of mu_low at delta
    epsilon_cp: float  # the nonparametric 95 % lower bound
    fits: int  # per side
    threshold: float
    rates: tuple[int, int, int]  # false positives, true positives, evaluation fits a side


def run_fits(
    canary: bool, n_fits: int, epsilon: float, seed: int = 0, drop: bool = False
) -> tuple[list[float], dict[str, Any]]:
    """``n_fits`` fits of ``D`` (or ``D'``); the statistic of each, and the last report.

    With ``drop`` the release is the server's own decoding (``secure_exchange``'s sums,
    the dropped client's masks removed by the recovery round).
    """
    clients = canary_clients(canary, seed, drop)
    kept = slice(0, 2 if drop else 3)  # the clients in the release
    base = exact_hist(canary_clients(False, seed)[kept])
    shift = exact_hist(canary_clients(True, seed)[kept]) - base
    out, report = [], {}
    decoded: list[np.ndarray] = []
    exchange = secure_setup.secure_exchange

    def keep(fed: Any, ledger: Any, msg: Message, specs: Any) -> Any:
        sums = exchange(fed, ledger, msg, specs)
        if "y_hist" in sums:
            decoded.append(np.asarray(sums["y_hist"])[0])
        return sums

    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Client 'c2' failed")  # the drop, as planned
        mp.setattr(secure_setup, "secure_exchange", keep)
        for r in range(n_fits):
            # The first fit runs to its end (its report); the others stop after the release.
            kind = RecordingFederation if r == 0 else _UpToTheRelease
            fed = kind(ff.LocalFederation(clients))
            model = ff.FedForestRegressor(
                n_estimators=1,
                max_depth=1,
                privacy="dp",
                epsilon=epsilon,
                random_state=r,
                on_client_failure="drop" if drop else "raise",
            )
            try:
                model.fit_federated(fed)
                report = model.privacy_report_
            except _Released:
                pass
            hist = decoded[-1] if drop else recorded_hist(fed)
            sigma = target_sigma(report)
            out.append(float((hist - base) @ shift / (sigma * np.linalg.norm(shift))))
    return out, report


class _Released(Exception):
    """The audited release is recorded: the rest of the fit would not change the test."""


class _UpToTheRelease(RecordingFederation):
    """Records every round before the second grid round, then stops the fit."""

    def send_and_receive(self, requests: dict[str, Message], round_index: int) -> Any:
        first = next(iter(requests.values()))
        if first.kind == GRID and first.header.get("stage") == "histogram":
            raise _Released  # the first grid round's sums are decoded (a drop recovered)
        return super().send_and_receive(requests, round_index)


def target_sigma(report: dict[str, Any]) -> float:
    """The released noise of the targets' histogram, in rows, as the plan gives it."""
    k, t = int(report["n_clients"]), int(report["colluders"])
    planned = max(report["sigma"] / dp.TARGET_NOISE_RATIO, report["min_sigma"])
    return float(planned * math.sqrt(k / (k - t)))


def _cp(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Clopper-Pearson: the ``1 - alpha`` lower and upper one-sided bounds of ``k / n``."""
    low = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return low, high


def epsilon_lower(fp: int, tp: int, n: int, delta: float, alpha: float = 0.025) -> float:
    """``epsilon``'s lower bound from ``fp`` and ``tp`` of ``n`` per side (both directions)."""
    fpr_low, fpr_high = _cp(fp, n, alpha)
    tpr_low, tpr_high = _cp(tp, n, alpha)
    found = [0.0]
    if tpr_low - delta > 0:
        found.append(math.log((tpr_low - delta) / fpr_high))
    if (1 - fpr_high) - delta > 0 and tpr_low < 1:  # the test's "no" as a guess of D
        found.append(math.log(((1 - fpr_high) - delta) / (1 - tpr_low)))
    return max(found)


def _threshold(a: np.ndarray, b: np.ndarray, delta: float) -> float:
    """The threshold with the best bound on the selection half (``a``: D, ``b``: D')."""
    best, best_t = -1.0, float(np.median(np.concatenate([a, b])))
    for t in np.unique(np.concatenate([a, b])):
        e = epsilon_lower(int((a > t).sum()), int((b > t).sum()), a.size, delta)
        if e > best:
            best, best_t = e, float(t)
    return best_t


def audit(n_fits: int, epsilon: float, seed: int = 0, drop: bool = False) -> Audit:
    """Fit ``D`` and ``D'`` ``n_fits`` times each; the bounds (see the module's text)."""
    a_all, report = run_fits(False, n_fits, epsilon, seed, drop)
    b_all, _ = run_fits(True, n_fits, epsilon, seed, drop)
    a, b = np.asarray(a_all), np.asarray(b_all)
    half = n_fits // 2
    t = _threshold(a[:half], b[:half], report["delta"])
    ea, eb = a[half:], b[half:]
    fp, tp, n = int((ea > t).sum()), int((eb > t).sum()), ea.size
    delta = float(report["delta"])
    pooled = math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
    mu_hat = float((b.mean() - a.mean()) / pooled)
    se = math.sqrt(2 / n_fits + mu_hat**2 / (4 * n_fits))
    mu_low = max(mu_hat - 1.96 * se, 0.0)
    e_gauss = math.inf if mu_low >= MU_CAP else dp_epsilon(1.0 / mu_low, delta) if mu_low else 0.0
    return Audit(
        epsilon=float(report["epsilon_guarantee"]),
        delta=delta,
        mu_fit=mu_of(float(report["epsilon_guarantee"]), delta),
        mu_canary=math.sqrt(2) / target_sigma(report),
        noise_sd=float(a.std(ddof=1)),
        noise_charged=mu_of(float(report["epsilon"]), delta)
        / mu_of(float(report["epsilon_guarantee"]), delta),
        mu_hat=mu_hat,
        mu_low=mu_low,
        epsilon_gauss=e_gauss,
        epsilon_cp=epsilon_lower(fp, tp, n, delta),
        fits=n_fits,
        threshold=t,
        rates=(fp, tp, n),
    )


def mu_of(epsilon: float, delta: float) -> float:
    """The Gaussian mechanism's ``mu`` (sensitivity over noise) at ``(epsilon, delta)``."""
    import dp_accounting

    return 1.0 / float(dp_accounting.get_sigma_gaussian(epsilon, delta))


def dp_epsilon(noise_multiplier: float, delta: float) -> float:
    """The analytic Gaussian mechanism's epsilon (``dp-accounting``, as the accountant)."""
    import dp_accounting

    return float(dp_accounting.get_epsilon_gaussian(noise_multiplier, delta))
