"""A real Apache Kafka (KRaft) cluster from Maven Central jars, run with `java -cp`."""
