// SPDX-License-Identifier: PostgreSQL
package dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.logging.Logger;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mariadb.jdbc.MariaDbDataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The Java client against a real PostgreSQL and MariaDB (clients/java/test.sh
 * starts them with clients/testenv.sh and passes the ports in DLOCK_TEST_*).
 */
class DLockTest {
    static DataSource dataSource(String db) throws SQLException {
        if (db.equals("postgresql")) {
            return pg(Integer.parseInt(System.getenv("DLOCK_TEST_PG_PORT")));
        }
        if (db.equals("bouncer")) {
            return pg(Integer.parseInt(System.getenv("DLOCK_TEST_BOUNCER_PORT")));
        }
        return new MariaDbDataSource("jdbc:mariadb://127.0.0.1:" + System.getenv("DLOCK_TEST_MY_PORT")
            + "/?user=dlock_test&password=dlock_test");
    }

    static PGSimpleDataSource pg(int port) {
        PGSimpleDataSource d = new PGSimpleDataSource();
        d.setServerNames(new String[] {"127.0.0.1"});
        d.setPortNumbers(new int[] {port});
        d.setUser("postgres");
        d.setDatabaseName("postgres");
        d.setPrepareThreshold(0); // pgbouncer in transaction mode: no server-side statements
        return d;
    }

    /** The owner keys holding or waiting for name, as the admin sees them. */
    static List<String> rows(String db, String name) throws SQLException {
        try (Connection c = dataSource(db).getConnection();
             PreparedStatement st = c.prepareStatement("SELECT owner FROM dlock.locks WHERE name = ?")) {
            st.setString(1, name);
            List<String> out = new ArrayList<>();
            try (ResultSet rs = st.executeQuery()) {
                while (rs.next()) {
                    out.add(rs.getString(1));
                }
            }
            return out;
        }
    }

    /** An administrator's release with the holder's key. */
    static void adminRelease(String db, String name, String key) throws SQLException {
        try (Connection c = dataSource(db).getConnection();
             PreparedStatement st = c.prepareStatement("SELECT dlock_release(?, ?)")) {
            st.setString(1, name);
            st.setString(2, key);
            try (ResultSet rs = st.executeQuery()) {
                assertTrue(rs.next() && rs.getBoolean(1), "the admin's release found the hold");
            }
        }
    }

    static String name(String db, String what) {
        return "java/" + db + "/" + what;
    }

    @ParameterizedTest(name = "{0}: tokens positive and increasing, released by try-with-resources")
    @ValueSource(strings = {"postgresql", "mariadb"})
    void tokensIncrease(String db) throws Exception {
        String n = name(db, "tokens");
        long last = 0;
        for (int i = 0; i < 3; i++) {
            DLock l = new DLock(dataSource(db), n, Duration.ofSeconds(10));
            l.lock();
            try (l) {
                assertTrue(l.token() > last, "token " + l.token() + " after " + last);
                assertEquals(List.of(l.owner()), rows(db, n));
                last = l.token();
            }
            assertFalse(l.isHeld());
        }
        assertEquals(List.of(), rows(db, n), "nothing left");
    }

    @ParameterizedTest(name = "{0}: 4 processes x 15 grants, never two inside, fencing tokens increasing")
    @ValueSource(strings = {"postgresql", "mariadb"})
    void exclusionAcrossProcesses(String db, @org.junit.jupiter.api.io.TempDir Path tmp) throws Exception {
        String n = name(db, "exclusion");
        Path store = tmp.resolve("fence");
        List<Process> ps = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            ps.add(new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", System.getenv("DLOCK_TEST_CLASSPATH"), "dlock.Worker", db, n, "15", store.toString())
                .redirectErrorStream(true).start());
        }
        for (Process p : ps) {
            assertTrue(p.waitFor(240, TimeUnit.SECONDS), "worker finished");
            String out = new String(p.getInputStream().readAllBytes());
            assertEquals(0, p.exitValue(), "worker: " + out);
        }
        List<Long> tokens = new ArrayList<>();
        for (String s : Files.readAllLines(store)) {
            tokens.add(Long.parseLong(s.trim()));
        }
        assertEquals(60, tokens.size(), "critical sections");
        List<Long> sorted = new ArrayList<>(tokens);
        Collections.sort(sorted);
        assertEquals(sorted, tokens, "tokens increasing in entry order");
        assertEquals(60, tokens.stream().distinct().count(), "no token twice");
    }

    @ParameterizedTest(name = "{0}: release by an admin: the listener told within a renewal period, the work interrupted")
    @ValueSource(strings = {"postgresql", "mariadb"})
    void lossToldAndWorkInterrupted(String db) throws Exception {
        String n = name(db, "lost");
        DLock l = new DLock(dataSource(db), n, Duration.ofSeconds(3));
        AtomicInteger told = new AtomicInteger();
        AtomicLong toldAt = new AtomicLong();
        Thread worker = Thread.currentThread();
        l.addLostListener(x -> {
            told.incrementAndGet();
            toldAt.set(System.nanoTime());
            worker.interrupt();
        });
        l.lock();
        try (l) {
            adminRelease(db, n, l.owner());
            long t0 = System.nanoTime();
            // the guarded work: interrupted by the listener
            assertThrows(InterruptedException.class, () -> Thread.sleep(30_000));
            double took = (System.nanoTime() - t0) / 1e9;
            assertTrue(took < 1.0 + 2.5, "interrupted after " + took + " s");
            assertTrue(l.isLost());
            assertTrue(l.lostReason().contains("no longer has"), l.lostReason());
            assertEquals(1, told.get(), "listener called once");
        }
        assertEquals(List.of(), rows(db, n), "nothing left");
    }

    @ParameterizedTest(name = "{0}: server unreachable: lost before the lease could end")
    @ValueSource(strings = {"postgresql", "mariadb"})
    void lostByDeadline(String db) throws Exception {
        String n = name(db, "deadline");
        Switchable ds = new Switchable(dataSource(db));
        // ttl 5: given up at 4.5 s, half a second before the lease could end
        DLock l = new DLock(ds, n, Duration.ofSeconds(5));
        CountDownLatch lost = new CountDownLatch(1);
        l.addLostListener(x -> lost.countDown());
        long t0 = System.nanoTime();
        l.lock();
        ds.broken = true;
        assertTrue(lost.await(5 + 2, TimeUnit.SECONDS), "lost");
        double took = (System.nanoTime() - t0) / 1e9;
        assertTrue(took < 5.0, "lost before the lease's end: " + took + " s");
        assertEquals(List.of(l.owner()), rows(db, n), "the server still had it then");
        ds.broken = false;
        l.unlock(); // releases by key (it was still ours)
        assertEquals(List.of(), rows(db, n), "released");
    }

    @ParameterizedTest(name = "{0}: an interrupted wait and a timed-out tryLock leave nothing in line")
    @ValueSource(strings = {"postgresql", "mariadb"})
    void cancelledWaits(String db) throws Exception {
        String n = name(db, "cancel");
        DLock holder = new DLock(dataSource(db), n, Duration.ofSeconds(30));
        holder.lock();
        try (holder) {
            DLock w = new DLock(dataSource(db), n, Duration.ofSeconds(30));
            AtomicReference<Throwable> got = new AtomicReference<>();
            Thread t = new Thread(() -> {
                try {
                    w.lockInterruptibly();
                } catch (Throwable e) {
                    got.set(e);
                }
            });
            t.start();
            Thread.sleep(1200);
            assertEquals(2, rows(db, n).size(), "waiting in line");
            long t0 = System.nanoTime();
            t.interrupt();
            t.join(5000);
            double took = (System.nanoTime() - t0) / 1e9;
            assertTrue(got.get() instanceof InterruptedException, "InterruptedException: " + got.get());
            assertTrue(took < 0.5 + 2.0, "ended after " + took + " s");
            assertEquals(List.of(holder.owner()), rows(db, n), "the waiter withdrawn");
            DLock w2 = new DLock(dataSource(db), n, Duration.ofSeconds(30));
            long t1 = System.nanoTime();
            assertFalse(w2.tryLock(1200, TimeUnit.MILLISECONDS));
            double waited = (System.nanoTime() - t1) / 1e9;
            assertTrue(waited > 1.1 && waited < 4, "timed out after " + waited + " s");
            assertFalse(w2.tryLock(), "try while held");
            assertEquals(List.of(holder.owner()), rows(db, n), "nothing left of the timed-out waits");
        }
        assertEquals(List.of(), rows(db, n));
    }

    @ParameterizedTest(name = "{0}: after a loss, unlock never frees the lock of the next holder")
    @ValueSource(strings = {"postgresql", "mariadb"})
    void neverAnothers(String db) throws Exception {
        String n = name(db, "anothers");
        DLock a = new DLock(dataSource(db), n, Duration.ofSeconds(3));
        CountDownLatch lost = new CountDownLatch(1);
        a.addLostListener(x -> lost.countDown());
        a.lock();
        adminRelease(db, n, a.owner());
        DLock b = new DLock(dataSource(db), n, Duration.ofSeconds(10));
        assertTrue(b.tryLock(5, TimeUnit.SECONDS));
        try (b) {
            assertTrue(lost.await(4, TimeUnit.SECONDS), "a told");
            assertTrue(b.token() > a.token(), "a larger token");
            a.unlock();
            assertEquals(List.of(b.owner()), rows(db, n), "b still holds");
        }
        assertEquals(List.of(), rows(db, n));
    }

    @ParameterizedTest(name = "{0}: the body threw: try-with-resources released; bad input refused, nothing left")
    @ValueSource(strings = {"postgresql", "mariadb"})
    void releasedOnThrowAndBadInput(String db) throws Exception {
        String n = name(db, "throw");
        DLock l = new DLock(dataSource(db), n, Duration.ofSeconds(10));
        l.lock();
        assertThrows(IllegalStateException.class, () -> {
            try (l) {
                throw new IllegalStateException("boom");
            }
        });
        assertEquals(List.of(), rows(db, n), "released");
        assertThrows(IllegalArgumentException.class, () -> new DLock(dataSource(db), "", Duration.ofSeconds(1)));
        assertThrows(IllegalArgumentException.class, () -> new DLock(dataSource(db), "x", Duration.ZERO));
        String bad = name(db, "badmode");
        DLock m = new DLock(dataSource(db), bad, Duration.ofSeconds(10)).setMode("sideways");
        DLockException e = assertThrows(DLockException.class, m::lock);
        assertTrue(e.getMessage().toLowerCase().contains("mode"), e.getMessage());
        if (db.equals("postgresql")) {
            assertEquals("22023", e.getSQLState());
        }
        assertEquals(List.of(), rows(db, bad), "nothing left");
        assertThrows(IllegalMonitorStateException.class, m::unlock);
    }

    @Test
    void pgbouncerWaitsDoNotPin() throws Exception {
        // 8 waiters through pgbouncer in transaction mode with 2 server connections
        DataSource ds = pg(Integer.parseInt(System.getenv("DLOCK_TEST_BOUNCER_PORT")));
        String n = "java/bouncer";
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        List<Long> tokens = Collections.synchronizedList(new ArrayList<>());
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        List<Thread> ts = new ArrayList<>();
        long t0 = System.nanoTime();
        for (int i = 0; i < 8; i++) {
            Thread t = new Thread(() -> {
                try {
                    for (int r = 0; r < 2; r++) {
                        DLock l = new DLock(ds, n, Duration.ofSeconds(20)).setPoll(Duration.ofMillis(200));
                        assertTrue(l.tryLock(90, TimeUnit.SECONDS));
                        try (l) {
                            if (inside.incrementAndGet() > 1) {
                                overlaps.incrementAndGet();
                            }
                            tokens.add(l.token());
                            Thread.sleep(50);
                            inside.decrementAndGet();
                        }
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            });
            t.start();
            ts.add(t);
        }
        for (Thread t : ts) {
            t.join(120_000);
        }
        assertEquals(List.of(), errors);
        assertEquals(16, tokens.size());
        assertEquals(0, overlaps.get());
        List<Long> sorted = new ArrayList<>(tokens);
        Collections.sort(sorted);
        assertEquals(sorted, tokens, "tokens increase in grant order");
        assertTrue((System.nanoTime() - t0) / 1e9 < 90);
        assertEquals(List.of(), rows("postgresql", n));
    }

    /** A DataSource that can be made unreachable. */
    static final class Switchable implements DataSource {
        final DataSource d;
        volatile boolean broken;

        Switchable(DataSource d) {
            this.d = d;
        }

        @Override
        public Connection getConnection() throws SQLException {
            if (broken) {
                throw new SQLException("unreachable", "08001");
            }
            return d.getConnection();
        }

        @Override
        public Connection getConnection(String u, String p) throws SQLException {
            return getConnection();
        }

        @Override
        public PrintWriter getLogWriter() throws SQLException {
            return d.getLogWriter();
        }

        @Override
        public void setLogWriter(PrintWriter out) throws SQLException {
            d.setLogWriter(out);
        }

        @Override
        public void setLoginTimeout(int seconds) throws SQLException {
            d.setLoginTimeout(seconds);
        }

        @Override
        public int getLoginTimeout() throws SQLException {
            return d.getLoginTimeout();
        }

        @Override
        public Logger getParentLogger() {
            return Logger.getGlobal();
        }

        @Override
        public <T> T unwrap(Class<T> iface) throws SQLException {
            return d.unwrap(iface);
        }

        @Override
        public boolean isWrapperFor(Class<?> iface) throws SQLException {
            return d.isWrapperFor(iface);
        }
    }

    static {
        assertNotNull(System.getenv("DLOCK_TEST_PG_PORT"), "run by clients/java/test.sh");
    }
}
