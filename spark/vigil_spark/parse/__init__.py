"""Pure parsers of text inputs of the report (stdlib only, no Spark): `broker_log` reads Kafka broker log lines."""
