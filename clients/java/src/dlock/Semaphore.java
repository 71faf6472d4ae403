// SPDX-License-Identifier: PostgreSQL
package dlock;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import javax.sql.DataSource;

/**
 * Permits of a dlock counting semaphore: at most {@code capacity} permits
 * of {@code name} are held at once, granted in strict FIFO order (a request
 * for many is never overtaken by later requests for few), each hold leased
 * and renewed as a {@link DLock}'s is, with the same lost listeners.
 *
 * <pre>{@code
 * Semaphore jobs = new Semaphore(dataSource, "jobs", 4, Duration.ofSeconds(30));
 * if (jobs.tryAcquire(1, 10, TimeUnit.SECONDS)) {
 *     try (jobs) { run(jobs.token()); }
 * }
 * }</pre>
 *
 * <p>One object is one owner key, which holds one set of permits at a
 * time: a second acquire while held throws IllegalStateException. Its
 * methods may be called from any thread (they are serialized).
 */
public final class Semaphore implements AutoCloseable {
    private final Lease lease;
    private final int capacity;
    private volatile int permits;
    private final List<Consumer<Semaphore>> lostListeners = new CopyOnWriteArrayList<>();

    /** The semaphore {@code name} of {@code capacity} permits, leases of {@code ttl}. */
    public Semaphore(DataSource source, String name, int capacity, Duration ttl) {
        this.lease = new Lease(source, name, ttl, this::told);
        if (capacity < 1) {
            throw new IllegalArgumentException("dlock: the capacity of \"" + name + "\" must be at least 1");
        }
        this.capacity = capacity;
    }

    /** With the default lease of 30 s. */
    public Semaphore(DataSource source, String name, int capacity) {
        this(source, name, capacity, Duration.ofSeconds(30));
    }

    public Semaphore setOwner(String key) {
        lease.setOwner(key);
        return this;
    }

    /** The longest single call of a wait (default 500 ms). */
    public Semaphore setPoll(Duration poll) {
        lease.setPoll(poll);
        return this;
    }

    /** Called once, on the renewal thread, when the lease is lost. */
    public Semaphore addLostListener(Consumer<Semaphore> listener) {
        lostListeners.add(listener);
        return this;
    }

    /** Waits for one permit. */
    public void acquire() throws InterruptedException {
        acquire(1);
    }

    /** Waits for {@code permits} permits (1 … capacity); an interrupt ends the wait. */
    public synchronized void acquire(int permits) throws InterruptedException {
        take(permits, -1);
    }

    /** One permit if free now and nobody waits before it. */
    public boolean tryAcquire() {
        return tryAcquire(1);
    }

    /** {@code permits} permits if free now and nobody waits before them (dlock_try_semaphore). */
    public synchronized boolean tryAcquire(int permits) {
        try {
            return take(permits, 0);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // not reached: a try does not wait
            return false;
        }
    }

    /** Waits at most {@code timeout} for {@code permits} permits; false when not granted by then. */
    public synchronized boolean tryAcquire(int permits, long timeout, TimeUnit unit) throws InterruptedException {
        long nanos = Math.max(0, unit.toNanos(timeout));
        return take(permits, nanos == 0 ? 0 : nanos);
    }

    private boolean take(int n, long timeoutNanos) throws InterruptedException {
        if (n < 1 || n > capacity) {
            throw new IllegalArgumentException("dlock: permits of \"" + lease.name + "\" must be 1 … "
                + capacity + ", not " + n);
        }
        boolean got = lease.acquire("acquire semaphore", (c, d, owner, timeout, tryOnly) -> grant(c, d, owner,
            timeout, tryOnly, n), timeoutNanos, true);
        if (got) {
            permits = n;
        }
        return got;
    }

    private Long grant(Connection c, Sql.Dialect d, String owner, double timeout, boolean tryOnly, int n)
            throws SQLException {
        double ttl = lease.ttl.toNanos() / 1e9;
        String name = lease.name;
        if (tryOnly) {
            return Sql.queryLong(c, Sql.trySemaphore(d), name, capacity, n, ttl, owner);
        }
        return Sql.queryLong(c, Sql.semaphore(d), name, capacity, n, timeout, ttl, owner);
    }

    /** Gives back the permits held (also after a loss: it frees only this key's own). */
    public synchronized void release() {
        if (!lease.isHeld()) {
            throw new IllegalMonitorStateException("dlock: semaphore \"" + lease.name + "\" is not held by this object");
        }
        lease.release();
    }

    /** try-with-resources: releases if held. */
    @Override
    public synchronized void close() {
        if (lease.isHeld()) {
            lease.release();
        }
    }

    /** The permits free now on the server (the capacity when nobody holds or waits). */
    public int available() {
        try {
            Long n = Sql.call(lease.source, (c, d) -> Sql.queryLong(c, Sql.AVAILABLE, lease.name));
            return n == null ? capacity : n.intValue();
        } catch (SQLException e) {
            throw DLockException.of("available of semaphore", lease.name, e);
        }
    }

    public String name() {
        return lease.name;
    }

    public int capacity() {
        return capacity;
    }

    /** The permits of the current (or last) hold. */
    public int permits() {
        return permits;
    }

    /** The fencing token of the current (or last) hold. */
    public long token() {
        return lease.token();
    }

    public String owner() {
        return lease.owner();
    }

    public boolean isHeld() {
        return lease.isHeld();
    }

    public boolean isLost() {
        return lease.isLost();
    }

    public String lostReason() {
        return lease.lostReason();
    }

    private void told() {
        for (Consumer<Semaphore> l : lostListeners) {
            try {
                l.accept(this);
            } catch (RuntimeException e) {
                // one listener's failure must not keep the others from being told
            }
        }
    }

    @Override
    public String toString() {
        return "Semaphore[" + lease.name + ", " + permits + " of " + capacity
            + (isHeld() ? ", token " + lease.token() : "") + (isLost() ? ", lost" : "") + "]";
    }
}
