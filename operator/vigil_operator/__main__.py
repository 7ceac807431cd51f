import sys

from vigil_operator.cli import main

sys.exit(main())
