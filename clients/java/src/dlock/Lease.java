// SPDX-License-Identifier: PostgreSQL
package dlock;

import java.sql.SQLException;
import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;
import javax.sql.DataSource;

/**
 * One hold of a name (a lock, a semaphore's permits, an election's lead)
 * under an owner key, with its renewal watchdog: what DLock, Semaphore and
 * Election share. Only one thread at a time acquires or releases (the
 * callers see to it); the renewal thread reads and ends the hold.
 */
final class Lease {
    /** The grant call: the token, or null when not granted (yet). tryOnly: never wait. */
    @FunctionalInterface
    interface Grant {
        Long apply(java.sql.Connection c, Sql.Dialect d, String owner, double timeoutSeconds, boolean tryOnly)
            throws SQLException;
    }

    final DataSource source;
    final String name;
    final Duration ttl;
    final Runnable onLost;
    volatile String ownerGiven;
    volatile Duration poll = Duration.ofMillis(500);
    final Duration callLimit = Duration.ofSeconds(10);
    /*
     * The pause after a call that returned at once, behind another request:
     * doubling from PAUSE_MIN, at most PAUSE_MAX (which bounds how long a
     * grant made between two calls waits for its collecting call).
     */
    static final long PAUSE_MIN_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
    static final long PAUSE_MAX_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    private String owner;
    private long token;
    private boolean held;
    private volatile boolean lost;
    private volatile String lostReason;
    private volatile long deadlineNanos;
    private Thread renewer;
    private ExecutorService calls;

    Lease(DataSource source, String name, Duration ttl, Runnable onLost) {
        if (source == null) {
            throw new IllegalArgumentException("dlock: no DataSource");
        }
        if (name == null || name.isEmpty()) {
            throw new IllegalArgumentException("dlock: the name must be a non-empty string");
        }
        if (ttl == null || ttl.isNegative() || ttl.isZero()) {
            throw new IllegalArgumentException("dlock: the ttl of \"" + name + "\" must be positive");
        }
        this.source = source;
        this.name = name;
        this.ttl = ttl;
        this.onLost = onLost;
    }

    void setOwner(String key) {
        if (key != null && key.isEmpty()) {
            throw new IllegalArgumentException("dlock: empty owner key for \"" + name + "\"");
        }
        ownerGiven = key;
    }

    void setPoll(Duration p) {
        if (p.toMillis() < 10) {
            throw new IllegalArgumentException("dlock: poll below 10 ms for \"" + name + "\"");
        }
        poll = p;
    }

    synchronized long token() {
        if (token == 0) {
            throw new IllegalStateException("dlock: \"" + name + "\" was never held");
        }
        return token;
    }

    synchronized String owner() {
        return owner;
    }

    synchronized boolean isHeld() {
        return held;
    }

    boolean isLost() {
        return lost;
    }

    String lostReason() {
        return lostReason;
    }

    /**
     * timeoutNanos: -1 until granted, 0 try once. Server errors come as
     * DLockException naming the name, the withdrawal's error suppressed.
     */
    boolean acquire(String what, Grant grant, long timeoutNanos, boolean interruptible) throws InterruptedException {
        String key;
        synchronized (this) {
            if (held) {
                throw new IllegalStateException("dlock: \"" + name + "\" is already held by this object");
            }
            key = ownerGiven != null ? ownerGiven : DLock.newOwner();
            owner = key;
            lost = false;
            lostReason = null;
        }
        long grantedFrom;
        long got;
        try {
            if (timeoutNanos == 0) {
                grantedFrom = System.nanoTime();
                Long t = Sql.call(source, (c, d) -> grant.apply(c, d, key, 0, true));
                if (t == null) {
                    return false;
                }
                got = t;
            } else {
                long end = timeoutNanos < 0 ? Long.MAX_VALUE : System.nanoTime() + timeoutNanos;
                // a kept place granted between two calls started its lease after
                // the earlier call was sent: count from there
                long leaseFrom = 0;
                boolean haveLeaseFrom = false;
                long pauseNanos = 0;
                Long t;
                while (true) {
                    if (interruptible && Thread.interrupted()) {
                        InterruptedException ie = new InterruptedException(
                            "dlock: wait for \"" + name + "\" interrupted");
                        withdraw(ie);
                        throw ie;
                    }
                    long left = end - System.nanoTime();
                    if (timeoutNanos > 0 && left <= 0) {
                        withdraw(null);
                        return false;
                    }
                    long slice = Math.min(poll.toNanos(), left);
                    double seconds = Math.max(0.01, slice / 1e9);
                    long sent = System.nanoTime();
                    t = Sql.call(source, (c, d) -> grant.apply(c, d, key, seconds, false));
                    if (t != null) {
                        grantedFrom = haveLeaseFrom ? leaseFrom : sent;
                        break;
                    }
                    leaseFrom = sent;
                    haveLeaseFrom = true;
                    // a call behind another request returns at once, its place
                    // kept (the server waits only for the first in line): pause
                    // before the next one, longer while it stays behind
                    if (System.nanoTime() - sent < slice / 2) {
                        pauseNanos = pauseNanos == 0 ? PAUSE_MIN_NANOS : Math.min(PAUSE_MAX_NANOS, 2 * pauseNanos);
                        long nap = pauseNanos / 2 + ThreadLocalRandom.current().nextLong(pauseNanos / 2 + 1);
                        nap(Math.min(nap, Math.max(0, end - System.nanoTime())));
                    } else {
                        pauseNanos = 0;
                    }
                }
                got = t;
            }
        } catch (SQLException e) {
            DLockException de = DLockException.of(what, name, e);
            withdraw(de);
            throw de;
        } catch (RuntimeException | Error e) {
            withdraw(e);
            throw e;
        }
        synchronized (this) {
            token = got;
            held = true;
            deadlineNanos = grantedFrom + ttl.toNanos() - margin();
            calls = Executors.newSingleThreadExecutor(r -> daemon(r, "dlock-call " + name));
            renewer = daemon(() -> renewLoop(grantedFrom), "dlock-renew " + name);
            renewer.start();
        }
        return true;
    }

    /** Sleeps about nanos; an interrupt does not end it and stays set (the wait's loop sees it). */
    private static void nap(long nanos) {
        long until = System.nanoTime() + nanos;
        boolean interrupted = false;
        for (long left = nanos; left > 0; left = until - System.nanoTime()) {
            LockSupport.parkNanos(left);
            interrupted |= Thread.interrupted();
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Give up what the wait may have left: with a key of our own
     * dlock_release_all, which also ends a call of the key still waiting on
     * an abandoned connection; a caller's key may hold other locks, so then
     * only this name. Its error is added to the first one, never replaces it.
     */
    private void withdraw(Throwable first) {
        String key = owner();
        boolean own = ownerGiven == null;
        try {
            Sql.call(source, (c, d) -> own ? Sql.exec(c, Sql.RELEASE_ALL, key)
                : Sql.exec(c, Sql.RELEASE, name, key));
        } catch (SQLException | RuntimeException e) {
            if (first != null) {
                first.addSuppressed(e);
            }
            // else the lease (ttl) ends it on the server
        }
    }

    /** Ends the hold: stops renewing, releases by key (also after a loss: it frees only the key's own). */
    void release() {
        synchronized (this) {
            if (!held) {
                throw new IllegalMonitorStateException("dlock: \"" + name + "\" is not held");
            }
            held = false;
        }
        stopRenewer();
        String key = owner();
        try {
            limited((c, d) -> Sql.exec(c, Sql.RELEASE, name, key), callLimit);
        } catch (SQLException | TimeoutException e) {
            // the lease (ttl) ends it on the server
        } finally {
            calls.shutdownNow();
        }
    }

    /** A call of the holder while it holds (proclaim), on the call thread, limited. */
    <T> T callHeld(String what, Sql.Call<T> body) {
        try {
            return limited(body, callLimit);
        } catch (SQLException e) {
            throw DLockException.of(what, name, e);
        } catch (TimeoutException e) {
            throw new DLockException(name, "dlock: " + what + " \"" + name + "\": no answer within "
                + callLimit.toSeconds() + " s", e);
        }
    }

    // ----------------------------------------------------------- renew

    private long margin() {
        return Math.min(ttl.toNanos() / 10, TimeUnit.SECONDS.toNanos(1));
    }

    private void renewLoop(long from) {
        long interval = ttl.toNanos() / 3;
        long retry = Math.min(TimeUnit.MILLISECONDS.toNanos(500), interval / 4);
        long next = from + interval;
        String key = owner();
        double ttlSeconds = ttl.toNanos() / 1e9;
        try {
            while (true) {
                long wait = next - System.nanoTime();
                if (wait > 0) {
                    TimeUnit.NANOSECONDS.sleep(wait);
                }
                long now = System.nanoTime();
                if (now >= deadlineNanos) {
                    lose("no renewal succeeded within the lease (" + ttl.toMillis() / 1000.0 + " s)");
                    return;
                }
                try {
                    limited((c, d) -> Sql.exec(c, Sql.renew(d), name, ttlSeconds, key),
                        Duration.ofNanos(deadlineNanos - now));
                } catch (TimeoutException e) {
                    lose("a renewal did not finish before the lease could end");
                    return;
                } catch (SQLException e) {
                    if (Sql.isLostError(e)) {
                        lose("the server no longer has the lease (" + e.getMessage() + ")");
                        return;
                    }
                    next = System.nanoTime() + retry; // a lost connection: again soon
                    continue;
                }
                deadlineNanos = now + ttl.toNanos() - margin();
                next = now + interval;
            }
        } catch (InterruptedException e) {
            // release(): stop
        }
    }

    /** Marks the hold lost (once) and tells the owner object. */
    void lose(String why) {
        synchronized (this) {
            if (lost || !held) {
                return;
            }
            lostReason = why;
            lost = true;
        }
        onLost.run();
    }

    private void stopRenewer() {
        Thread t;
        synchronized (this) {
            t = renewer;
            renewer = null;
        }
        if (t != null && t != Thread.currentThread()) {
            t.interrupt();
            try {
                t.join(callLimit.toMillis());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** A call that may take at most {@code limit} (a connection may hang). */
    private <T> T limited(Sql.Call<T> body, Duration limit) throws SQLException, TimeoutException {
        ExecutorService ex;
        synchronized (this) {
            ex = calls;
        }
        Future<T> f = ex.submit(() -> Sql.call(source, body));
        try {
            return f.get(Math.max(0, limit.toNanos()), TimeUnit.NANOSECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof SQLException) {
                throw (SQLException) e.getCause();
            }
            throw new DLockException(name, "dlock: \"" + name + "\": " + e.getCause(), e.getCause());
        } catch (InterruptedException e) {
            f.cancel(true);
            Thread.currentThread().interrupt();
            throw new TimeoutException("interrupted");
        } catch (TimeoutException e) {
            f.cancel(true);
            throw e;
        }
    }

    static Thread daemon(Runnable r, String threadName) {
        Thread t = new Thread(r, threadName);
        t.setDaemon(true);
        return t;
    }
}
