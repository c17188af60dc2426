"""``python -m fedforest.cli``: the ``fedforest`` command (as ``python -m fedforest``)."""

from fedforest.cli import main

raise SystemExit(main())
