"""Heterogeneity study behind docs/heterogeneity.md (issue: splits on H, AvgImp, diagnostics).

Settings of the FedForest paper's Section 5 (K=10 clients, n_k=200, d=20; fedforest's
tree-based f, see docs/simulate.md), `--draws` independent draws each:

- homogeneous, covariate shift (gamma=3, alpha=0.5), outcome shift (delta=1.5), and a
  nearly-disjoint-supports setting (gamma=5, alpha=0.25, as Appendix F.1.1);
- methods: centralized scikit-learn RF (with and without H Fisher-encoded as a feature),
  fedforest exact, exact + H-splits (with the default local candidates, with the paper's
  protocol ``local_candidates=False``, and with 7 sampled X-features per node, the budget
  scikit-learn gives the centralized RF + H: int(21 / 3) columns of 21), AvgImp,
  AvgImp + H-splits;
- diagnostics p-values per draw;
- centralized RF + H with 6 columns per node instead of int(21 / 3) = 7, and fedforest
  exact + H in the verification mode (every midpoint a candidate);
- centralized RF + H and fedforest exact + H with every feature at every node
  (``max_features=None``): the per-node budgets of the two then agree exactly;
- paired relative MSE differences against the centralized forests, with 95 % intervals
  over the draws (a t interval of the per-draw ratios minus one).

Run: python benchmarks/bench_heterogeneity.py --draws 20 --out results/heterogeneity.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings

import numpy as np
from sklearn.ensemble import RandomForestRegressor

import fedforest as ff
from fedforest.datasets import make_paper_synthetic

SETTINGS = {
    "disjoint supports on x1 (gamma=2.5)": dict(setting="disjoint-x1", gamma=2.5),
    "homogeneous": dict(setting="homogeneous"),
    "covariate-shift": dict(setting="covariate-shift"),
    "disjoint (gamma=5, alpha=0.25)": dict(setting="covariate-shift", gamma=5.0, alpha=0.25),
    "outcome-shift": dict(setting="outcome-shift"),
}
PARAMS = dict(n_estimators=50, max_depth=8, min_samples_leaf=5, max_features=1 / 3)
PAPER = dict(local_candidates=False)
FEDFOREST_METHODS = {
    "fedforest exact": {},
    "fedforest exact (paper protocol)": PAPER,
    "fedforest exact + H": dict(split_on_client=True),
    "fedforest exact + H (paper protocol)": dict(split_on_client=True, **PAPER),
    "fedforest exact + H, 7 X-features": dict(split_on_client=True, max_features=7),
    "fedforest exact + H, all features": dict(split_on_client=True, max_features=None),
    "fedforest exact + H, verification mode": dict(split_on_client=True, n_bins=None),
    "fedforest AvgImp": dict(split_rule="avgimp"),
    "fedforest AvgImp + H": dict(split_rule="avgimp", split_on_client=True),
}
REFERENCES = (
    "centralized RF",
    "centralized RF + H (Fisher)",
    "centralized RF + H (Fisher), all features",
)


def paired_gap(values, reference):
    """Mean of the per-draw ratios minus one, and the half-width of its 95 % t interval."""
    from scipy import stats

    r = np.asarray(values) / np.asarray(reference) - 1.0
    if r.size < 2:
        return float(r.mean()), float("nan")
    half = stats.t.ppf(0.975, r.size - 1) * r.std(ddof=1) / np.sqrt(r.size)
    return float(r.mean()), float(half)


def fisher_encode(h_train, y_train, h):
    """Client id -> rank of the client's mean training outcome (a numeric feature)."""
    means = {k: y_train[h_train == k].mean() for k in np.unique(h_train)}
    rank = {k: r for r, k in enumerate(sorted(means, key=means.get))}
    return np.array([rank.get(k, -1) for k in h], dtype=float)


def disjoint_x1(gamma, seed):
    """Clients split in two groups by x1 only (x1 ~ N(+-gamma, 0.25), the other features
    N(0, 0.25) for everyone); y = paper_f(X) + 2 * 1[x1 > 0] + N(0, 0.5) noise. The best
    split lies in the gap between the groups, where every client's local gain is zero."""
    from fedforest.datasets import FederatedSplit, paper_f

    rng = np.random.default_rng(seed)
    k, n, d = 10, 200, 20
    h = np.repeat(np.arange(k), n)
    X = rng.normal(0.0, 0.5, size=(k * n, d))
    X[:, 0] += np.where(h % 2 == 0, -gamma, gamma)
    y = paper_f(X) + 2.0 * (X[:, 0] > 0) + rng.normal(0.0, np.sqrt(0.5), k * n)
    test = np.zeros(k * n, dtype=bool)
    for c in range(k):
        rows = np.flatnonzero(h == c)
        test[rng.choice(rows, int(0.3 * n), replace=False)] = True
    return FederatedSplit(
        X[~test],
        y[~test],
        h[~test],
        X[test],
        y[test],
        h[test],
        setting="disjoint-x1",
        n_clients=k,
        gamma=gamma,
        alpha=0.25,
        delta=0.0,
    )


def one_draw(spec, seed, n_jobs):
    if spec["setting"] == "disjoint-x1":
        data = disjoint_x1(spec["gamma"], seed)
    else:
        data = make_paper_synthetic(random_state=seed, **spec)
    Xtr, ytr, htr, Xte, yte, hte = (
        data.X_train,
        data.y_train,
        data.h_train,
        data.X_test,
        data.y_test,
        data.h_test,
    )

    def mse(pred):
        return float(np.mean((pred - yte) ** 2))

    out = {}
    rf = RandomForestRegressor(random_state=seed, n_jobs=n_jobs, **PARAMS).fit(Xtr, ytr)
    out["centralized RF"] = mse(rf.predict(Xte))
    Xh_tr = np.column_stack([Xtr, fisher_encode(htr, ytr, htr)])
    Xh_te = np.column_stack([Xte, fisher_encode(htr, ytr, hte)])
    rf_h = RandomForestRegressor(random_state=seed, n_jobs=n_jobs, **PARAMS).fit(Xh_tr, ytr)
    out["centralized RF + H (Fisher)"] = mse(rf_h.predict(Xh_te))
    six = {**PARAMS, "max_features": 6}  # one column fewer per node than int(21 / 3)
    rf_6 = RandomForestRegressor(random_state=seed, n_jobs=n_jobs, **six).fit(Xh_tr, ytr)
    out["centralized RF + H (Fisher), 6 features"] = mse(rf_6.predict(Xh_te))
    # Equal per-node budgets: every X column and H at every node, for both forests.
    every = {**PARAMS, "max_features": None}
    rf_all = RandomForestRegressor(random_state=seed, n_jobs=n_jobs, **every).fit(Xh_tr, ytr)
    out["centralized RF + H (Fisher), all features"] = mse(rf_all.predict(Xh_te))
    for name, kw in FEDFOREST_METHODS.items():
        # The paper's protocol: H splits, AvgImp and the diagnostics need per-client values.
        m = ff.FedForestRegressor(
            random_state=seed, n_jobs=n_jobs, privacy="none", **{**PARAMS, **kw}
        )
        m.fit(Xtr, ytr, client_ids=htr)
        out[name] = mse(m.predict(Xte, client_ids=hte))
    rep = ff.diagnose(Xtr, ytr, htr, random_state=seed, n_jobs=n_jobs, privacy="none")
    out["p covariate shift"] = rep.covariate_shift_pvalue
    out["p outcome heterogeneity"] = rep.outcome_heterogeneity_pvalue
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument("--draws", type=int, default=20, help="data draws per setting")
    ap.add_argument("--n-jobs", type=int, default=2, help="threads of every fit")
    ap.add_argument("--out", default="results/heterogeneity.json", help="JSON file to write")
    ap.add_argument("--settings", nargs="*", default=None, help="subset of the settings")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    results = {}
    t0 = time.time()
    chosen = {k: v for k, v in SETTINGS.items() if not args.settings or k in args.settings}
    for label, spec in chosen.items():
        draws = [one_draw(spec, seed, args.n_jobs) for seed in range(args.draws)]
        keys = draws[0].keys()
        results[label] = {k: [d[k] for d in draws] for k in keys}
        summary = {k: float(np.mean(v)) for k, v in results[label].items()}
        print(f"\n{label} ({args.draws} draws); paired MSE difference (95 % interval) vs")
        print("  " + " | ".join(REFERENCES))
        for k, v in summary.items():
            if k.startswith("p "):
                rej = np.mean(np.asarray(results[label][k]) < 0.05)
                print(f"  {k:42s} rejected at 5% in {rej:.0%} of draws")
            else:
                sd = float(np.std(results[label][k]))
                gaps = [paired_gap(results[label][k], results[label][r]) for r in REFERENCES]
                rel = "  ".join(f"{100 * g:+6.1f} % +- {100 * h:.1f}" for g, h in gaps)
                print(f"  {k:42s} MSE {v:.3f} (sd {sd:.3f})  {rel}")
    meta = {
        "machine": platform.processor() or platform.machine(),
        "python": sys.version.split()[0],
        "seconds": time.time() - t0,
        "command": "python " + " ".join(sys.argv),
    }
    import os

    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump({"meta": meta, "results": results}, fh, indent=1)
    print(f"\n{meta['seconds']:.0f} s; wrote {args.out}; reproduce: {meta['command']}")


if __name__ == "__main__":
    main()
