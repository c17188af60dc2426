"""The fifteenth red team (issue 11, branch ``red15``): ``privacy="dp"`` audited empirically.

See docs/privacy-findings.md, "Red team 15", and ``tests/_attack_dp.py`` for the audit: a
canary row in or out of a federation of three clients (one row replaced, the unit of
``"dp"``), many fits, the server's recording of the targets' histogram, a Neyman-Pearson
test, and the lower bounds on epsilon it gives (Clopper-Pearson, and a Gaussian one on
``mu``) against the accountant's. The clients' secrets (noise and bootstrap) come from a
seeded generator so that the test is repeatable; ``benchmarks/attack_dp_audit.py`` runs
the same audit with the operating system's secrets, more fits and other budgets.

Nothing found: the bounds stay below the report's epsilon and the canary's shift is the
one the plan's noise gives. The controls scale every noise share down (the accountant's
figures unchanged) and must be caught.
"""

from __future__ import annotations

import math

import pytest

from tests._attack_dp import audit, scaled_noise, seeded_secrets


def test_the_canary_audit_stays_within_the_reported_epsilon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seeded_secrets(monkeypatch, 0)
    found = audit(n_fits=120, epsilon=4.0)
    assert found.epsilon == 4.0
    assert found.epsilon_cp <= found.epsilon, found
    assert found.mu_low <= found.mu_fit, found
    assert found.epsilon_gauss <= found.epsilon, found
    # Not vacuous: the canary moves the release by what the plan's noise says (0.62).
    se = math.sqrt(2 / found.fits + found.mu_hat**2 / (4 * found.fits))
    assert found.mu_low > 0, found
    assert abs(found.mu_hat - found.mu_canary) <= 4 * se, found


def test_the_audit_catches_a_fit_with_almost_no_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    seeded_secrets(monkeypatch, 1)
    scaled_noise(monkeypatch, 0.02)  # the accountant still reports epsilon 1
    found = audit(n_fits=60, epsilon=1.0)
    assert found.epsilon_cp > found.epsilon, found


def test_the_audit_catches_a_fit_with_less_noise_than_charged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seeded_secrets(monkeypatch, 2)
    scaled_noise(monkeypatch, 0.4)
    found = audit(n_fits=80, epsilon=4.0)
    assert found.mu_low > found.mu_fit, found
    assert found.epsilon_gauss > found.epsilon, found
