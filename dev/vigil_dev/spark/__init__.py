"""Spark's Kafka source for the report job, resolved into the dev cache at setup (never at job time)."""
