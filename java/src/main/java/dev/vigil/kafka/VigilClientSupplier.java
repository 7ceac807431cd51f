package dev.vigil.kafka;

import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.streams.KafkaClientSupplier;

/**
 * Kafka Streams with its main consumer a {@link VigilConsumer}: {@code new KafkaStreams(topology, props, new
 * VigilClientSupplier())}. Each stream thread's main consumer beacons after its polls; restore and global consumers
 * are plain (they are in no group).
 *
 * <p>The classic rebalance protocol only: with {@code group.protocol=streams} (KIP-1071, Kafka 4.1+) Kafka Streams
 * builds its main consumer itself and asks this supplier only for the others, so no beacon is sent; watch such an
 * app with the sidecar's {@code progress} signal.
 */
public class VigilClientSupplier implements KafkaClientSupplier {
    @Override
    public Admin getAdmin(Map<String, Object> config) {  // the interface's default throws (kafka-streams 4.x)
        return Admin.create(config);
    }

    @Override
    public Producer<byte[], byte[]> getProducer(Map<String, Object> config) {
        return new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
    }

    @Override
    public Consumer<byte[], byte[]> getConsumer(Map<String, Object> config) {
        return new VigilConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    @Override
    public Consumer<byte[], byte[]> getRestoreConsumer(Map<String, Object> config) {
        return new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    @Override
    public Consumer<byte[], byte[]> getGlobalConsumer(Map<String, Object> config) {
        return new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }
}
