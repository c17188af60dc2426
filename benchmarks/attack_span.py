"""The general linear attack on one tree's releases under privacy="secure" (docs/privacy.md).

Per tree and feature, every released cumulative sum (Round B, at each candidate of every
node that released the feature) and every node's total (Round A's summaries) is a 0/1
vector over the tree's in-bag rows (times their secret bootstrap counts, which change no
support). Rows with the same membership in all of them form atoms; every combination of
the sums is constant on atoms, and an atom's indicator lies in the rational span of the
sums exactly when its leverage in their row space is 1: then the server can compute the
sum over that atom. The attacker is granted the rows' memberships (the server does not
have them), so this bounds what any combination could isolate. Prints the atoms of 1 to
``m - 1`` rows in the span, their rows, and the rows alone in one (exact targets).

Usage (from the repository root, which holds the test suite's recording server)::

    python benchmarks/attack_span.py regression default 3
    python benchmarks/attack_span.py classification paper 3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedforest as ff  # noqa: E402
from tests.test_privacy import _data, _fit, _in_bag_weights, _members, _releases  # noqa: E402


def span_exposure(fed, model, X, w, m: int) -> dict[str, float]:
    """Atoms of 1 to ``m - 1`` rows whose sum lies in the span of a tree's releases."""
    values = X.to_numpy(dtype=np.float64)
    released = _releases(fed, model, m)
    member = _members(model, values, w)
    atoms, rows_in, alone = 0, 0, set()
    for t in range(len(model.trees_)):
        rows = member[t][0]
        pos = np.full(len(values), -1)
        pos[rows] = np.arange(rows.size)
        totals = np.zeros((len(member[t]), rows.size))
        for i, r in enumerate(member[t].values()):
            totals[i, pos[r]] = 1
        per_feature: dict[int, list[np.ndarray]] = {}
        for (tt, nd, f), cands in released.items():
            if tt == t:
                r = member[t][nd]
                block = np.zeros((len(cands), rows.size))
                block[:, pos[r]] = values[r, f][None, :] <= np.asarray(cands)[:, None]
                per_feature.setdefault(f, []).append(block)
        for blocks in per_feature.values():
            A = np.vstack([totals, *blocks])
            _, atom, size = np.unique(A.T, axis=0, return_inverse=True, return_counts=True)
            atom = atom.ravel()
            compact = np.zeros((A.shape[0], size.size))
            compact[:, atom] = A
            try:
                _, s, vt = np.linalg.svd(compact, full_matrices=False)
            except np.linalg.LinAlgError:
                import scipy.linalg

                _, s, vt = scipy.linalg.svd(compact, full_matrices=False, lapack_driver="gesvd")
            rank = int((s > s[0] * 1e-10).sum())
            leverage = (vt[:rank] ** 2).sum(axis=0)
            found = (size < m) & (leverage > 1 - 1e-8)
            atoms += int(found.sum())
            rows_in += int(size[found].sum())
            for j in np.flatnonzero(found & (size == 1)):
                alone.add(int(rows[np.flatnonzero(atom == j)[0]]))
    return {"atoms": atoms, "rows": rows_in, "alone": len(alone), "share": len(alone) / len(X)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("task", choices=["regression", "classification"], help="the forest's task")
    parser.add_argument(
        "settings", choices=["default", "paper"], help="fedforest's defaults or the paper's"
    )
    parser.add_argument("trees", type=int, help="trees of the forest")
    args = parser.parse_args()
    X, y, h = _data()  # 10 clients x 200 rows x 20 features, the privacy tests' data
    kw: dict = {"n_estimators": args.trees, "random_state": 0}
    if args.settings == "paper":
        kw.update(max_depth=8, min_samples_leaf=5, n_bins=32)
    if args.task == "classification":
        y = (y > np.median(y)).astype(float)
        model: ff.FedForestRegressor | ff.FedForestClassifier = ff.FedForestClassifier(**kw)
    else:
        model = ff.FedForestRegressor(**kw)
    start = time.process_time()
    fed = _fit(model, X, y, h)
    clients = [fed.clients[f"site{k}"] for k in np.unique(h)]
    w = _in_bag_weights(model, clients, h, args.trees)
    m = max(10, 2 * model.min_samples_leaf)
    found = span_exposure(fed, model, X, w, m)
    print(args.task, args.settings, args.trees, "trees:", found)
    print(f"CPU {time.process_time() - start:.1f} s")


if __name__ == "__main__":
    main()
