package dev.vigil.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The hold against a fake sidecar on a loopback port: what it sends, and how long its start waits for what answer. */
class VigilHoldTest {
    private static final String TOKEN = "0123abcd";
    private static final long PID = 4242;
    private static final String FIRST_LINE = "{\"pid\":4242,\"process\":\"0123abcd\",\"ready\":true}\n";
    private static final String HEAD = "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
            + "Transfer-Encoding: chunked\r\n\r\n";

    private final Deque<AutoCloseable> cleanup = new ArrayDeque<>();
    private final ExecutorService server = Executors.newCachedThreadPool();

    @AfterEach
    void close() throws Exception {
        while (!cleanup.isEmpty()) {
            cleanup.pop().close();
        }
        server.shutdownNow();
    }

    private VigilHold.Connection hold(String address) {
        VigilHold.Connection hold = new VigilHold.Connection(address, TOKEN, PID);
        cleanup.push(hold::close);
        return hold;
    }

    /** Start the hold and wait as {@link VigilHold#start} does; the milliseconds it took. */
    private static long startAndWait(VigilHold.Connection hold) {
        long began = System.nanoTime();
        hold.start();
        hold.awaitReady();
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - began);
    }

    @Test
    void startReturnsOnceTheSidecarSaysReady() throws Exception {
        FakeSidecar sidecar = sidecar();
        VigilHold.Connection hold = hold(sidecar.address());
        Future<String> request = server.submit(() -> {
            Socket socket = sidecar.next();
            String first = firstLine(socket);
            Thread.sleep(300);  // releasing the old member
            send(socket, HEAD + chunk("{\"ready\": true, \"released\": false}\n"));
            return first;
        });
        long took = startAndWait(hold);
        assertEquals(FIRST_LINE, request.get(10, TimeUnit.SECONDS));
        assertTrue(hold.ready());
        assertTrue(took >= 290 && took < 2_000, took + " ms");
    }

    @Test
    void aSidecarThatNeverAnswersCostsTheBoundAndTheHoldStaysOpen() throws Exception {
        FakeSidecar sidecar = sidecar();
        VigilHold.Connection hold = hold(sidecar.address());
        CountDownLatch eof = new CountDownLatch(1);
        Future<Socket> held = server.submit(() -> {
            Socket socket = sidecar.next();
            assertEquals(FIRST_LINE, firstLine(socket));
            socket.setSoTimeout(0);
            server.submit(() -> {
                try {
                    while (socket.getInputStream().read() >= 0) {
                        continue;  // nothing more is sent; anything is ignored
                    }
                } catch (IOException e) {
                    // reset: an end too
                }
                eof.countDown();
            });
            return socket;
        });
        long took = startAndWait(hold);
        Socket socket = held.get(10, TimeUnit.SECONDS);
        assertTrue(took >= 2_900 && took < 5_000, took + " ms");
        assertFalse(hold.ready());
        assertEquals(1, eof.getCount(), "the hold was closed");

        long again = System.nanoTime();
        hold.awaitReady();  // a later call: past the bound, at once
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - again) < 500);

        send(socket, HEAD + chunk("{\"ready\":true}\n"));  // still read: the connection is open
        assertTrue(hold.settled(10_000));
        assertTrue(hold.ready());
        assertEquals(1, eof.getCount(), "the hold was closed");
    }

    @Test
    void anOlderSidecarsAnswerEndsTheWaitAtOnce() throws Exception {
        FakeSidecar sidecar = sidecar();
        VigilHold.Connection hold = hold(sidecar.address());
        Future<String> request = server.submit(() -> {
            Socket socket = sidecar.next();
            String first = firstLine(socket);
            send(socket, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
            return first;
        });
        long took = startAndWait(hold);
        assertEquals(FIRST_LINE, request.get(10, TimeUnit.SECONDS));
        assertTrue(took < 1_000, took + " ms");
        assertTrue(hold.settled(0));
        assertFalse(hold.ready());
    }

    @Test
    void withNothingListeningTheWaitEndsAtOnce() throws Exception {
        int port;
        try (ServerSocket closed = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = closed.getLocalPort();
        }
        VigilHold.Connection hold = hold(InetAddress.getLoopbackAddress().getHostAddress() + ":" + port);
        long took = startAndWait(hold);
        assertTrue(took < 1_000, took + " ms");
        assertTrue(hold.settled(0));
        assertFalse(hold.ready());
    }

    @Test
    void anInterruptEndsTheWaitAndIsKept() throws Exception {
        FakeSidecar sidecar = sidecar();
        VigilHold.Connection hold = hold(sidecar.address());
        Future<String> request = server.submit(() -> firstLine(sidecar.next()));  // never answers
        Thread.currentThread().interrupt();
        long took = startAndWait(hold);
        boolean interrupted = Thread.interrupted();
        assertTrue(interrupted);
        assertTrue(took < 1_000, took + " ms");
        assertEquals(FIRST_LINE, request.get(10, TimeUnit.SECONDS));  // the hold is still made
    }

    @Test
    void theGoAheadMayFollowOtherLinesInPiecesAndLooseWhitespace() throws Exception {
        FakeSidecar sidecar = sidecar();
        VigilHold.Connection hold = hold(sidecar.address());
        server.submit(() -> {
            Socket socket = sidecar.next();
            firstLine(socket);
            send(socket, "HTTP/1.1 200 OK\r\nTransfer-Encoding:");
            send(socket, " Chunked\r\n\r\n" + chunk("{\"ready\": false}\n"));
            String go = "{ \"released\":true, \"ready\"\t: true}\n";
            send(socket, Integer.toHexString(go.length()) + ";ext=1\r\n" + go.substring(0, 12));
            send(socket, go.substring(12) + "\r\n");
            return null;
        });
        long took = startAndWait(hold);
        assertTrue(hold.ready());
        assertTrue(took < 2_000, took + " ms");
    }

    @Test
    void whenTheSidecarGoesAwayTheHoldReconnectsWithTheSameRequest() throws Exception {
        FakeSidecar sidecar = sidecar();
        VigilHold.Connection hold = hold(sidecar.address());
        Future<String> second = server.submit(() -> {
            try (Socket socket = sidecar.next()) {
                firstLine(socket);
                send(socket, HEAD + chunk("{\"ready\":true}\n"));
            }  // the sidecar restarts
            Socket again = sidecar.next();
            String first = firstLine(again);
            send(again, HEAD + chunk("{\"ready\":true}\n"));  // nobody waits for it now
            return first;
        });
        startAndWait(hold);
        assertTrue(hold.ready());
        assertEquals(FIRST_LINE, second.get(10, TimeUnit.SECONDS));
    }

    private FakeSidecar sidecar() throws IOException {
        FakeSidecar sidecar = new FakeSidecar();
        cleanup.push(sidecar);
        return sidecar;
    }

    private static String chunk(String data) {
        return Integer.toHexString(data.getBytes(StandardCharsets.UTF_8).length) + "\r\n" + data + "\r\n";
    }

    private static void send(Socket socket, String bytes) throws IOException {
        OutputStream out = socket.getOutputStream();
        out.write(bytes.getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    /** The hold request's first body line (its head checked), read byte by byte: nothing past it is consumed. */
    private static String firstLine(Socket socket) throws IOException {
        InputStream in = socket.getInputStream();
        assertEquals("POST /v1/hold HTTP/1.1", line(in));
        boolean chunked = false;
        for (String header = line(in); !header.isEmpty(); header = line(in)) {
            chunked |= header.equals("Transfer-Encoding: chunked");
        }
        assertTrue(chunked);
        int size = Integer.parseInt(line(in), 16);
        byte[] data = in.readNBytes(size);
        assertEquals(size, data.length);
        assertEquals("", line(in));
        return new String(data, StandardCharsets.UTF_8);
    }

    private static String line(InputStream in) throws IOException {
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        for (int b = in.read(); b != '\n'; b = in.read()) {
            if (b < 0) {
                throw new EOFException();
            }
            line.write(b);
        }
        String text = line.toString(StandardCharsets.UTF_8);
        assertTrue(text.endsWith("\r"), text);
        return text.substring(0, text.length() - 1);
    }

    /** A loopback listener standing in for the sidecar's beacon port: its connections in order of arrival. */
    private static final class FakeSidecar implements AutoCloseable {
        private final ServerSocket listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        private final BlockingQueue<Socket> accepted = new LinkedBlockingQueue<>();
        private final Deque<Socket> all = new ArrayDeque<>();
        private final Thread acceptor = new Thread(this::accept, "fake-sidecar");

        FakeSidecar() throws IOException {
            acceptor.setDaemon(true);
            acceptor.start();
        }

        String address() {
            return listener.getInetAddress().getHostAddress() + ":" + listener.getLocalPort();
        }

        Socket next() throws InterruptedException, IOException {
            Socket socket = accepted.poll(10, TimeUnit.SECONDS);
            assertNotNull(socket, "no connection");
            socket.setSoTimeout(10_000);
            return socket;
        }

        private void accept() {
            try {
                while (true) {
                    Socket socket = listener.accept();
                    synchronized (all) {
                        all.push(socket);
                    }
                    accepted.add(socket);
                }
            } catch (IOException e) {
                // closed
            }
        }

        @Override
        public void close() throws IOException {
            listener.close();
            synchronized (all) {
                for (Socket socket : all) {
                    socket.close();
                }
            }
        }
    }
}
