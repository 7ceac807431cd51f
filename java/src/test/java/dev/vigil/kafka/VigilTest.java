package dev.vigil.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Optional;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class VigilTest {
    @ParameterizedTest
    @CsvSource(delimiter = '|', nullValues = "NULL", value = {
        "127.0.0.1:7390|127.0.0.1:7390",
        "' 10.0.0.7:7390 '|10.0.0.7:7390",
        "NULL|NULL",
        "''|NULL",
        "'   '|NULL",
        "localhost|NULL",
        ":7390|NULL",
    })
    void theBeaconAddressIsHostColonPortOrNoSidecar(String value, String expected) {
        assertEquals(Optional.ofNullable(expected), Vigil.address(value));
    }
}
