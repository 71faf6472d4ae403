// SPDX-License-Identifier: PostgreSQL
package dlock;

import static dlock.DLockTest.dataSource;
import static dlock.DLockTest.name;
import static dlock.DLockTest.rows;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Semaphore and Election on PostgreSQL, through pgbouncer, on MariaDB. */
class SemaphoreElectionTest {
    /** An administrator's dlock_force_release of the key's hold. */
    static void forceRelease(String db, String name, String key) throws SQLException {
        try (Connection c = dataSource(db).getConnection();
             PreparedStatement st = c.prepareStatement("SELECT dlock_force_release(?, ?, ?)")) {
            st.setString(1, name);
            st.setString(2, key);
            st.setString(3, "clients/java test");
            try (ResultSet rs = st.executeQuery()) {
                assertTrue(rs.next() && rs.getInt(1) == 1, "the admin released one holder");
            }
        }
    }

    @ParameterizedTest(name = "{0}: permits exclude: 2+1 of 3 held, 2 more wait until released")
    @ValueSource(strings = {"postgresql", "bouncer", "mariadb"})
    void permitsExclude(String db) throws Exception {
        String n = name(db, "sem");
        Semaphore a = new Semaphore(dataSource(db), n, 3, Duration.ofSeconds(10));
        Semaphore b = new Semaphore(dataSource(db), n, 3, Duration.ofSeconds(10));
        Semaphore c = new Semaphore(dataSource(db), n, 3, Duration.ofSeconds(10));
        assertEquals(3, a.available(), "all free before anyone holds");
        a.acquire(2);
        try (a) {
            assertEquals(1, a.available());
            assertFalse(b.tryAcquire(2), "2 more do not fit");
            assertTrue(c.tryAcquire(), "1 more fits");
            assertEquals(0, c.available());
            assertEquals(2, rows(db, n).size(), "two holders");
            long t0 = System.nanoTime();
            assertFalse(b.tryAcquire(2, 700, TimeUnit.MILLISECONDS), "still full");
            assertTrue((System.nanoTime() - t0) / 1e9 >= 0.6, "it waited");
            assertEquals(2, rows(db, n).size(), "the timed-out wait left nothing");
            c.release();
            AtomicReference<Throwable> err = new AtomicReference<>();
            CountDownLatch got = new CountDownLatch(1);
            Thread t = new Thread(() -> {
                try {
                    b.acquire(2);
                    got.countDown();
                } catch (Throwable e) {
                    err.set(e);
                }
            });
            t.start();
            assertFalse(got.await(800, TimeUnit.MILLISECONDS), "2 wait while 2 of 3 are held");
            a.release();
            assertTrue(got.await(5, TimeUnit.SECONDS), "granted at the release: " + err.get());
            assertTrue(b.token() > a.token(), "a larger token");
            assertEquals(2, b.permits());
            assertEquals(1, b.available());
            b.release();
        }
        assertThrows(IllegalArgumentException.class, () -> a.tryAcquire(4));
        assertEquals(List.of(), rows(db, n), "nothing left");
    }

    @ParameterizedTest(name = "{0}: a semaphore's and a leader's lease lost after dlock_force_release: told once")
    @ValueSource(strings = {"postgresql", "bouncer", "mariadb"})
    void lostAfterForceRelease(String db) throws Exception {
        String n = name(db, "semlost");
        Semaphore s = new Semaphore(dataSource(db), n, 2, Duration.ofSeconds(3));
        AtomicInteger told = new AtomicInteger();
        CountDownLatch lost = new CountDownLatch(1);
        s.addLostListener(x -> {
            told.incrementAndGet();
            lost.countDown();
        });
        s.acquire();
        forceRelease(db, n, s.owner());
        long t0 = System.nanoTime();
        assertTrue(lost.await(3, TimeUnit.SECONDS), "semaphore loss told");
        assertTrue((System.nanoTime() - t0) / 1e9 < 1.0 + 1.5, "within a renewal period");
        assertTrue(s.isLost());
        assertTrue(s.lostReason().contains("no longer has"), s.lostReason());
        s.release();
        assertEquals(1, told.get());

        String e = name(db, "electlost");
        Election el = new Election(dataSource(db), e, Duration.ofSeconds(3));
        CountDownLatch elLost = new CountDownLatch(1);
        el.addLostListener(x -> elLost.countDown());
        el.campaign("me");
        assertTrue(el.isLeader());
        forceRelease(db, e, el.owner());
        assertTrue(elLost.await(3, TimeUnit.SECONDS), "leader's loss told");
        assertFalse(el.isLeader());
        assertThrows(DLockException.class, () -> el.proclaim("again"), "proclaim after the loss");
        el.resign();
        assertEquals(List.of(), rows(db, n));
        assertEquals(List.of(), rows(db, e));
    }

    @ParameterizedTest(name = "{0}: campaign, proclaim, resign hands over to the next in line")
    @ValueSource(strings = {"postgresql", "bouncer", "mariadb"})
    void resignHandsOver(String db) throws Exception {
        String n = name(db, "elect");
        Election a = new Election(dataSource(db), n, Duration.ofSeconds(10));
        Election b = new Election(dataSource(db), n, Duration.ofSeconds(10));
        assertEquals(Optional.empty(), a.leader(), "nobody leads yet");
        a.campaign("host-a:1");
        assertEquals(Optional.of(new Election.Leader("host-a:1", a.term())), b.leader());
        assertEquals(a.term(), a.proclaim("host-a:2"));
        assertEquals("host-a:2", b.leader().orElseThrow().value());
        assertFalse(b.campaign("host-b:1", 600, TimeUnit.MILLISECONDS), "b does not lead while a does");
        CountDownLatch leads = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            try {
                b.campaign("host-b:1");
                leads.countDown();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        t.start();
        Thread.sleep(600);
        assertEquals(2, rows(db, n).size(), "b in line");
        long t0 = System.nanoTime();
        a.resign();
        assertTrue(leads.await(5, TimeUnit.SECONDS), "b leads after a resigned");
        assertTrue((System.nanoTime() - t0) / 1e9 < 1.5, "at once");
        assertTrue(b.isLeader());
        assertFalse(a.isLeader());
        Election.Leader now = a.leader().orElseThrow();
        assertEquals("host-b:1", now.value());
        assertTrue(now.term() > a.term(), "a new term");
        b.close();
        assertEquals(Optional.empty(), a.leader());
        assertEquals(List.of(), rows(db, n));
    }

    @ParameterizedTest(name = "{0}: an observer sees every new leader and value within a bound")
    @ValueSource(strings = {"postgresql", "bouncer", "mariadb"})
    void observerSeesChanges(String db) throws Exception {
        String n = name(db, "observe");
        boolean direct = db.equals("postgresql");
        // straight to PostgreSQL it LISTENs: a poll of 30 s shows that the
        // notification, not the polling, brings the change; elsewhere it polls
        Election watcher = new Election(dataSource(db), n)
            .setPoll(direct ? Duration.ofSeconds(30) : Duration.ofMillis(300));
        double bound = direct ? 1.0 : 0.3 + 1.0;
        BlockingQueue<Optional<Election.Leader>> seen = new LinkedBlockingQueue<>();
        try (Election.Observer o = watcher.observe(seen::add)) {
            assertEquals(Optional.empty(), seen.poll(5, TimeUnit.SECONDS), "nobody leads at the start");
            assertEquals(direct, o.isListening(), "LISTEN only straight to PostgreSQL");
            Election a = new Election(dataSource(db), n, Duration.ofSeconds(10));
            Election b = new Election(dataSource(db), n, Duration.ofSeconds(10));
            a.campaign("a");
            assertSeen(seen, new Election.Leader("a", a.term()), bound);
            a.proclaim("a2");
            assertSeen(seen, new Election.Leader("a2", a.term()), bound);
            Thread t = new Thread(() -> {
                try {
                    b.campaign("b");
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            t.start();
            Thread.sleep(500);
            a.resign();
            t.join(5000);
            assertTrue(b.isLeader());
            assertSeen(seen, new Election.Leader("b", b.term()), bound);
            b.resign();
            assertEquals(Optional.empty(), seen.poll((long) (bound * 1000) + 500, TimeUnit.MILLISECONDS),
                "nobody leads");
        }
        assertEquals(List.of(), rows(db, n));
    }

    /** The next leader seen, within the bound (a "nobody leads" between two leaders may be seen or not). */
    private static void assertSeen(BlockingQueue<Optional<Election.Leader>> seen, Election.Leader want,
            double bound) throws InterruptedException {
        long t0 = System.nanoTime();
        long end = t0 + (long) ((bound + 0.5) * 1e9);
        Optional<Election.Leader> got;
        do {
            got = seen.poll(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS);
        } while (got != null && got.isEmpty());
        double took = (System.nanoTime() - t0) / 1e9;
        assertEquals(Optional.of(want), got, "seen after " + took + " s");
    }
}
