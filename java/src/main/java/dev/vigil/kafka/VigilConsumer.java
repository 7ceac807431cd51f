package dev.vigil.kafka;

import java.time.Duration;
import java.util.Collection;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Deserializer;

/**
 * A {@link KafkaConsumer} that beacons to its vigil sidecar after each {@link #poll(Duration)} and holds the
 * sidecar's connection for the life of the process. Use it where you construct your KafkaConsumer; nothing else
 * changes. Without a sidecar ({@code $VIGIL_BEACON_ADDR} unset) it is a plain KafkaConsumer. Nothing vigil does
 * throws into the app.
 *
 * <p>A subscription without a {@link ConsumerRebalanceListener} gets one that does nothing. With
 * {@code group.protocol=consumer} (KIP-848), a consumer without a listener rejoins from its background thread as soon
 * as vigil removes it, under the same member id, and takes its partitions back while the app is still stuck; with a
 * listener the rejoin waits for the app's next poll, so an evicted member stays out until the app polls again (as a
 * classic consumer always does). {@code subscribe(SubscriptionPattern)} (Kafka 4.0+) is not wrapped: pass it a
 * listener.
 */
public class VigilConsumer<K, V> extends KafkaConsumer<K, V> {
    private final VigilBeacon beacon;
    private volatile CompletableFuture<Integer> lastAnswer;

    public VigilConsumer(Map<String, Object> configs) {
        super(configs);
        beacon = Vigil.connect(Vigil.beaconAddress()).orElse(null);
    }

    public VigilConsumer(Properties properties) {
        super(properties);
        beacon = Vigil.connect(Vigil.beaconAddress()).orElse(null);
    }

    public VigilConsumer(Map<String, Object> configs, Deserializer<K> keyDeserializer,
            Deserializer<V> valueDeserializer) {
        super(configs, keyDeserializer, valueDeserializer);
        beacon = Vigil.connect(Vigil.beaconAddress()).orElse(null);
    }

    public VigilConsumer(Properties properties, Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
        super(properties, keyDeserializer, valueDeserializer);
        beacon = Vigil.connect(Vigil.beaconAddress()).orElse(null);
    }

    /**
     * With the sidecar's beacon address given, not read from the environment.
     *
     * @param beaconAddress {@code host:port}; null: no sidecar
     */
    public VigilConsumer(Properties properties, String beaconAddress) {
        super(properties);
        beacon = Vigil.connect(Vigil.address(beaconAddress)).orElse(null);
    }

    /** With a listener that does nothing, so that an eviction waits for the app's next poll (see above). */
    @Override
    public void subscribe(Collection<String> topics) {
        subscribe(topics, NO_LISTENER);
    }

    /** With a listener that does nothing, as {@link #subscribe(Collection)}. */
    @Override
    public void subscribe(Pattern pattern) {
        subscribe(pattern, NO_LISTENER);
    }

    private static final ConsumerRebalanceListener NO_LISTENER = new ConsumerRebalanceListener() {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
        }
    };

    @Override
    public ConsumerRecords<K, V> poll(Duration timeout) {
        ConsumerRecords<K, V> records = super.poll(timeout);
        if (beacon != null) {
            CompletableFuture<Integer> answer = beacon.afterPoll(this);
            if (answer != null) {
                lastAnswer = answer;
            }
        }
        return records;
    }

    /** The sidecar's answer to the last beacon sent (204, 400, or -1: none), empty before the first. */
    public Optional<CompletableFuture<Integer>> lastBeaconAnswer() {
        return Optional.ofNullable(lastAnswer);
    }
}
