// SPDX-License-Identifier: PostgreSQL
package dlock;

import static dlock.DLockTest.dataSource;
import static dlock.DLockTest.name;
import static dlock.DLockTest.rows;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** DLock re-entrant per thread and shared between threads, as ReentrantLock. */
class ReentrantTest {
    @ParameterizedTest(name = "{0}: nested lock/unlock: one server hold, released at the last unlock")
    @ValueSource(strings = {"postgresql", "mariadb"})
    void nested(String db) throws Exception {
        String n = name(db, "nested");
        DLock l = new DLock(dataSource(db), n, Duration.ofSeconds(10));
        l.lock();
        long token = l.token();
        l.lock();
        assertTrue(l.tryLock(1, TimeUnit.SECONDS), "a third level at once");
        assertEquals(3, l.getHoldCount());
        assertEquals(token, l.token(), "the same hold");
        assertEquals(List.of(l.owner()), rows(db, n), "one server hold");
        l.unlock();
        l.unlock();
        assertEquals(List.of(l.owner()), rows(db, n), "held until the last unlock");
        assertTrue(l.isHeld());
        l.unlock();
        assertFalse(l.isHeld());
        assertEquals(List.of(), rows(db, n), "released at the last unlock");
        assertThrows(IllegalMonitorStateException.class, l::unlock);
    }

    @ParameterizedTest(name = "{0}: 4 threads sharing one DLock exclude each other, one server hold at a time")
    @ValueSource(strings = {"postgresql", "mariadb"})
    void sharedByThreads(String db) throws Exception {
        String n = name(db, "shared");
        DLock l = new DLock(dataSource(db), n, Duration.ofSeconds(10));
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        List<Long> tokens = Collections.synchronizedList(new ArrayList<>());
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            Thread t = new Thread(() -> {
                try {
                    for (int r = 0; r < 3; r++) {
                        l.lock();
                        try {
                            if (inside.incrementAndGet() > 1) {
                                overlaps.incrementAndGet();
                            }
                            tokens.add(l.token());
                            if (rows(db, n).size() != 1) {
                                overlaps.incrementAndGet();
                            }
                            Thread.sleep(20);
                            inside.decrementAndGet();
                        } finally {
                            l.unlock();
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
            t.join(60_000);
        }
        assertEquals(List.of(), errors);
        assertEquals(0, overlaps.get(), "never two threads inside, never two server holds");
        assertEquals(12, tokens.size());
        assertEquals(12, tokens.stream().distinct().count(), "a server hold per entry");
        List<Long> sorted = new ArrayList<>(tokens);
        Collections.sort(sorted);
        assertEquals(sorted, tokens, "tokens increase in entry order");
        assertEquals(List.of(), rows(db, n));

        // a second thread waits while the first holds, and gets it at the unlock
        l.lock();
        AtomicReference<Boolean> tried = new AtomicReference<>();
        CountDownLatch got = new CountDownLatch(1);
        Thread other = new Thread(() -> {
            tried.set(l.tryLock());
            l.lock();
            got.countDown();
            l.unlock();
        });
        other.start();
        assertFalse(got.await(800, TimeUnit.MILLISECONDS), "the other thread waits");
        assertEquals(Boolean.FALSE, tried.get(), "tryLock from another thread: false");
        l.unlock();
        assertTrue(got.await(5, TimeUnit.SECONDS), "granted after the unlock");
        other.join(5000);
        assertEquals(List.of(), rows(db, n));
    }

    @ParameterizedTest(name = "{0}: unlock from a thread that does not hold it throws; the hold stays")
    @ValueSource(strings = {"postgresql", "mariadb"})
    void unlockByOtherThread(String db) throws Exception {
        String n = name(db, "nonowner");
        DLock l = new DLock(dataSource(db), n, Duration.ofSeconds(10));
        l.lock();
        try {
            AtomicReference<Throwable> got = new AtomicReference<>();
            Thread t = new Thread(() -> {
                try {
                    l.unlock();
                } catch (Throwable e) {
                    got.set(e);
                }
            });
            t.start();
            t.join(10_000);
            assertTrue(got.get() instanceof IllegalMonitorStateException, "IllegalMonitorStateException: " + got.get());
            assertTrue(got.get().getMessage().contains(n), got.get().getMessage());
            assertTrue(l.isHeld());
            assertEquals(List.of(l.owner()), rows(db, n), "still held");
        } finally {
            l.unlock();
        }
        assertEquals(List.of(), rows(db, n));
    }
}
