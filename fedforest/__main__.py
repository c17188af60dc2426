"""``python -m fedforest``: the ``fedforest`` command."""

from fedforest.cli import main

raise SystemExit(main())
