package dev.vigil.kafka;

import java.util.Optional;

/** Where the sidecar is: {@code $VIGIL_BEACON_ADDR}, which the injection webhook sets in the app's container. */
public final class Vigil {
    /** The app container's variable naming its sidecar's beacon address ({@code host:port}). */
    public static final String BEACON_ADDR_ENV = "VIGIL_BEACON_ADDR";

    private Vigil() {
    }

    /** The sidecar's beacon address, or empty when the pod has no sidecar (then every hook here is a no-op). */
    public static Optional<String> beaconAddress() {
        return address(System.getenv(BEACON_ADDR_ENV));
    }

    static Optional<String> address(String value) {
        if (value == null || value.isBlank() || value.strip().lastIndexOf(':') < 1) {
            return Optional.empty();
        }
        return Optional.of(value.strip());
    }

    /** A beacon to the sidecar, its hold started; empty without a sidecar. */
    static Optional<VigilBeacon> connect(Optional<String> address) {
        address.ifPresent(VigilHold::start);
        return address.map(VigilBeacon::new);
    }
}
