package partout;

import com.facebook.airlift.units.DataSize;
import com.facebook.airlift.units.Duration;
import com.facebook.presto.common.Page;
import com.facebook.presto.execution.TaskId;
import com.facebook.presto.operator.ExchangeClient;
import com.facebook.presto.operator.PageBufferClient.PagesResponse;
import com.facebook.presto.operator.RpcShuffleClient;
import com.facebook.presto.spi.PrestoException;
import com.facebook.presto.spi.page.PagesSerde;
import com.facebook.presto.spi.page.PagesSerdeUtil;
import com.facebook.presto.spi.page.SerializedPage;
import com.google.common.collect.ImmutableList;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.SettableFuture;
import io.airlift.slice.Slices;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

import static com.facebook.presto.memory.context.AggregatedMemoryContext.newSimpleAggregatedMemoryContext;
import static com.facebook.presto.spi.StandardErrorCode.GENERIC_INTERNAL_ERROR;

/**
 * Pulls every page of buffers 0..N-1 of a task from a server of Presto's worker exchange
 * protocol with Presto's own ExchangeClient and PageBufferClient (token, acknowledgement and
 * DELETE logic, retries), one client per buffer, all at once; writes each buffer's rows to
 * DIR/buffer-B.txt as PageDump prints them (no "page" lines).
 *
 * <pre>
 * ExchangePull --url http://127.0.0.1:PORT --task EXCHANGE --buffers N --out DIR [--drop-every K] [--timeout-seconds S]
 * </pre>
 *
 * With --drop-every K, every K-th reply carrying pages is read and then thrown away as a
 * dropped connection would be: Presto's client asks for the same token again. Prints
 * "buffers N pages P rows R drops D"; exits non-zero on any failure or on the timeout.
 */
public final class ExchangePull {
    private ExchangePull() {}

    /** What Presto's HttpRpcShuffleClient does, on java.net.http. */
    private static final class HttpShuffleClient implements RpcShuffleClient {
        private final HttpClient http;
        private final URI location;
        private final long dropEvery;
        private final AtomicLong replies;
        private final AtomicLong drops;

        HttpShuffleClient(HttpClient http, URI location, long dropEvery, AtomicLong replies, AtomicLong drops) {
            this.http = http;
            this.location = location;
            this.dropEvery = dropEvery;
            this.replies = replies;
            this.drops = drops;
        }

        private URI at(String suffix) {
            return URI.create(location + "/" + suffix);
        }

        @Override
        public ListenableFuture<PagesResponse> getResults(long token, DataSize maxResponseSize) {
            HttpRequest request = HttpRequest.newBuilder(at(Long.toString(token)))
                    .header("X-Presto-Max-Size", ((long) maxResponseSize.toBytes()) + "B")
                    .timeout(java.time.Duration.ofSeconds(30))
                    .GET()
                    .build();
            return listenable(http.sendAsync(request, HttpResponse.BodyHandlers.ofByteArray())
                    .thenApply(response -> parse(response, token)));
        }

        private PagesResponse parse(HttpResponse<byte[]> response, long token) {
            int status = response.statusCode();
            if (status != 200 && status != 204) {
                // Not retried, as Presto's client treats an unexpected status.
                throw new PrestoException(GENERIC_INTERNAL_ERROR, "HTTP " + status + " from " + response.uri() + ": " + new String(response.body()).trim());
            }
            String instance = header(response, "X-Presto-Task-Instance-Id");
            long sequence = Long.parseLong(header(response, "X-Presto-Page-Sequence-Id"));
            long next = Long.parseLong(header(response, "X-Presto-Page-End-Sequence-Id"));
            boolean complete = Boolean.parseBoolean(header(response, "X-Presto-Buffer-Complete"));
            if (sequence != token) {
                throw new PrestoException(GENERIC_INTERNAL_ERROR, "asked for token " + token + ", got " + sequence);
            }
            if (status == 204) {
                return PagesResponse.createEmptyPagesResponse(instance, token, next, complete);
            }
            String type = header(response, "Content-Type");
            if (!type.equalsIgnoreCase("application/x-presto-pages")) {
                throw new PrestoException(GENERIC_INTERNAL_ERROR, "content type " + type);
            }
            List<SerializedPage> pages = ImmutableList.copyOf(PagesSerdeUtil.readSerializedPages(Slices.wrappedBuffer(response.body()).getInput()));
            if (dropEvery > 0 && !pages.isEmpty() && replies.incrementAndGet() % dropEvery == 0) {
                drops.incrementAndGet();
                throw new UncheckedIOException(new IOException("simulated dropped connection after token " + token));
            }
            return PagesResponse.createPagesResponse(instance, token, next, pages, complete);
        }

        private static String header(HttpResponse<?> response, String name) {
            return response.headers().firstValue(name).orElseThrow(() -> new PrestoException(GENERIC_INTERNAL_ERROR, "no " + name + " header"));
        }

        @Override
        public void acknowledgeResultsAsync(long nextToken) {
            HttpRequest request = HttpRequest.newBuilder(at(nextToken + "/acknowledge")).GET().build();
            http.sendAsync(request, HttpResponse.BodyHandlers.discarding());
        }

        @Override
        public ListenableFuture<?> abortResults() {
            HttpRequest request = HttpRequest.newBuilder(location).DELETE().build();
            return listenable(http.sendAsync(request, HttpResponse.BodyHandlers.discarding()));
        }

        @Override
        public Throwable rewriteException(Throwable failure) {
            return failure;
        }

        private static <T> ListenableFuture<T> listenable(CompletableFuture<T> future) {
            SettableFuture<T> settable = SettableFuture.create();
            future.whenComplete((value, failure) -> {
                if (failure == null) {
                    settable.set(value);
                }
                else {
                    settable.setException(failure instanceof CompletionException && failure.getCause() != null ? failure.getCause() : failure);
                }
            });
            return settable;
        }
    }

    public static void main(String[] args) throws Exception {
        String url = null;
        String task = null;
        int buffers = -1;
        Path out = null;
        long dropEvery = 0;
        long timeoutSeconds = 60;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--url" -> url = args[i + 1];
                case "--task" -> task = args[i + 1];
                case "--buffers" -> buffers = Integer.parseInt(args[i + 1]);
                case "--out" -> out = Path.of(args[i + 1]);
                case "--drop-every" -> dropEvery = Long.parseLong(args[i + 1]);
                case "--timeout-seconds" -> timeoutSeconds = Long.parseLong(args[i + 1]);
                default -> fail("unknown option " + args[i]);
            }
        }
        if (url == null || task == null || buffers < 1 || out == null || args.length % 2 != 0) {
            fail("usage: ExchangePull --url URL --task EXCHANGE --buffers N --out DIR [--drop-every K] [--timeout-seconds S]");
        }
        ScheduledExecutorService scheduler = Executors.newScheduledThreadPool(4);
        ExecutorService executor = Executors.newCachedThreadPool();
        HttpClient http = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(java.time.Duration.ofSeconds(10))
                .executor(executor)
                .build();
        AtomicLong replies = new AtomicLong();
        AtomicLong drops = new AtomicLong();
        Files.createDirectories(out);
        List<Future<long[]>> pulls = new ArrayList<>();
        for (int buffer = 0; buffer < buffers; buffer++) {
            int b = buffer;
            String base = url + "/v1/task/" + task + "/results/" + b;
            Path file = out.resolve("buffer-" + b + ".txt");
            long drop = dropEvery;
            pulls.add(executor.submit(() -> pull(base, b, file, location -> new HttpShuffleClient(http, location, drop, replies, drops), scheduler, executor)));
        }
        long pages = 0;
        long rows = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        try {
            for (Future<long[]> pull : pulls) {
                long[] counts = pull.get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                pages += counts[0];
                rows += counts[1];
            }
        }
        catch (TimeoutException e) {
            fail("timed out after " + timeoutSeconds + " s");
        }
        catch (java.util.concurrent.ExecutionException e) {
            e.getCause().printStackTrace();
            fail("failed: " + e.getCause());
        }
        System.out.println("buffers " + buffers + " pages " + pages + " rows " + rows + " drops " + drops.get());
        System.out.flush();
        System.exit(0);
    }

    /** Pulls one buffer to its end with its own ExchangeClient; its pages and rows. */
    private static long[] pull(String base, int buffer, Path file, com.facebook.presto.operator.RpcShuffleClientProvider clients, ScheduledExecutorService scheduler, ExecutorService executor) throws Exception {
        ExchangeClient client = new ExchangeClient(
                new DataSize(32, DataSize.Unit.MEGABYTE),
                new DataSize(1, DataSize.Unit.MEGABYTE),
                3,
                new Duration(1, TimeUnit.MINUTES),
                true,
                0.1,
                clients,
                scheduler,
                newSimpleAggregatedMemoryContext().newLocalMemoryContext("exchange-" + buffer),
                executor);
        PagesSerde serde = PageDump.serde();
        StringBuilder rows = new StringBuilder();
        long pages = 0;
        long count = 0;
        try {
            client.addLocation(URI.create(base), TaskId.valueOf("partout.0.0." + buffer + ".0"));
            client.noMoreLocations();
            while (!client.isFinished()) {
                SerializedPage serialized = client.pollPage();
                if (serialized == null) {
                    try {
                        client.isBlocked().get(1, TimeUnit.SECONDS);
                    }
                    catch (TimeoutException e) {
                        // Poll again.
                    }
                    continue;
                }
                Page page = PageDump.deserialize(serde, serialized);
                PageDump.appendRows(page, rows);
                pages++;
                count += page.getPositionCount();
            }
        }
        finally {
            client.close();
        }
        Files.writeString(file, rows);
        return new long[] {pages, count};
    }

    private static void fail(String message) {
        System.err.println("ExchangePull: " + message);
        System.err.flush();
        System.exit(2);
    }
}
