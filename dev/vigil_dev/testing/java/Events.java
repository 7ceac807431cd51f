// What vigil's Java test apps (StallingConsumer, StreamsApp, SpringListenerApp) share: their `vigil-java {json}`
// event lines on stdout, read by dev/vigil_dev/testing/java_consumer.py, and the stall they make while a file exists.
// Compiled with each app (javac's -sourcepath).

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.apache.kafka.common.TopicPartition;

final class Events {
    private Events() {}

    /** One event line: `vigil-java {"event":"<event>",<fields>}`. */
    static void emit(String event, String fields) {
        System.out.println("vigil-java {\"event\":" + q(event) + "," + fields + "}");
        System.out.flush();
    }

    /** A JSON string. */
    static String q(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    /** The partition numbers, sorted, as a JSON array. */
    static String partitionsJson(Collection<TopicPartition> partitions) {
        List<Integer> numbers = new ArrayList<>();
        for (TopicPartition tp : partitions) numbers.add(tp.partition());
        numbers.sort(null);
        return numbers.toString().replace(" ", "");
    }

    /** Blocks the calling thread (a stall: no poll) while `stall` exists, saying when it starts and ends. */
    static void blockWhileExists(Path stall) {
        if (!Files.exists(stall)) return;
        emit("stalled", "\"at\":" + System.currentTimeMillis());
        while (Files.exists(stall)) {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
        emit("resumed", "\"at\":" + System.currentTimeMillis());
    }
}
