"""The KIP-848 group APIs kafka-python 3.0 does not define, as data: one JSON schema per message in its (and
Kafka's) message-definition format, read by `vigil_core.kafka.wire`. Fields and versions are the protocol's
(ConsumerGroupHeartbeat = API 68, ConsumerGroupDescribe = API 69, both v0-1, flexible); only the versions vigil
sends are listed."""
