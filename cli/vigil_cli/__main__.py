"""`python -m vigil_cli ...` is `vigil ...`."""

import sys

from vigil_cli.cli import main

if __name__ == "__main__":
    sys.exit(main())
