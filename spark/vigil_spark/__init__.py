"""The rebalance report: a PySpark job that explains every rebalance."""
