// A real Java consumer (kafka-clients from the broker jars) for vigil's tests: it beacons to its sidecar after
// each poll exactly as sidecar/vigil_sidecar/JAVA.md tells Java users to, and stops polling while a file exists
// (stalled but alive: the client's own threads keep running). Compiled and started by
// dev/vigil_dev/testing/java_consumer.py (`java -cp <this>:<kafka libs>/* StallingConsumer ...`).
//
// Arguments: --bootstrap H:P --topic T --group G --client-id C --protocol classic|consumer
//            [--instance-id I] [--listener] [--beacon H:P] [--stall-file PATH] [--property k=v]...
// With --beacon it also holds the sidecar's connection (VigilHold) for the life of the process.
//
// stdout: one line per event, `vigil-java {json}`: started, stalled, resumed, group (member id, generation or
// assignment changed, seen after a poll), assigned / revoked / lost (the ConsumerRebalanceListener, with
// --listener), beacon (the sidecar's first answer, and each change of it), closed.
// The client's own log (log4j2 defaults) goes to the same stream without the prefix.

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class StallingConsumer {
    private static volatile boolean running = true;

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        String topic = null, beaconAddr = null, stallFile = null;
        boolean withListener = false;
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
                case "--listener" -> withListener = true;
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
        emit("started", "\"protocol\":" + q(props.getProperty("group.protocol", "classic"))
                + ",\"listener\":" + withListener + ",\"pid\":" + ProcessHandle.current().pid());

        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
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
        if (withListener) consumer.subscribe(List.of(topic), new Listener(consumer));
        else consumer.subscribe(List.of(topic));

        VigilBeacon beacon = beaconAddr == null ? null : new VigilBeacon(beaconAddr);
        if (beaconAddr != null) VigilHold.start(beaconAddr);
        AtomicInteger lastAnswer = new AtomicInteger(Integer.MIN_VALUE);
        Path stall = stallFile == null ? null : Path.of(stallFile);
        boolean stalled = false;
        String lastGroup = "";
        try {
            while (running) {
                boolean stallNow = stall != null && Files.exists(stall);
                if (stallNow != stalled) {
                    stalled = stallNow;
                    emit(stalled ? "stalled" : "resumed", "\"at\":" + System.currentTimeMillis());
                }
                if (stalled) {  // no call on the consumer at all: only its own threads run
                    Thread.sleep(20);
                    continue;
                }
                consumer.poll(Duration.ofMillis(200));  // the records are not the point here
                if (beacon != null) {
                    CompletableFuture<Integer> answer = beacon.afterPoll(consumer);
                    if (answer != null) {
                        answer.thenAccept(status -> {
                            if (lastAnswer.getAndSet(status) != status) emit("beacon", "\"status\":" + status);
                        });
                    }
                }
                String now = groupJson(consumer);
                if (!now.equals(lastGroup)) {
                    lastGroup = now;
                    emit("group", now);
                }
            }
        } catch (WakeupException e) {
            // the shutdown hook: close below
        } finally {
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(5)));
            emit("closed", "\"at\":" + System.currentTimeMillis());
        }
    }

    /** Records every callback with the consumer's view at that moment (called in the polling thread). */
    private record Listener(Consumer<?, ?> consumer) implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            emit("revoked", callbackJson(consumer, partitions));
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            emit("assigned", callbackJson(consumer, partitions));
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            emit("lost", callbackJson(consumer, partitions));
        }
    }

    private static String callbackJson(Consumer<?, ?> consumer, Collection<TopicPartition> partitions) {
        return groupJson(consumer) + ",\"partitions\":" + partitionsJson(partitions);
    }

    private static String groupJson(Consumer<?, ?> consumer) {
        ConsumerGroupMetadata g = consumer.groupMetadata();
        return "\"member_id\":" + q(g.memberId()) + ",\"generation\":" + g.generationId()
                + ",\"assigned\":" + partitionsJson(consumer.assignment());
    }

    private static String partitionsJson(Collection<TopicPartition> partitions) {
        List<Integer> numbers = new ArrayList<>();
        for (TopicPartition tp : partitions) numbers.add(tp.partition());
        numbers.sort(null);
        return numbers.toString().replace(" ", "");
    }

    private static void emit(String event, String fields) {
        System.out.println("vigil-java {\"event\":" + q(event) + "," + fields + "}");
        System.out.flush();
    }

    private static String q(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    // --- vigil beacon: begin (sidecar/vigil_sidecar/JAVA.md shows exactly this class) ---
    /** Tells the vigil sidecar after each poll that the app polled, and as which member (fire and forget). */
    static final class VigilBeacon {
        private final HttpClient http = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(1)).build();
        private final URI uri;
        private String last = "";
        private long lastAt;

        VigilBeacon(String hostPort) {  // the sidecar's beacon address, e.g. "127.0.0.1:7390"
            uri = URI.create("http://" + hostPort + "/v1/beacon");
        }

        /** Call right after each poll(), in the polling thread; never blocks, never throws. Returns the
         *  sidecar's answer to come (204 accepted, 400 malformed, -1 unreachable), or null if nothing was sent. */
        CompletableFuture<Integer> afterPoll(Consumer<?, ?> consumer) {
            ConsumerGroupMetadata g = consumer.groupMetadata();
            String state = g.memberId() + "/" + g.generationId() + "/" + consumer.assignment().size();
            long now = System.nanoTime();
            if (g.memberId().isEmpty() || (state.equals(last) && now - lastAt < 200_000_000L)) {
                return null;  // not a member yet, or nothing new within 200 ms
            }
            last = state;
            lastAt = now;
            String json = String.format(Locale.ROOT,
                    "{\"member_id\":%s,\"generation\":%d,\"instance_id\":%s,\"assigned\":%d,\"time\":%.3f,"
                    + "\"process\":%s}",
                    quote(g.memberId()), g.generationId(), g.groupInstanceId().map(VigilBeacon::quote).orElse("null"),
                    consumer.assignment().size(), System.currentTimeMillis() / 1000.0, quote(VigilHold.PROCESS));
            HttpRequest request = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(1))
                    .header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString(json)).build();
            return http.sendAsync(request, HttpResponse.BodyHandlers.discarding())
                    .thenApply(HttpResponse::statusCode).exceptionally(e -> -1);
        }

        private static String quote(String s) {
            return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
        }
    }

    /** One idle connection to the sidecar for the life of the process: the kernel closes it however the process
     *  ends (exit, crash, kill -9), and that close is the sidecar's proof that this app ended (a static member's
     *  session bridged, a KIP-848 static member's instance id released for its restart). Start it once. */
    static final class VigilHold {
        /** This process's token, named in every beacon too: pids repeat across containers. */
        static final String PROCESS = UUID.randomUUID().toString().replace("-", "");

        static void start(String hostPort) {  // the sidecar's beacon address, e.g. "127.0.0.1:7390"
            Thread thread = new Thread(() -> hold(hostPort), "vigil-hold");
            thread.setDaemon(true);
            thread.start();
        }

        private static void hold(String hostPort) {
            int colon = hostPort.lastIndexOf(':');
            InetSocketAddress sidecar = new InetSocketAddress(
                    hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
            String first = "{\"pid\":" + ProcessHandle.current().pid() + ",\"process\":\"" + PROCESS + "\"}\n";
            byte[] request = ("POST /v1/hold HTTP/1.1\r\nHost: " + hostPort + "\r\nContent-Type: application/x-ndjson"
                    + "\r\nTransfer-Encoding: chunked\r\n\r\n" + Integer.toHexString(first.length()) + "\r\n" + first
                    + "\r\n").getBytes(StandardCharsets.US_ASCII);
            long wait = 500;
            while (true) {
                boolean answered = false;
                try (Socket socket = new Socket()) {
                    socket.connect(sidecar, 2000);
                    socket.getOutputStream().write(request);
                    socket.getOutputStream().flush();
                    wait = 500;
                    answered = socket.getInputStream().read() >= 0;  // blocks for the life of the process
                } catch (IOException e) {
                    // no sidecar (yet, or any more): try again later, never bother the app
                }
                try {
                    Thread.sleep(answered ? 60_000 : wait);  // answered: a sidecar without /v1/hold
                } catch (InterruptedException e) {
                    return;
                }
                wait = Math.min(wait * 2, 5_000);
            }
        }
    }
    // --- vigil beacon: end ---
}
