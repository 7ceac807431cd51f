package dev.vigil.kafka.spring;

import dev.vigil.kafka.VigilConsumer;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.serialization.Deserializer;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;

/**
 * Spring Kafka's consumer factory, making a {@link VigilConsumer} where Spring makes its KafkaConsumer
 * ({@code createRawConsumer}, the one method Spring Kafka meant for it). Spring's own wrapping (post-processors,
 * listeners, the container's poll loop) is unchanged: the container's every poll beacons. Give it to the listener
 * container factory, or declare it as the {@code ConsumerFactory} bean.
 *
 * <p>spring-kafka is an optional dependency of this library: the app brings its own (compiled and tested against
 * 4.1.2).
 */
public class VigilConsumerFactory<K, V> extends DefaultKafkaConsumerFactory<K, V> {
    public VigilConsumerFactory(Map<String, Object> configs) {
        super(configs);
    }

    public VigilConsumerFactory(Map<String, Object> configs, Deserializer<K> keyDeserializer,
            Deserializer<V> valueDeserializer) {
        super(configs, keyDeserializer, valueDeserializer);
    }

    public VigilConsumerFactory(Map<String, Object> configs, Supplier<Deserializer<K>> keyDeserializerSupplier,
            Supplier<Deserializer<V>> valueDeserializerSupplier) {
        super(configs, keyDeserializerSupplier, valueDeserializerSupplier);
    }

    @Override
    protected Consumer<K, V> createRawConsumer(Map<String, Object> configs) {
        return new VigilConsumer<>(configs, getKeyDeserializer(), getValueDeserializer());
    }
}
