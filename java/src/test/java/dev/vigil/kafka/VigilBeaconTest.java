package dev.vigil.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.consumer.OffsetResetStrategy;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class VigilBeaconTest {
    @Test
    void theJsonIsTheSidecarsWithAPointWhateverTheLocale() {
        Locale before = Locale.getDefault();
        Locale.setDefault(Locale.GERMANY);  // a decimal comma
        try {
            assertEquals("{\"member_id\":\"m-1\",\"generation\":7,\"instance_id\":\"pod-0\",\"assigned\":3,"
                    + "\"time\":1700000000.250,\"process\":\"abc\"}",
                    VigilBeacon.json("m-1", 7, Optional.of("pod-0"), 3, 1_700_000_000_250L, "abc"));
        } finally {
            Locale.setDefault(before);
        }
    }

    @Test
    void aDynamicMemberHasANullInstanceId() {
        assertEquals("{\"member_id\":\"m\",\"generation\":-1,\"instance_id\":null,\"assigned\":0,\"time\":0.001,"
                + "\"process\":\"p\"}", VigilBeacon.json("m", -1, Optional.empty(), 0, 1L, "p"));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "plain|\"plain\"",
        "quo\"te|\"quo\\\"te\"",
        "back\\slash|\"back\\\\slash\"",
    })
    void stringsAreQuotedAsJson(String raw, String quoted) {
        assertEquals(quoted, VigilBeacon.quote(raw));
    }

    @Test
    void controlCharactersAreEscaped() {
        assertEquals("\"a\\u000ab\"", VigilBeacon.quote("a\nb"));
    }

    @SuppressWarnings("deprecation")  // OffsetResetStrategy: MockConsumer's constructor on kafka-clients 3.9
    private static MockConsumer<byte[], byte[]> consumer() {
        return new MockConsumer<>(OffsetResetStrategy.EARLIEST);
    }

    @Test
    void withoutASidecarTheAnswerIsMinusOneAndTheSameStateIsNotSentAgainAtOnce() throws Exception {
        MockConsumer<byte[], byte[]> consumer = consumer();
        VigilBeacon beacon = new VigilBeacon("127.0.0.1:1");  // nothing listens on port 1
        var answer = beacon.afterPoll(consumer);
        assertNotNull(answer);
        assertEquals(-1, answer.get(10, TimeUnit.SECONDS));
        assertNull(beacon.afterPoll(consumer));  // nothing new within 200 ms
    }

    @Test
    @SuppressWarnings("deprecation")
    void aConsumerThatThrowsIsNoExceptionInTheApp() {
        MockConsumer<byte[], byte[]> closed = new MockConsumer<>(OffsetResetStrategy.EARLIEST) {
            @Override
            public synchronized ConsumerGroupMetadata groupMetadata() {
                throw new IllegalStateException("This consumer has already been closed.");  // as KafkaConsumer's
            }
        };
        assertNull(new VigilBeacon("127.0.0.1:1").afterPoll(closed));
    }
}
