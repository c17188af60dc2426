"""Settings of an exact single tree (no bootstrap, every feature, every midpoint).

Such a tree equals scikit-learn's DecisionTree* on the pooled rows; the parity tests of
missing values, class weights and sample weights compare against it.
"""

EXACT_TREE = dict(
    n_estimators=1,
    bootstrap=False,
    max_features=None,
    n_bins=None,
    privacy="none",
    min_samples_leaf=5,
    random_state=0,
)
