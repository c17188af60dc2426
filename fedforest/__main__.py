"""``python -m fedforest``: the ``fedforest`` command (:func:`fedforest.cli.main`)."""

from fedforest.cli import main

raise SystemExit(main())
