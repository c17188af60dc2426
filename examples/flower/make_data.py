"""Write three sites' CSV files for the Flower example (one file per SuperNode).

    python examples/flower/make_data.py DIR [--rows 1000] [--features 10]

writes DIR/site-a.csv, DIR/site-b.csv and DIR/site-c.csv: the paper's covariate-shift
synthetic regression data (``fedforest.datasets.make_paper_synthetic``), feature
columns ``x0 .. x{d-1}`` and the target column ``y``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from fedforest.datasets import make_paper_synthetic

SITES = ("site-a", "site-b", "site-c")


def write_sites(folder: Path, rows: int = 1000, features: int = 10, seed: int = 0) -> list[Path]:
    """One CSV per site with ``rows`` training rows each; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    data = make_paper_synthetic(
        "covariate-shift",
        n_clients=len(SITES),
        n_per_client=rows,
        n_features=features,
        random_state=seed,
    )
    X = np.vstack([data.X_train, data.X_test])  # a site keeps all of its rows
    y = np.concatenate([data.y_train, data.y_test])
    h = np.concatenate([data.h_train, data.h_test])
    paths = []
    for k, site in enumerate(SITES):
        frame = pd.DataFrame(X[h == k], columns=[f"x{j}" for j in range(features)])
        frame["y"] = y[h == k]
        paths.append(folder / f"{site}.csv")
        frame.to_csv(paths[-1], index=False)
    return paths


def main() -> None:
    """Write the files named on the command line."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("folder", type=Path, help="where the sites' CSV files are written")
    parser.add_argument("--rows", type=int, default=1000, help="rows per site")
    parser.add_argument("--features", type=int, default=10, help="features of every site")
    args = parser.parse_args()
    for path in write_sites(args.folder.resolve(), args.rows, args.features):
        print(path)


if __name__ == "__main__":
    main()
