package dev.vigil.kafka;

import java.io.BufferedInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.ProtocolException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/**
 * One idle connection to the sidecar for the life of the process ({@code POST /v1/hold}): the kernel closes it
 * however the process ends (exit, crash, kill -9), and that close is the sidecar's proof that this app ended — what
 * heartbeat bridging of a classic static member and the release of a KIP-848 static member's instance id start on.
 * It reconnects when the sidecar restarts and never throws into the app.
 *
 * <p>{@link #start} also waits, at most {@link #READY_WAIT_MILLIS}, for the sidecar's go-ahead ({@code "ready":true}
 * in the request, a 200 and a {@code "ready": true} line in the answer): a restarted KIP-848 static member whose old
 * member the sidecar has not released yet gets UNRELEASED_INSTANCE_ID from the coordinator, fatal in the Java client.
 * A consumer joins its group only at its first poll, after its constructor (the caller) returns, so waiting here lets
 * the sidecar release the old member first. Without a sidecar to wait for (nothing listens, or one that answers
 * otherwise) it returns at once; a sidecar that ignores {@code "ready"} costs the bound once per process.
 */
public final class VigilHold {
    /** This process's token, named in every beacon too: pids repeat across containers. */
    public static final String PROCESS = UUID.randomUUID().toString().replace("-", "");

    /** The longest {@link #start} blocks its caller for the sidecar's go-ahead, counted from the first call. */
    public static final long READY_WAIT_MILLIS = 3_000;

    private static Connection process;  // guarded by VigilHold.class

    private VigilHold() {
    }

    /**
     * Start holding (a daemon thread) and wait for the sidecar's go-ahead; once per process: the first call starts
     * the hold, and no call waits past {@link #READY_WAIT_MILLIS} after the first began (later calls return at once
     * once the sidecar answered or that time passed). Never throws; an interrupt ends the wait, its flag kept.
     *
     * @param hostPort the sidecar's beacon address, e.g. {@code 127.0.0.1:7390} (a later call's is ignored)
     */
    public static void start(String hostPort) {
        Connection connection;
        synchronized (VigilHold.class) {
            if (process == null) {
                process = new Connection(hostPort, PROCESS, ProcessHandle.current().pid());
                process.start();
            }
            connection = process;
        }
        connection.awaitReady();
    }

    /** One hold: its thread, its go-ahead; one per process outside the tests. */
    static final class Connection {
        /** A 200 answer's line that lets the app join (whitespace may vary). */
        private static final Pattern READY = Pattern.compile("\"ready\"\\s*:\\s*true");
        private static final int MAX_HEAD_BYTES = 8_192;
        private static final int MAX_CHUNK_BYTES = 65_536;

        private final String hostPort;
        private final byte[] request;
        /** Counted down when the first attempt has an outcome (ready, refused, answered otherwise, ended). */
        private final CountDownLatch settled = new CountDownLatch(1);
        private volatile boolean ready;
        private volatile boolean closed;
        private volatile Socket socket;
        private volatile Thread thread;
        private long deadline;  // System.nanoTime(); written by start before the waits read it

        Connection(String hostPort, String process, long pid) {
            this.hostPort = hostPort;
            String first = "{\"pid\":" + pid + ",\"process\":\"" + process + "\",\"ready\":true}\n";
            this.request = ("POST /v1/hold HTTP/1.1\r\nHost: " + hostPort + "\r\nContent-Type: application/x-ndjson"
                    + "\r\nTransfer-Encoding: chunked\r\n\r\n" + Integer.toHexString(first.length()) + "\r\n" + first
                    + "\r\n").getBytes(StandardCharsets.US_ASCII);
        }

        /** Start the hold's daemon thread; the go-ahead wait is bounded from now. */
        synchronized void start() {
            deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(READY_WAIT_MILLIS);
            try {
                Thread holding = new Thread(this::hold, "vigil-hold");
                holding.setDaemon(true);
                thread = holding;
                holding.start();
            } catch (RuntimeException | OutOfMemoryError e) {  // no thread (no hold): never an exception in the app
                settled.countDown();
            }
        }

        /** Wait until the first attempt's outcome or the deadline; an interrupt ends the wait, its flag kept. */
        void awaitReady() {
            long left;
            synchronized (this) {
                left = deadline - System.nanoTime();
            }
            try {
                settled.await(Math.max(0, left), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        /** The sidecar's go-ahead arrived (on any connection so far). */
        boolean ready() {
            return ready;
        }

        /** Wait for the first attempt's outcome (tests). */
        boolean settled(long millis) throws InterruptedException {
            return settled.await(millis, TimeUnit.MILLISECONDS);
        }

        /** End this hold: its thread, its socket (tests; the process's hold ends with the process). */
        void close() {
            closed = true;
            Thread holding = thread;
            if (holding != null) {
                holding.interrupt();
            }
            Socket current = socket;
            if (current != null) {
                try {
                    current.close();
                } catch (IOException e) {
                    // closed anyway
                }
            }
        }

        private void hold() {
            int colon = hostPort.lastIndexOf(':');
            String host;
            int port;
            try {
                host = hostPort.substring(0, colon);
                port = Integer.parseInt(hostPort.substring(colon + 1));
                if (port < 1 || port > 65_535) {
                    throw new NumberFormatException(hostPort);
                }
            } catch (RuntimeException e) {  // not host:port: no hold, nothing to wait for
                settled.countDown();
                return;
            }
            long wait = 500;
            while (!closed) {
                boolean answered = false;
                try (Socket connection = new Socket()) {
                    socket = connection;
                    if (closed) {
                        return;
                    }
                    connection.connect(new InetSocketAddress(host, port), 2000);
                    connection.getOutputStream().write(request);
                    connection.getOutputStream().flush();
                    wait = 500;
                    listen(new BufferedInputStream(connection.getInputStream()));  // for the life of the process
                } catch (ProtocolException e) {
                    answered = true;  // a sidecar without /v1/hold's ready answer (or not a sidecar)
                } catch (IOException | RuntimeException e) {
                    // no sidecar (yet, or any more): try again soon, never bother the app
                } finally {
                    socket = null;
                    settled.countDown();  // this attempt ended: nobody waits for a later one
                }
                try {
                    Thread.sleep(answered ? 60_000 : wait);
                } catch (InterruptedException e) {
                    return;
                }
                wait = Math.min(wait * 2, 5_000);
            }
        }

        /**
         * Read the sidecar's answer until the connection ends: a 200 head, then chunks, one of them the go-ahead;
         * returns (or throws EOFException) when the sidecar ends it, ProtocolException for any other answer.
         */
        private void listen(InputStream in) throws IOException {
            int[] budget = {MAX_HEAD_BYTES};
            String status = line(in, budget);
            if (!status.matches("HTTP/1\\.[01] 200( .*)?")) {
                throw new ProtocolException(status);
            }
            boolean chunked = false;
            for (String header = line(in, budget); !header.isEmpty(); header = line(in, budget)) {
                int colon = header.indexOf(':');
                if (colon > 0 && header.substring(0, colon).trim().equalsIgnoreCase("transfer-encoding")) {
                    chunked = header.substring(colon + 1).toLowerCase(Locale.ROOT).contains("chunked");
                }
            }
            if (!chunked) {
                throw new ProtocolException("200 without a chunked body");
            }
            while (true) {
                budget[0] = 1_024;
                String size = line(in, budget);
                int semicolon = size.indexOf(';');
                int length;
                try {
                    length = Integer.parseInt((semicolon < 0 ? size : size.substring(0, semicolon)).trim(), 16);
                } catch (NumberFormatException e) {
                    throw new ProtocolException("chunk size " + size);
                }
                if (length < 0 || length > MAX_CHUNK_BYTES) {
                    throw new ProtocolException("chunk size " + size);
                }
                if (length == 0) {
                    return;  // the sidecar ended the answer: as if it went away
                }
                byte[] data = in.readNBytes(length);
                if (data.length < length) {
                    throw new EOFException();
                }
                budget[0] = 2;
                if (!line(in, budget).isEmpty()) {
                    throw new ProtocolException("chunk longer than its size");
                }
                if (READY.matcher(new String(data, StandardCharsets.UTF_8)).find()) {
                    ready = true;
                    settled.countDown();
                }
            }
        }

        /** One CRLF (or LF) ended line, its bytes counted against budget[0]. */
        private static String line(InputStream in, int[] budget) throws IOException {
            StringBuilder line = new StringBuilder();
            while (true) {
                int b = in.read();
                if (b < 0) {
                    throw new EOFException();
                }
                if (--budget[0] < 0) {
                    throw new ProtocolException("line too long");
                }
                if (b == '\n') {
                    int end = line.length();
                    return end > 0 && line.charAt(end - 1) == '\r' ? line.substring(0, end - 1) : line.toString();
                }
                line.append((char) b);
            }
        }
    }
}
