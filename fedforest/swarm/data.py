"""Datasets of the swarm experiments (*Mind the Missing Split*, Section IV-B).

Nothing is downloaded: the synthetic sets are generated, the real ones come from the
files scikit-learn installs.

==================  =====  =========  ===========  =======  ==============================
name                rows   numeric    categorical  classes  stands in for (paper)
==================  =====  =========  ===========  =======  ==============================
``S-500-Num``       500    16         0            2        S-500-Num (our generator)
``S-500-Cat``       500    0          16           2        S-500-Cat (our generator)
``S-500-Mix``       500    8          8            2        S-500-Mix (our generator)
``breast-cancer``   569    30         0            2        Pima, Gallstone, CDC-2Class
``wine``            178    13         0            3        CDC-3Class
``digits``          1797   61         0            10       (extra, multiclass)
==================  =====  =========  ===========  =======  ==============================

The paper's own generator is not published; ours draws correlated Gaussian latents (AR(1)
correlation 0.5 between neighbouring features, so imputers and surrogates have something
to learn from), turns categorical features into 4 ordered levels by quartiles, and draws a
balanced binary target from a logistic model in which every feature has the same weight
on its standardised value: all features contribute evenly. Glioma, Thyroid, Pima,
Gallstone and the CDC samples are not shipped by any installed package, so they are
substituted as in the table (see ``docs/swarm.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

__all__ = ["SWARM_DATASETS", "SwarmDataset", "load_swarm_dataset", "make_s500"]

#: Names accepted by :func:`load_swarm_dataset`.
SWARM_DATASETS = ("S-500-Num", "S-500-Cat", "S-500-Mix", "breast-cancer", "wine", "digits")
_N_LEVELS = 4
_RHO = 0.5
_SIGNAL = 3.0  # logit scale of the standardised signal: Bayes AUC about 0.9


@dataclass(frozen=True, eq=False)
class SwarmDataset:
    """A classification dataset for the swarm experiments.

    Attributes
    ----------
    name : str
    X : DataFrame, shape (n_samples, n_features)
        Numeric columns; categorical features hold integer codes.
    y : ndarray, shape (n_samples,)
    categorical : tuple of str
        The categorical columns.
    substitutes : str
        Which of the paper's datasets this one stands in for.
    """

    name: str
    X: pd.DataFrame
    y: NDArray[np.int64]
    categorical: tuple[str, ...]
    substitutes: str


def make_s500(
    kind: str = "mix", n_samples: int = 500, random_state: int | None = 0
) -> SwarmDataset:
    """The synthetic S-500 datasets: 16 features contributing evenly to a binary target.

    Parameters
    ----------
    kind : {"num", "cat", "mix"}, default="mix"
        16 numeric, 16 categorical (4 levels) or 8 numeric + 8 categorical features.
    n_samples : int, default=500
    random_state : int or None, default=0

    Returns
    -------
    SwarmDataset
    """
    n_cat = {"num": 0, "cat": 16, "mix": 8}.get(kind)
    if n_cat is None:
        raise ValueError(f"kind must be 'num', 'cat' or 'mix', got {kind!r}")
    rng = np.random.default_rng(random_state)
    d = 16
    lags = np.abs(np.subtract.outer(np.arange(d), np.arange(d)))
    cov = _RHO**lags
    z = rng.multivariate_normal(np.zeros(d), cov, size=n_samples)
    order = rng.permutation(d)  # which features are categorical, at random positions
    is_cat = np.zeros(d, dtype=bool)
    is_cat[order[:n_cat]] = True
    cols, signal = {}, np.zeros(n_samples)
    for j in range(d):
        if is_cat[j]:
            edges = np.quantile(z[:, j], np.linspace(0, 1, _N_LEVELS + 1)[1:-1])
            x = np.searchsorted(edges, z[:, j]).astype(np.float64)
            cols[f"c{j:02d}"] = x
        else:
            x = z[:, j]
            cols[f"x{j:02d}"] = x
        signal += (x - x.mean()) / x.std()
    signal /= np.sqrt(signal.var())
    y = (rng.random(n_samples) < 1.0 / (1.0 + np.exp(-_SIGNAL * signal))).astype(np.int64)
    X = pd.DataFrame(cols)
    name = f"S-500-{kind.capitalize()}"
    cats = tuple(c for c in X.columns if c.startswith("c"))
    return SwarmDataset(name, X, y, cats, f"{name} (same layout, our generator)")


def load_swarm_dataset(name: str, random_state: int | None = 0) -> SwarmDataset:
    """One of :data:`SWARM_DATASETS` (offline).

    Parameters
    ----------
    name : str
    random_state : int or None, default=0
        Seed of the synthetic generators (ignored for the real datasets).
    """
    if name.startswith("S-500-"):
        kind = name.removeprefix("S-500-").lower()
        if kind in ("num", "cat", "mix"):
            return make_s500(kind, random_state=random_state)
    from sklearn import datasets

    loaders = {
        "breast-cancer": (
            datasets.load_breast_cancer,
            "Pima, Gallstone, CDC-2Class (binary, numeric)",
        ),
        "wine": (datasets.load_wine, "CDC-3Class (multiclass)"),
        "digits": (datasets.load_digits, "none (extra 10-class set)"),
    }
    if name not in loaders:
        raise ValueError(f"unknown swarm dataset {name!r}; choose one of {SWARM_DATASETS}")
    loader, substitutes = loaders[name]
    bunch = loader(as_frame=True)
    X = bunch.data.astype(np.float64)
    X.columns = [str(c).replace(" ", "_") for c in X.columns]
    if name == "digits":  # drop the always-blank border pixels (constant columns)
        X = X.loc[:, X.std() > 0]
    return SwarmDataset(
        name, X.reset_index(drop=True), np.asarray(bunch.target, dtype=np.int64), (), substitutes
    )
