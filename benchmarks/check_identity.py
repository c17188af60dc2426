"""Forest identity: bench_forest.py's model and data, predictions saved or compared bit for bit.

Memory and speed work must leave forests as they were. This fits ``FedForestRegressor``
(bench_forest.py's hyperparameters, ``random_state`` = ``--seed``) on bench_forest.py's
data under each ``--privacy`` and either saves its test predictions and a SHA-256 of every
tree array (``--save``) or compares both with a saved file (``--compare``), every float to
the bit; the exit code is 1 on any difference (a threshold one ulp off can leave every
prediction as it was). ``--dask`` fits the same clients (one per client id) through a
``DaskFederation`` on a fresh 2-worker ``LocalCluster`` (worker processes): the forest must
equal the in-process one, so the same saved file serves both.

    PYTHONPATH=/path/to/main python benchmarks/check_identity.py --rows 20000 --save before.npz
    python benchmarks/check_identity.py --rows 20000 --compare before.npz
    python benchmarks/check_identity.py --rows 20000 --compare before.npz --dask
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_forest as bf  # noqa: E402


def trees_digest(model: Any) -> np.ndarray:
    """SHA-256 of every array of every tree (dtype, shape and bytes), as 32 bytes."""
    h = hashlib.sha256()
    for tree in model.trees_:
        for name, arr in sorted(tree.as_dict().items()):
            a = np.ascontiguousarray(arr)
            h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
            h.update(a.tobytes())
    return np.frombuffer(h.digest(), dtype=np.uint8).copy()


def fit_predict(
    privacy: str, data: dict[str, np.ndarray], seed: int, dask: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Test predictions of bench_forest.py's fedforest model (``privacy``); its trees' digest."""
    model = bf.make_model("fedforest", 2, seed, privacy)
    if dask is None:
        bf.fit(model, "fedforest", data["X_train"], data["y_train"], data["h_train"])
    else:
        import dask.array as da

        from fedforest.transport.dask import DaskFederation

        chunks = max(1, data["X_train"].shape[0] // 4)
        X = da.from_array(data["X_train"], chunks=(chunks, -1))
        y = da.from_array(data["y_train"], chunks=chunks)
        h = da.from_array(data["h_train"], chunks=chunks)
        with DaskFederation.from_collections(X, y, client_ids=h, client=dask) as fed:
            model.fit_federated(fed)
    return np.asarray(model.predict(data["X_test"])), trees_digest(model)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--rows", type=int, default=20_000, help="training rows")
    p.add_argument("--seed", type=int, default=0, help="seed of the data and the forest")
    p.add_argument(
        "--privacy",
        nargs="+",
        default=["secure", "none"],
        choices=["secure", "none"],
        help="privacy levels to fit, each in turn",
    )
    p.add_argument("--dask", action="store_true", help="fit through a 2-worker LocalCluster")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--save", type=Path, help="write the predictions to this .npz")
    what.add_argument("--compare", type=Path, help="compare with the predictions in this .npz")
    args = p.parse_args(argv)
    data = bf.make_data(args.rows, args.seed)
    cluster = dask = None
    if args.dask:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
        dask = Client(cluster)
    try:
        got = {p: fit_predict(p, data, args.seed, dask) for p in args.privacy}
    finally:
        if dask is not None:
            dask.close()
            cluster.close()  # type: ignore[union-attr]
    if args.save:
        pred = {p: v[0] for p, v in got.items()}
        trees = {f"{p}_trees": v[1] for p, v in got.items()}
        np.savez(args.save, rows=args.rows, seed=args.seed, **pred, **trees)
        print(f"saved {sorted(got)} predictions of {args.rows} rows to {args.save}")
        return 0
    with np.load(args.compare, allow_pickle=False) as saved:
        if int(saved["rows"]) != args.rows or int(saved["seed"]) != args.seed:
            print(f"{args.compare} holds rows={int(saved['rows'])}, seed={int(saved['seed'])}")
            return 1
        bad = 0
        for privacy, (pred, digest) in got.items():
            want = saved[privacy]
            same = want.dtype == pred.dtype and np.array_equal(
                want.view(np.uint64), pred.view(np.uint64)
            )
            differ = int(np.count_nonzero(want != pred)) if want.shape == pred.shape else -1
            trees = f"{privacy}_trees" not in saved or np.array_equal(
                saved[f"{privacy}_trees"], digest
            )
            print(
                f"{privacy}: predictions "
                + ("identical" if same else f"DIFFERENT ({differ} of {want.size})")
                + ", trees "
                + ("identical" if trees else "DIFFERENT (some tree array changed)")
            )
            bad += not (same and trees)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
