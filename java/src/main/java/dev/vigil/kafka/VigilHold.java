package dev.vigil.kafka;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One idle connection to the sidecar for the life of the process ({@code POST /v1/hold}): the kernel closes it
 * however the process ends (exit, crash, kill -9), and that close is the sidecar's proof that this app ended — what
 * heartbeat bridging of a classic static member and the release of a KIP-848 static member's instance id start on.
 * It reconnects when the sidecar restarts and never throws into the app.
 */
public final class VigilHold {
    /** This process's token, named in every beacon too: pids repeat across containers. */
    public static final String PROCESS = UUID.randomUUID().toString().replace("-", "");

    private static final AtomicBoolean STARTED = new AtomicBoolean();

    private VigilHold() {
    }

    /**
     * Start holding (a daemon thread); once per process, later calls do nothing.
     *
     * @param hostPort the sidecar's beacon address, e.g. {@code 127.0.0.1:7390}
     */
    public static void start(String hostPort) {
        if (!STARTED.compareAndSet(false, true)) {
            return;
        }
        Thread thread = new Thread(() -> hold(hostPort), "vigil-hold");
        thread.setDaemon(true);
        thread.start();
    }

    private static void hold(String hostPort) {
        int colon = hostPort.lastIndexOf(':');
        InetSocketAddress sidecar;
        try {
            sidecar = new InetSocketAddress(hostPort.substring(0, colon), Integer.parseInt(hostPort.substring(colon + 1)));
        } catch (RuntimeException e) {  // not host:port: no hold, never an exception in the app
            return;
        }
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
