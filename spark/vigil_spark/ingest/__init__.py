"""Incremental ingest of `__consumer_offsets` and vigil's events topic into the tables of `vigil_spark.tables`."""
