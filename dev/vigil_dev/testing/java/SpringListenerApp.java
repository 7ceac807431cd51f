// A Spring Kafka listener app for vigil's tests: a KafkaMessageListenerContainer whose consumers come from the
// library's consumer factory (dev.vigil.kafka.spring.VigilConsumerFactory, as sidecar/vigil_sidecar/JAVA.md tells
// Spring users: vigil's VigilConsumer where Spring makes its KafkaConsumer), so the container's polls beacon to the
// sidecar at $VIGIL_BEACON_ADDR. Its listener is stuck in processing while a file exists (the stall of a real
// listener: the container thread never returns to poll). Compiled with the library's sources and started by
// dev/vigil_dev/testing/spring_app.py (`java -cp <this>:<kafka libs>/*:<spring libs>/* ...`).
//
// Arguments: --bootstrap H:P --topic T --group G --client-id C --stall-file PATH [--property k=v]...
//
// stdout: one line per event, `vigil-java {json}`: started, assigned / revoked / lost (the container's rebalance
// listener), record (each record the listener got: partition, offset), stalled, resumed, closed.

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.springframework.kafka.listener.ConsumerAwareRebalanceListener;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.KafkaMessageListenerContainer;
import org.springframework.kafka.listener.MessageListener;
import dev.vigil.kafka.spring.VigilConsumerFactory;

public final class SpringListenerApp {

    public static void main(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        String topic = null, stallFile = null;
        props.put("key.deserializer", ByteArrayDeserializer.class);
        props.put("value.deserializer", ByteArrayDeserializer.class);
        props.put("auto.offset.reset", "earliest");
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap" -> props.put("bootstrap.servers", args[++i]);
                case "--topic" -> topic = args[++i];
                case "--group" -> props.put("group.id", args[++i]);
                case "--client-id" -> props.put("client.id", args[++i]);
                case "--stall-file" -> stallFile = args[++i];
                case "--property" -> {
                    String[] kv = args[++i].split("=", 2);
                    props.put(kv[0], kv[1]);
                }
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (topic == null || stallFile == null) throw new IllegalArgumentException("--topic and --stall-file are required");
        Path stall = Path.of(stallFile);
        Events.emit("started", "\"pid\":" + ProcessHandle.current().pid());

        ContainerProperties container = new ContainerProperties(topic);
        container.setConsumerRebalanceListener(new Listener());
        container.setMessageListener((MessageListener<byte[], byte[]>) record -> handle(record, stall));
        container.setShutdownTimeout(10_000);
        KafkaMessageListenerContainer<byte[], byte[]> listener =
                new KafkaMessageListenerContainer<>(new VigilConsumerFactory<>(props), container);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                Files.deleteIfExists(stall);  // a stuck listener returns, so the container can close its consumer
            } catch (java.io.IOException e) {
                // stopping anyway
            }
            listener.stop();
            Events.emit("closed", "\"at\":" + System.currentTimeMillis());
            stopped.countDown();
        }));
        listener.start();
        stopped.await();
    }

    /** The listener: stuck while the stall file exists, as a listener stuck in its own processing would be. */
    private static void handle(ConsumerRecord<byte[], byte[]> record, Path stall) {
        Events.emit("record", "\"partition\":" + record.partition() + ",\"offset\":" + record.offset());
        Events.blockWhileExists(stall);
    }

    private static final class Listener implements ConsumerAwareRebalanceListener {
        @Override
        public void onPartitionsRevokedAfterCommit(Consumer<?, ?> consumer, Collection<TopicPartition> partitions) {
            Events.emit("revoked", "\"partitions\":" + Events.partitionsJson(partitions));
        }

        @Override
        public void onPartitionsAssigned(Consumer<?, ?> consumer, Collection<TopicPartition> partitions) {
            Events.emit("assigned", "\"member_id\":" + Events.q(consumer.groupMetadata().memberId()) + ",\"partitions\":"
                    + Events.partitionsJson(partitions));
        }

        @Override
        public void onPartitionsLost(Consumer<?, ?> consumer, Collection<TopicPartition> partitions) {
            Events.emit("lost", "\"partitions\":" + Events.partitionsJson(partitions));
        }
    }
}
