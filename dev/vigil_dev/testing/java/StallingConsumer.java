// A real Java consumer (kafka-clients from the broker jars) for vigil's tests: with --beacon it is vigil's
// VigilConsumer (the library in java/, as sidecar/vigil_sidecar/JAVA.md tells Java users to use it), and it stops
// polling while a file exists (stalled but alive: the client's own threads keep running). Compiled with the
// library's sources and started by dev/vigil_dev/testing/java_consumer.py (`java -cp <this>:<kafka libs>/* ...`).
//
// Arguments: --bootstrap H:P --topic T --group G --client-id C --protocol classic|consumer
//            [--instance-id I] [--subscription topics|listener|broker-regex] [--beacon H:P] [--stall-file PATH]
//            [--property k=v]...
// With --beacon the library also holds the sidecar's connection (VigilHold) for the life of the process.
// --subscription: topics (the default; subscribe(topics), no listener of its own), listener (with the Listener below)
// or broker-regex (a SubscriptionPattern, KIP-848's broker-side regex, and no listener: the one subscription
// VigilConsumer does not give a listener, so the client rejoins from its background thread when evicted).
//
// stdout: one line per event, `vigil-java {json}`: started, stalled, resumed, group (member id, generation or
// assignment changed, seen after a poll), assigned / revoked / lost (the ConsumerRebalanceListener, with
// --subscription listener), beacon (the sidecar's first answer, and each change of it), closed.
// The client's own log (log4j2 defaults) goes to the same stream without the prefix.

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import dev.vigil.kafka.VigilConsumer;

public final class StallingConsumer {
    private static volatile boolean running = true;

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        String topic = null, beaconAddr = null, stallFile = null;
        String subscription = "topics";
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("auto.offset.reset", "earliest");
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap" -> props.put("bootstrap.servers", args[++i]);
                case "--topic" -> topic = args[++i];
                case "--group" -> props.put("group.id", args[++i]);
                case "--client-id" -> props.put("client.id", args[++i]);
                case "--protocol" -> props.put("group.protocol", args[++i]);
                case "--instance-id" -> props.put("group.instance.id", args[++i]);
                case "--subscription" -> subscription = args[++i];
                case "--beacon" -> beaconAddr = args[++i];
                case "--stall-file" -> stallFile = args[++i];
                case "--property" -> {
                    String[] kv = args[++i].split("=", 2);
                    props.put(kv[0], kv[1]);
                }
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (topic == null) throw new IllegalArgumentException("--topic is required");
        Events.emit("started", "\"protocol\":" + Events.q(props.getProperty("group.protocol", "classic"))
                + ",\"subscription\":" + Events.q(subscription) + ",\"pid\":" + ProcessHandle.current().pid());

        KafkaConsumer<byte[], byte[]> consumer =
                beaconAddr == null ? new KafkaConsumer<>(props) : new VigilConsumer<>(props, beaconAddr);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            running = false;
            consumer.wakeup();
            try {
                main.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        switch (subscription) {
            case "topics" -> consumer.subscribe(List.of(topic));
            case "listener" -> consumer.subscribe(List.of(topic), new Listener(consumer));
            case "broker-regex" -> consumer.subscribe(new SubscriptionPattern(Pattern.quote(topic)));
            default -> throw new IllegalArgumentException("--subscription: topics, listener or broker-regex");
        }

        AtomicInteger lastAnswer = new AtomicInteger(Integer.MIN_VALUE);
        Path stall = stallFile == null ? null : Path.of(stallFile);
        boolean stalled = false;
        String lastGroup = "";
        try {
            while (running) {
                boolean stallNow = stall != null && Files.exists(stall);
                if (stallNow != stalled) {
                    stalled = stallNow;
                    Events.emit(stalled ? "stalled" : "resumed", "\"at\":" + System.currentTimeMillis());
                }
                if (stalled) {  // no call on the consumer at all: only its own threads run
                    Thread.sleep(20);
                    continue;
                }
                consumer.poll(Duration.ofMillis(200));  // the records are not the point here
                if (consumer instanceof VigilConsumer<byte[], byte[]> vigil) {
                    vigil.lastBeaconAnswer().ifPresent(answer -> answer.thenAccept(status -> {
                        if (lastAnswer.getAndSet(status) != status) Events.emit("beacon", "\"status\":" + status);
                    }));
                }
                String now = groupJson(consumer);
                if (!now.equals(lastGroup)) {
                    lastGroup = now;
                    Events.emit("group", now);
                }
            }
        } catch (WakeupException e) {
            // the shutdown hook: close below
        } finally {
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(5)));
            Events.emit("closed", "\"at\":" + System.currentTimeMillis());
        }
    }

    /** Records every callback with the consumer's view at that moment (called in the polling thread). */
    private record Listener(Consumer<?, ?> consumer) implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            Events.emit("revoked", callbackJson(consumer, partitions));
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            Events.emit("assigned", callbackJson(consumer, partitions));
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            Events.emit("lost", callbackJson(consumer, partitions));
        }
    }

    private static String callbackJson(Consumer<?, ?> consumer, Collection<TopicPartition> partitions) {
        return groupJson(consumer) + ",\"partitions\":" + Events.partitionsJson(partitions);
    }

    private static String groupJson(Consumer<?, ?> consumer) {
        ConsumerGroupMetadata g = consumer.groupMetadata();
        return "\"member_id\":" + Events.q(g.memberId()) + ",\"generation\":" + g.generationId()
                + ",\"assigned\":" + Events.partitionsJson(consumer.assignment());
    }
}
