package dev.vigil.kafka.spring;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import dev.vigil.kafka.VigilConsumer;
import java.util.Map;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

class VigilConsumerFactoryTest {
    private static final Map<String, Object> CONFIGS = Map.of(
            "bootstrap.servers", "127.0.0.1:9", "group.id", "vigil-factory-test");

    @Test
    void springGetsAVigilConsumer() {
        VigilConsumerFactory<String, byte[]> factory =
                new VigilConsumerFactory<>(CONFIGS, new StringDeserializer(), new ByteArrayDeserializer());
        try (Consumer<String, byte[]> consumer = factory.createConsumer()) {
            assertInstanceOf(VigilConsumer.class, consumer);
        }
    }

    @Test
    void deserializersMayComeFromTheConfigs() {
        Map<String, Object> configs = new java.util.HashMap<>(CONFIGS);
        configs.put("key.deserializer", StringDeserializer.class);
        configs.put("value.deserializer", StringDeserializer.class);
        try (Consumer<String, String> consumer = new VigilConsumerFactory<String, String>(configs).createConsumer()) {
            assertInstanceOf(VigilConsumer.class, consumer);
        }
    }
}
