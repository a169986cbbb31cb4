"""``python -m pragma_core`` runs the ``pragma`` command line."""

from .cli import main

main()
