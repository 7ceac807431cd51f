// A real Kafka Streams app (kafka-streams from the broker jars) for vigil's tests of streams groups (KIP-1071,
// `group.protocol=streams`) and of Kafka Streams on the classic protocol: one stateless sub-topology, input ->
// mapValues(upper case) -> output, so it needs no state store (and no RocksDB). Compiled and started by
// dev/vigil_dev/testing/streams_app.py (`java -cp <this>:<kafka libs>/* StreamsApp ...`).
//
// Arguments: --bootstrap H:P --application-id A --input T --output T --protocol classic|streams
//            [--instance-id I] [--state-dir PATH] [--vigil] [--stall-file PATH] [--property k=v]...
// --vigil: the stream threads' main consumers are vigil's (VigilClientSupplier, java/): they beacon to the sidecar
// $VIGIL_BEACON_ADDR names. --stall-file: while the file exists, processing a record blocks (the thread stops
// polling, its consumer's heartbeat thread keeps running): a stalled app.
// --instance-id is the main consumer's group.instance.id (a static member; Kafka Streams suffixes it with the
// stream thread's index). --property sets any StreamsConfig (prefixed ones too) and overrides the defaults here.
//
// stdout: one line per event, `vigil-java {json}`: started, state (each KafkaStreams state change: old, new),
// stalled / resumed (a record's processing blocked by the stall file, then let go), error (an uncaught exception in a
// stream thread; the client then shuts down), closed (after SIGTERM).
// The client's own log (log4j2 defaults) goes to the same stream without the prefix.

import dev.vigil.kafka.VigilClientSupplier;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

public final class StreamsApp {
    public static void main(String[] args) throws InterruptedException {
        Properties props = new Properties();
        String input = null, output = null, stallFile = null;
        boolean vigil = false;
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "500");  // offsets committed promptly: lag 0 soon
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--bootstrap" -> props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[++i]);
                case "--application-id" -> props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[++i]);
                case "--input" -> input = args[++i];
                case "--output" -> output = args[++i];
                case "--protocol" -> props.put("group.protocol", args[++i]);  // StreamsConfig's name, 4.1+
                case "--instance-id" -> props.put(StreamsConfig.consumerPrefix("group.instance.id"), args[++i]);
                case "--state-dir" -> props.put(StreamsConfig.STATE_DIR_CONFIG, args[++i]);
                case "--vigil" -> vigil = true;
                case "--stall-file" -> stallFile = args[++i];
                case "--property" -> {
                    String[] kv = args[++i].split("=", 2);
                    props.put(kv[0], kv[1]);
                }
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (input == null || output == null) throw new IllegalArgumentException("--input and --output are required");

        Path stall = stallFile == null ? null : Path.of(stallFile);
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .mapValues(value -> {
                    if (stall != null) Events.blockWhileExists(stall);
                    return value == null ? null : value.toUpperCase(Locale.ROOT);
                })
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        KafkaStreams streams = vigil
                ? new KafkaStreams(builder.build(), props, new VigilClientSupplier())
                : new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) ->
                Events.emit("state", "\"state\":" + Events.q(now.name()) + ",\"old\":" + Events.q(before.name())));
        streams.setUncaughtExceptionHandler(e -> {
            Events.emit("error", "\"message\":" + Events.q(String.valueOf(e)));
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });

        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(10));
            Events.emit("closed", "\"at\":" + System.currentTimeMillis());
            closed.countDown();
        }));
        Events.emit("started", "\"protocol\":" + Events.q(props.getProperty("group.protocol", "classic"))
                + ",\"pid\":" + ProcessHandle.current().pid());
        streams.start();
        closed.await();  // the stream threads do the work; the JVM ends once the shutdown hook has closed them
    }
}
