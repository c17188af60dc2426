"""privacy="dp" audited inside a tree: the root's Round A sum, moved by the canary's count.

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
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest

import fedforest as ff
from fedforest.federated import client as client_module
from fedforest.federated import client_secure
from fedforest.federated.privacy import dp
from fedforest.federated.protocol import ROUND_A, Message
from tests._attack_dp import dp_epsilon, epsilon_lower, mu_of, scaled_noise, seeded_secrets
from tests.test_privacy import RecordingFederation

SUM_Z = 2  # the summary's column of sum c z (rows, weight, sum z, sum z^2)


def tree_clients(sign: float, seed: int = 0) -> list[ff.Client]:
    """Three clients of 20 rows, one feature; row 0 of ``c0`` has the target ``sign * 1e6``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 1))
    y = X[:, 0] + 0.3 * rng.normal(size=60)
    y[0] = sign * 1e6
    return [ff.Client(X[i::3], y[i::3], name=f"c{i}") for i in range(3)]


class _RoundA(Exception):
    """The audited release is made: the rest of the fit would not change the test."""


class _UpToRoundB(RecordingFederation):
    def send_and_receive(self, requests: dict[str, Message], round_index: int) -> Any:
        replies = super().send_and_receive(requests, round_index)
        if next(iter(requests.values())).kind == ROUND_A:
            raise _RoundA
        return replies


def _record(mp: pytest.MonkeyPatch, seen: dict[str, Any], force: int | None, cap_off: bool) -> None:
    """Patch the clients to record, in ``seen``, the canary's count and target and each
    client's Round A summary entry before and after noise; ``force``: the canary's count."""
    noisy, round_a = client_secure.SecureParty.noisy, client_secure.SecureParty.round_a
    counts_of = client_module.Client._counts_of

    def record_round_a(self: Any, msg: Message, fit: Any, summary: np.ndarray) -> Message:
        if self.client.name == "c0":
            at = np.flatnonzero((fit.slot == 0) & (fit.rows == 0))
            seen["c0"] = float(fit.w[at].sum())
            seen["z0"] = float(fit.y[0])
        seen["in_a"] = self.client.name
        try:
            return round_a(self, msg, fit, summary)
        finally:
            seen["in_a"] = None

    def record_noisy(self: Any, msg: Message, values: Any, bounds: Any, *a: Any, **k: Any) -> Any:
        out = noisy(self, msg, values, bounds, *a, **k)
        if seen.get("in_a") and msg.kind == ROUND_A:
            v, o = np.asarray(values), np.asarray(out)
            if v.ndim == 2 and v.shape[1] == np.size(bounds) > 2:  # the summary, not the bins
                seen.setdefault("parts", []).append((float(v[0, SUM_Z]), float(o[0, SUM_Z])))
        return out

    def forced(self: Any, trees: range) -> Any:
        raw = counts_of(self, trees)
        if force is not None and self.name == "c0":
            raw = raw.copy()
            raw[:, 0] = force if cap_off else min(force, int(self._secure.dp["max_weight"]))
        return raw

    mp.setattr(client_secure.SecureParty, "round_a", record_round_a)
    mp.setattr(client_secure.SecureParty, "noisy", record_noisy)
    mp.setattr(client_module.Client, "_counts_of", forced)


def _side_fits(
    mp: pytest.MonkeyPatch,
    seen: dict[str, Any],
    sign: float,
    n_fits: int,
    epsilon: float,
    seed: int,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """``n_fits`` fits of one side (clients patched by :func:`_record`); per fit the
    statistic and the canary's count, and the first fit's report (it runs to its end)."""
    stats, counts = [], []
    report: dict[str, Any] = {}
    for r in range(n_fits):
        seeded_secrets(mp, 1_000_003 * seed + r)
        seen.clear()
        model = ff.FedForestRegressor(
            n_estimators=1, max_depth=1, privacy="dp", epsilon=epsilon, random_state=r
        )
        fed = (RecordingFederation if r == 0 else _UpToRoundB)(
            ff.LocalFederation(tree_clients(sign, seed))
        )
        try:
            model.fit_federated(fed)
            report = model.privacy_report_
        except _RoundA:
            pass
        parts = seen["parts"]
        assert len(parts) == 3, parts  # one summary per client
        exact = sum(v for v, _ in parts)
        release = sum(o for _, o in parts)
        c0, z0 = seen["c0"], seen["z0"]
        scale = report_scale(report)
        stats.append((release - exact + c0 * z0) / scale)
        counts.append(c0)
    return np.asarray(stats), np.asarray(counts), report


def report_scale(report: dict[str, Any]) -> float:
    """The plan's noise of the audited entry: sigma times its bound ``max_weight * clip``."""
    k, t = int(report["n_clients"]), int(report["colluders"])
    return float(report["sigma"]) * math.sqrt(k / (k - t)) * dp.MAX_WEIGHT * dp.TARGET_CLIP


def tree_audit(
    n_fits: int,
    epsilon: float,
    seed: int = 0,
    force: int | None = None,
    cap_off: bool = False,
    noise_factor: float = 1.0,
) -> dict[str, Any]:
    """The audit of the root's sum (see the module's text): measured against charged."""
    seen: dict[str, Any] = {}
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _record(mp, seen, force, cap_off)
        if noise_factor != 1.0:
            scaled_noise(mp, noise_factor)
        # The first fit of each side runs to its end: its report gives the plan.
        a, ca, report = _side_fits(mp, seen, -1.0, n_fits, epsilon, seed)
        b, cb, _ = _side_fits(mp, seen, +1.0, n_fits, epsilon, seed)
    delta = float(report["delta"])
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
        resid += [sa - sa.mean(), sb - sb.mean()]
        if sa.size > 2 and sb.size > 2:
            sd = math.sqrt((sa.var(ddof=1) + sb.var(ddof=1)) / 2)
            mu = (sb.mean() - sa.mean()) / sd
            se = math.sqrt(1 / sa.size + 1 / sb.size + mu**2 / (2 * (sa.size + sb.size)))
            by_count[c] = {"fits": (int(sa.size), int(sb.size)), "mu": mu, "mu_low": mu - 1.96 * se}
    k, tcol = int(report["n_clients"]), int(report["colluders"])
    charged = 2.0 / (float(report["sigma"]) * math.sqrt(k / (k - tcol)))  # 2 units a replacement
    top = max(by_count) if by_count else 0.0
    mu_low = max(by_count[top]["mu_low"], 0.0) if by_count else 0.0
    return {
        "epsilon": float(report["epsilon_guarantee"]),
        "delta": delta,
        "mu_fit": mu_of(float(report["epsilon_guarantee"]), delta),
        "mu_entry": charged,  # the accountant's charge for this entry, as a Gaussian mu
        "noise_sd": float(np.std(np.concatenate(resid), ddof=len(resid))),
        "by_count": by_count,
        "max_count": top,
        "mu_low_max_count": mu_low,
        "epsilon_gauss": dp_epsilon(1.0 / mu_low, delta) if mu_low > 0 else 0.0,
        "epsilon_cp": epsilon_lower(fp, tp, n, delta),
        "rates": (fp, tp, n),
        "fits": n_fits,
    }
