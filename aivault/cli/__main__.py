"""``python -m aivault.cli``: the same as the ``aivault`` command."""

import sys

from aivault.cli import main

sys.exit(main())
