"""`python -m vigil_spark` and spark-submit's entry (`spark-submit … vigil_spark/__main__.py --out DIR`)."""

import sys

from vigil_spark import cli

if __name__ == "__main__":
    sys.exit(cli.main())
