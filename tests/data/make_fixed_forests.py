"""Wrote tests/data/fixed-forests.npz (on commit e034068, from the repository root).

Rewritten once since, when the secure grids began to take sinh / asinh from the C library
(NumPy's AVX-512 versions differ in the last bits, so the file written on an AVX-512
machine did not match an AVX2 one); only ``bench_secure``'s floats changed, by a few ulps.
And its secure case once more when the secure target scale became one deviation of
asinh(y) instead of two halved: the same splits, values within 1e-8 (the fixed point's
rounding of the differently scaled targets). And its secure case once more when the
minimum-rows rule began to check every ancestor's releases, above the thresholds as well
as below (other candidates, so other trees); only ``bench_secure`` was refitted (loaded,
its arrays replaced, saved). And once more, the same way, when the interval rule
(``privacy/intervals.py``: intervals of an ancestor's thresholds against intervals of a
node's candidates) dropped candidates and put more of the ancestors' thresholds on the
node grids (other candidates, so other trees). And once more, the same way, when the
secure bootstraps were bound to the settings digest (other rows, so other trees: 820
nodes, was 798) and small nodes began to try their ancestors' thresholds
(``server/fallback.py``); and again
when guided candidates (``server/guides.py``: a node's candidate slots go first to the
thresholds its tree's earlier levels found best) and the partition rule
(``privacy/partitions.py``) changed the secure candidates (796 nodes). And once more, the
same way, when the secure node grids began to travel as codes on per-feature lattices
(``federated/grid_wire.py``):
the same 794 nodes, 391 thresholds moved by at most 1.7e-10 (the edges snapped to the
lattice), every other array equal. And once more when the secure moments of ``asinh(y)``
took secret row weights (``client_secure.moment_weights``; another target scale): the same
nodes and thresholds, values within 1.1e-8 and impurities within 1.3e-6 relative (the
fixed point's rounding of the differently scaled targets). And once more when the
features' moments took the same secret weights (another coarse grid, so other candidates
and trees: 800 nodes, was 794). And once more when the settings digest began to cover
the clients' pooled data tags (``client_secrets.data_tag``: other bootstraps, so other
trees: 778 nodes, was 800), and again the same day when the roots got up to ``4 B - 1``
quantile candidates and a node's first guide became the median of the roots' best
thresholds near it (issue 11; other candidates, so other trees: 784 nodes). And once
more when the secret row weights of the grid round's moments were bound to the
federation's clients (``client_secrets.federation_secret``: another coarse grid, so other
candidates and trees: 778 nodes). And once more when a quantile edge of a secure node
grid began to give way to an ancestor's threshold within half a step of it
(``secure_grids.displaced``; other grids, so other candidates and trees: 784 nodes, was 778).
And once more when the cousins' rule (``server/secure_cousins.py``: every atom of a tree's
releases at one threshold on a feature holds no row or at least ``m``) dropped candidates
(other trees: 784 nodes again). And once more when the rule on derived sums
(``server/secure_derived.py``: a node's sums held or derived at thresholds of a feature
stay 0 or ``m`` rows apart) dropped candidates (other trees: 784 nodes still).

Kept as the record of how the file was made: ``python tests/data/make_fixed_forests.py``.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests._fixed_forests import CASES, fit_case  # noqa: E402

out: dict[str, np.ndarray] = {}
for name in CASES:
    out.update(fit_case(name))
np.savez_compressed(Path(__file__).parent / "fixed-forests.npz", **out)
print({k: v.shape for k, v in out.items() if k.endswith("n_nodes")})
