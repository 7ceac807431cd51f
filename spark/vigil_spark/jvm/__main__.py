import sys

from vigil_spark.jvm import main

sys.exit(main())
