"""Wrote the fedforest 0.1.0 fixtures in tests/data (run once, on 0.1.0 = commit e27ab60).

Kept as the record of how the files were made; it uses 0.1.0 import paths, so it does
not run on later versions (and is not collected by pytest).
"""

import numpy as np
import pandas as pd
from fedforest._swarm_data import make_s500

import fedforest as ff
from fedforest.swarm import Peer, SwarmForest, shared_columns

rng = np.random.default_rng(7)
n = 300
X = pd.DataFrame(
    {
        "a": rng.normal(size=n),
        "b": rng.uniform(size=n),
        "ward": pd.Categorical(rng.choice(["x", "y", "z"], size=n)),
        "c": rng.normal(size=n),
    }
)
h = np.repeat(["s0", "s1", "s2"], n // 3)
y_reg = X["a"] * 2 + (X["ward"] == "y") * 1.5 + (h == "s1") + rng.normal(scale=0.1, size=n)
y_cls = np.where(X["b"] + 0.3 * (X["ward"] == "z") > 0.6, "hi", "lo")

reg = ff.FedForestRegressor(
    n_estimators=8, max_depth=4, split_on_client=True, oob_score=True, random_state=0
).fit(X, y_reg, client_ids=h)
cls = ff.FedForestClassifier(n_estimators=8, max_depth=4, oob_score=True, random_state=0).fit(
    X, y_cls, client_ids=h
)
reg.save("tests/data/v0.1.0-regressor.ffm")
cls.save("tests/data/v0.1.0-classifier.ffm")

ds = make_s500("mix", n_samples=240, random_state=1)
cols = list(ds.X.columns)
shared = cols[:6]
peers = []
for k, rows in enumerate(np.array_split(np.arange(len(ds.y)), 2)):
    own = shared + cols[6 + k :: 2]
    peers.append(
        Peer(f"P{k}", 6, random_state=k).fit(
            ds.X.iloc[rows][own],
            ds.y[rows],
            categorical_features=[c for c in own if c in ds.categorical],
        )
    )
bundles = [p.share(shared_features=shared_columns(peers)) for p in peers]
for k, b in enumerate(bundles):
    b.save(f"tests/data/v0.1.0-peer{k}.ffb")
site = ds.X.iloc[:40][list(bundles[0].feature_names)]
site.to_csv("tests/data/v0.1.0-site.csv", index=False)
X.to_csv("tests/data/v0.1.0-X.csv", index=False)
out = {
    "reg_predict": reg.predict(X, client_ids=h),
    "reg_apply": reg.apply(X, client_ids=h),
    "cls_proba": cls.predict_proba(X),
    "cls_apply": cls.apply(X),
}
for s in ("local", "park", "fpv", "pr", "mi", "ipr", "mp", "ss"):
    out[f"swarm_{s}"] = SwarmForest(bundles).predict_proba(
        site, strategy=s, site="P0", random_state=3
    )
np.savez("tests/data/v0.1.0-expected.npz", **out)
print({k: v.shape for k, v in out.items()})
