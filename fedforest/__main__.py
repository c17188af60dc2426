"""``python -m fedforest``: the ``fedforest`` command (``fedforest.cli.main``).

Run as ``python -m fedforest.cli`` would run it (its ``__main__`` block calls ``main()``
and exits with its status), so that no module of the package imports the command line.
"""

import runpy

runpy.run_module("fedforest.cli", run_name="__main__", alter_sys=True)
