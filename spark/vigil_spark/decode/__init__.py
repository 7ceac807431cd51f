"""The report's `__consumer_offsets` decoder in Spark SQL (`sql`), differentially tested against the pure-Python
reference in `vigil_core.consumer_offsets`."""
