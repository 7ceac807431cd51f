package dev.vigil.kafka;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;

/**
 * Tells the vigil sidecar after each poll that the app polled, and as which member: the beacon signal.
 *
 * <p>Fire and forget: {@link #afterPoll} never blocks the poll loop and never throws. Nothing is sent before the
 * consumer has a member id, and at most one beacon per 200 ms while member, generation and assignment stay the
 * same. The sidecar answers 204 (accepted) or 400 (malformed, counted in {@code vigil_sidecar_bad_beacons_total});
 * -1 stands for no answer (no sidecar).
 */
public final class VigilBeacon {
    /** At most one beacon per this many nanoseconds while nothing changes. */
    static final long QUIET_NANOS = 200_000_000L;

    private final HttpClient http = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(1)).build();
    private final URI uri;
    private String last = "";
    private long lastAt;

    /** @param hostPort the sidecar's beacon address, e.g. {@code 127.0.0.1:7390} ({@code $VIGIL_BEACON_ADDR}) */
    public VigilBeacon(String hostPort) {
        uri = URI.create("http://" + hostPort + "/v1/beacon");
    }

    /**
     * Call right after each poll(), in the polling thread.
     *
     * @return the sidecar's answer to come, or null when nothing was sent (not a member yet, nothing new, or the
     *     consumer could not say: closed)
     */
    public CompletableFuture<Integer> afterPoll(Consumer<?, ?> consumer) {
        try {
            ConsumerGroupMetadata g = consumer.groupMetadata();
            int assigned = consumer.assignment().size();
            String state = g.memberId() + "/" + g.generationId() + "/" + assigned;
            long now = System.nanoTime();
            if (g.memberId().isEmpty() || (state.equals(last) && now - lastAt < QUIET_NANOS)) {
                return null;
            }
            last = state;
            lastAt = now;
            String body = json(g.memberId(), g.generationId(), g.groupInstanceId(), assigned,
                    System.currentTimeMillis(), VigilHold.PROCESS);
            HttpRequest request = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(1))
                    .header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString(body)).build();
            return http.sendAsync(request, HttpResponse.BodyHandlers.discarding())
                    .thenApply(HttpResponse::statusCode).exceptionally(e -> -1);
        } catch (RuntimeException e) {  // never into the app: a closed consumer, a refused request
            return null;
        }
    }

    /** The beacon's JSON (the sidecar's {@code signals/beacon.py}); {@link Locale#ROOT}: a decimal comma is no JSON. */
    static String json(String memberId, int generation, Optional<String> instanceId, int assigned, long epochMillis,
            String process) {
        return String.format(Locale.ROOT,
                "{\"member_id\":%s,\"generation\":%d,\"instance_id\":%s,\"assigned\":%d,\"time\":%.3f,"
                + "\"process\":%s}",
                quote(memberId), generation, instanceId.map(VigilBeacon::quote).orElse("null"), assigned,
                epochMillis / 1000.0, quote(process));
    }

    static String quote(String s) {
        StringBuilder out = new StringBuilder(s.length() + 2).append('"');
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                default -> {
                    if (c < 0x20) out.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    else out.append(c);
                }
            }
        }
        return out.append('"').toString();
    }
}
