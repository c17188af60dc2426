"""Names, one-line descriptions and repetition counts of the paper's experiments.

Kept free of heavy imports so that the ``fedforest`` command can list the experiments
without importing scikit-learn, pandas or matplotlib; the experiment definitions read
their repetition counts from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple


class Entry(NamedTuple):
    """One experiment: what it shows, default repetitions, the paper's repetitions."""

    summary: str
    default_reps: int
    paper_reps: int


#: In the paper's order. ``paper_reps`` is our choice where the paper does not say
#: (Table 3, FedHeart: 20; Appendix B: 10).
CATALOG: Mapping[str, Entry] = MappingProxyType(
    {
        "fig2-homogeneous": Entry("Fig. 2(a) synthetic, homogeneous clients", 20, 150),
        "fig2-covariate-shift": Entry("Fig. 2(b) synthetic, covariate shift", 20, 150),
        "fig2-outcome-shift": Entry("Fig. 2(c) synthetic, outcome shift", 20, 150),
        "fedheart": Entry("Fig. 2(d) FedHeart (FLamby), 4 hospitals", 10, 20),
        "table3-fragmentation": Entry("Table 3 accuracy over K = 1..100 clients", 3, 20),
        "table5-disjoint": Entry("Table 5 disjoint supports, over the shift", 4, 20),
        "table6-overlap": Entry("Table 6 overlapping supports, over the shift", 5, 20),
        "f2-both-shifts": Entry("App. F.2 covariate and outcome shift", 20, 150),
        "table7-outliers": Entry("Table 7 MSE over the outlier fraction", 5, 20),
        "appendix-b": Entry("App. B panel of 11 real tabular datasets", 3, 10),
    }
)
