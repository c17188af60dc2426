"""The fitted forest, read by the estimators and by nothing upstream.

Flat arrays (:mod:`.arrays`), the kernels that route rows through them (:mod:`.apply`)
and the safe file format (:mod:`.io`).
"""
