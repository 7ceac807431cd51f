package dev.vigil.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.Test;

class VigilConsumerTest {
    /** Records the listener each subscription reached KafkaConsumer with; no broker is contacted. */
    private static final class Recording extends VigilConsumer<byte[], byte[]> {
        final List<ConsumerRebalanceListener> listeners = new ArrayList<>();

        Recording() {
            super(properties(), null);
        }

        @Override
        public void subscribe(Collection<String> topics, ConsumerRebalanceListener listener) {
            listeners.add(listener);
            super.subscribe(topics, listener);
        }

        @Override
        public void subscribe(Pattern pattern, ConsumerRebalanceListener listener) {
            listeners.add(listener);
            super.subscribe(pattern, listener);
        }
    }

    private static Properties properties() {
        Properties props = new Properties();
        props.put("bootstrap.servers", "127.0.0.1:9");
        props.put("group.id", "vigil-consumer-test");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return props;
    }

    @Test
    void aSubscriptionWithoutAListenerGetsOne() {
        try (Recording consumer = new Recording()) {
            consumer.subscribe(List.of("orders"));
            consumer.unsubscribe();
            consumer.subscribe(Pattern.compile("orders-.*"));
            assertEquals(2, consumer.listeners.size());
            consumer.listeners.forEach(listener -> assertNotNull(listener));
            assertSame(consumer.listeners.get(0), consumer.listeners.get(1));
        }
    }

    @Test
    void theAppsOwnListenerIsKept() {
        ConsumerRebalanceListener own = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            }
        };
        try (Recording consumer = new Recording()) {
            consumer.subscribe(List.of("orders"), own);
            assertEquals(List.of(own), consumer.listeners);
        }
    }
}
