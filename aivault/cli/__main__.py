"""``python -m aivault.cli``: the same as the ``aivault`` command."""

import sys

try:
    from aivault.cli import main
except KeyboardInterrupt:  # Ctrl-C while the CLI's modules load: no traceback
    sys.exit(130)

sys.exit(main())
