"""Data files vendored with fedforest (sources and licences in README.md here)."""
