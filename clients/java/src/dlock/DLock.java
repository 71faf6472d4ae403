// SPDX-License-Identifier: PostgreSQL
package dlock;

import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.function.Consumer;
import javax.sql.DataSource;

/**
 * A dlock lease held from Java: fair (FIFO), leased, named, with a fencing
 * token, on PostgreSQL (the dlock extension) or MariaDB (the dlock plugin).
 *
 * <pre>{@code
 * DLock lock = new DLock(dataSource, "orders/42", Duration.ofSeconds(30));
 * lock.addLostListener(l -> worker.interrupt());
 * if (lock.tryLock(5, TimeUnit.SECONDS)) {
 *     try (lock) {
 *         write(lock.token());
 *     }
 * }
 * }</pre>
 *
 * <p>Every hold is under an owner key (128 random bits unless one is given),
 * never a session lock: the renewals and the release may each take another
 * connection from the {@link DataSource} (a pool or not), and a release by
 * the key can never free a lock someone else holds now. A wait is a loop of
 * calls of at most {@link #setPoll poll} with {@code keep_place}, so it
 * never pins a pooled connection and keeps its place in line between calls;
 * a wait that ends without a grant withdraws its request. A daemon thread
 * renews the lease every ttl/3; the lease is trusted until ttl minus a
 * margin after the last successful renewal was sent. The lease is lost when
 * a renewal is refused (DL001) or none succeeded in that time: then
 * {@link #isLost()} turns true and the lost listeners are called once, on
 * the renewal thread.
 *
 * <p>Not re-entrant: one hold at a time per object. Use one object per
 * thread (or guard it), as its state is not meant for concurrent callers.
 */
public final class DLock implements Lock, AutoCloseable {
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final String LOST_STATE = "DL001";

    private enum Dialect { POSTGRES, MARIADB }

    private final DataSource source;
    private final String name;
    private final Duration ttl;
    private String mode = "exclusive";
    private String ownerGiven;
    private Duration poll = Duration.ofMillis(500);
    private Duration callLimit = Duration.ofSeconds(10);
    private final List<Consumer<DLock>> lostListeners = new CopyOnWriteArrayList<>();
    private volatile Dialect dialect;

    // the current hold
    private String owner;
    private long token;
    private boolean held;
    private volatile boolean lost;
    private volatile String lostReason;
    private volatile long deadlineNanos;
    private Thread renewer;
    private ExecutorService calls;

    /** A lock on {@code name} with leases of {@code ttl} (renewed every ttl/3). */
    public DLock(DataSource source, String name, Duration ttl) {
        if (source == null) {
            throw new IllegalArgumentException("dlock: no DataSource");
        }
        if (name == null || name.isEmpty()) {
            throw new IllegalArgumentException("dlock: the name must be a non-empty string");
        }
        if (ttl == null || ttl.isNegative() || ttl.isZero()) {
            throw new IllegalArgumentException("dlock: the ttl must be positive");
        }
        this.source = source;
        this.name = name;
        this.ttl = ttl;
    }

    /** With the default lease of 30 s. */
    public DLock(DataSource source, String name) {
        this(source, name, Duration.ofSeconds(30));
    }

    /** The mode: NL, CR, CW, PR, PW, EX, shared or exclusive (the default). */
    public DLock setMode(String mode) {
        this.mode = mode;
        return this;
    }

    /** An owner key of the caller's (1-255 bytes); default: a fresh random key per hold. */
    public DLock setOwner(String key) {
        if (key != null && key.isEmpty()) {
            throw new IllegalArgumentException("dlock: empty owner key");
        }
        this.ownerGiven = key;
        return this;
    }

    /** The longest single call of a wait (default 500 ms). */
    public DLock setPoll(Duration poll) {
        if (poll.toMillis() < 10) {
            throw new IllegalArgumentException("dlock: poll below 10 ms");
        }
        this.poll = poll;
        return this;
    }

    /** Called once, on the renewal thread, when the lease is lost. */
    public DLock addLostListener(Consumer<DLock> listener) {
        lostListeners.add(listener);
        return this;
    }

    public String name() {
        return name;
    }

    /** The fencing token of the current (or last) hold. */
    public synchronized long token() {
        if (token == 0) {
            throw new IllegalStateException("dlock: " + name + " was never held");
        }
        return token;
    }

    /** The owner key of the current (or last) hold. */
    public synchronized String owner() {
        return owner;
    }

    public synchronized boolean isHeld() {
        return held;
    }

    /** Whether the current hold's lease was lost; stays true until the next hold. */
    public boolean isLost() {
        return lost;
    }

    public String lostReason() {
        return lostReason;
    }

    /** A fresh owner key: 128 random bits in hex, as dlock_new_owner() makes. */
    public static String newOwner() {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    // ------------------------------------------------------------ Lock

    /** Waits until granted; an interrupt is kept for later, not obeyed. */
    @Override
    public void lock() {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    acquire(-1, false);
                    return;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
        acquire(-1, true);
    }

    /** Tries once, never waits (dlock_try_acquire): never overtakes a queued request. */
    @Override
    public boolean tryLock() {
        try {
            return acquire(0, false);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** Waits at most {@code time}; false (nothing left in line) when not granted by then. */
    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        long nanos = Math.max(0, unit.toNanos(time));
        return acquire(nanos, true);
    }

    /** Releases the hold by its owner key (also after a loss: it can free only the key's own hold). */
    @Override
    public void unlock() {
        synchronized (this) {
            if (!held) {
                throw new IllegalMonitorStateException("dlock: " + name + " is not held by this DLock");
            }
            held = false;
        }
        stopRenewer();
        try {
            limited(c -> release(c), callLimit);
        } catch (SQLException | TimeoutException e) {
            // the lease (ttl) ends it on the server
        } finally {
            calls.shutdownNow();
        }
    }

    /** try-with-resources: releases if held. */
    @Override
    public void close() {
        if (isHeld()) {
            unlock();
        }
    }

    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("dlock: no conditions");
    }

    // ---------------------------------------------------------- acquire

    /** timeoutNanos: -1 until granted, 0 try once. */
    private boolean acquire(long timeoutNanos, boolean interruptible) throws InterruptedException {
        synchronized (this) {
            if (held) {
                throw new IllegalStateException("dlock: " + name + " is already held by this DLock");
            }
            owner = ownerGiven != null ? ownerGiven : newOwner();
            lost = false;
            lostReason = null;
        }
        long grantedFrom;
        long got;
        try {
            if (timeoutNanos == 0) {
                grantedFrom = System.nanoTime();
                Long t = call(c -> tryAcquire(c));
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
                Long t = null;
                while (true) {
                    if (interruptible && Thread.interrupted()) {
                        withdraw();
                        throw new InterruptedException("dlock: wait for " + name + " interrupted");
                    }
                    long left = end - System.nanoTime();
                    if (timeoutNanos > 0 && left <= 0) {
                        withdraw();
                        return false;
                    }
                    long slice = Math.min(poll.toNanos(), left);
                    double seconds = Math.max(0.01, slice / 1e9);
                    long sent = System.nanoTime();
                    t = call(c -> acquireCall(c, seconds));
                    if (t != null) {
                        grantedFrom = haveLeaseFrom ? leaseFrom : sent;
                        break;
                    }
                    leaseFrom = sent;
                    haveLeaseFrom = true;
                }
                got = t;
            }
        } catch (SQLException e) {
            withdraw();
            throw new DLockException("dlock: acquire " + name + ": " + e.getMessage(), e);
        } catch (RuntimeException | Error e) {
            withdraw();
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

    /**
     * Give up what the wait may have left: with a key of our own
     * dlock_release_all, which also ends a call of the key still waiting on
     * an abandoned connection; a caller's key may hold other locks, so then
     * only this name.
     */
    private void withdraw() {
        try {
            call(c -> ownerGiven == null ? releaseAll(c) : release(c));
        } catch (SQLException | RuntimeException e) {
            // the lease (ttl) ends it on the server
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
                    limited(c -> renew(c), Duration.ofNanos(deadlineNanos - now));
                } catch (TimeoutException e) {
                    lose("a renewal did not finish before the lease could end");
                    return;
                } catch (SQLException e) {
                    if (isLostError(e)) {
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
            // unlock(): stop
        }
    }

    private void lose(String why) {
        synchronized (this) {
            if (lost || !held) {
                return;
            }
            lostReason = why;
            lost = true;
        }
        for (Consumer<DLock> l : lostListeners) {
            try {
                l.accept(this);
            } catch (RuntimeException e) {
                // one listener's failure must not keep the others from being told
            }
        }
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

    // -------------------------------------------------------- the calls

    @FunctionalInterface
    private interface SqlCall<T> {
        T apply(Connection c) throws SQLException;
    }

    /** One call on a connection of the DataSource; commits only if not autocommit. */
    private <T> T call(SqlCall<T> body) throws SQLException {
        try (Connection c = source.getConnection()) {
            if (dialect == null) {
                String product = c.getMetaData().getDatabaseProductName();
                dialect = product.toLowerCase().contains("postgres") ? Dialect.POSTGRES : Dialect.MARIADB;
            }
            boolean commit = !c.getAutoCommit();
            try {
                T r = body.apply(c);
                if (commit) {
                    c.commit();
                }
                return r;
            } catch (SQLException e) {
                if (commit) {
                    try {
                        c.rollback();
                    } catch (SQLException ignored) {
                        // the connection is going anyway
                    }
                }
                throw e;
            }
        }
    }

    /** A call that may take at most {@code limit} (a connection may hang). */
    private <T> T limited(SqlCall<T> body, Duration limit) throws SQLException, TimeoutException {
        Future<T> f = calls.submit(() -> call(body));
        try {
            return f.get(Math.max(0, limit.toNanos()), TimeUnit.NANOSECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof SQLException) {
                throw (SQLException) e.getCause();
            }
            throw new DLockException("dlock: " + name + ": " + e.getCause(), e.getCause());
        } catch (InterruptedException e) {
            f.cancel(true);
            Thread.currentThread().interrupt();
            throw new TimeoutException("interrupted");
        } catch (TimeoutException e) {
            f.cancel(true);
            throw e;
        }
    }

    private Long acquireCall(Connection c, double timeoutSeconds) throws SQLException {
        String sql = dialect == Dialect.POSTGRES
            ? "SELECT dlock_acquire(?, mode => ?, timeout => make_interval(secs => ?), "
              + "ttl => make_interval(secs => ?), owner => ?, keep_place => true)"
            : "SELECT dlock_acquire(?, ?, ?, ?, ?, 1)";
        try (PreparedStatement st = c.prepareStatement(sql)) {
            st.setString(1, name);
            if (dialect == Dialect.POSTGRES) {
                st.setString(2, mode);
                st.setDouble(3, timeoutSeconds);
                st.setDouble(4, ttlSeconds());
            } else {
                st.setDouble(2, timeoutSeconds);
                st.setDouble(3, ttlSeconds());
                st.setString(4, mode);
            }
            st.setString(5, owner);
            return longResult(st);
        }
    }

    private Long tryAcquire(Connection c) throws SQLException {
        String sql = dialect == Dialect.POSTGRES
            ? "SELECT dlock_try_acquire(?, mode => ?, ttl => make_interval(secs => ?), owner => ?)"
            : "SELECT dlock_try_acquire(?, ?, ?, ?)";
        try (PreparedStatement st = c.prepareStatement(sql)) {
            st.setString(1, name);
            if (dialect == Dialect.POSTGRES) {
                st.setString(2, mode);
                st.setDouble(3, ttlSeconds());
            } else {
                st.setDouble(2, ttlSeconds());
                st.setString(3, mode);
            }
            st.setString(4, owner);
            return longResult(st);
        }
    }

    private Object renew(Connection c) throws SQLException {
        String sql = dialect == Dialect.POSTGRES
            ? "SELECT dlock_renew(?, make_interval(secs => ?), ?)"
            : "SELECT dlock_renew(?, ?, ?)";
        try (PreparedStatement st = c.prepareStatement(sql)) {
            st.setString(1, name);
            st.setDouble(2, ttlSeconds());
            st.setString(3, owner);
            try (ResultSet rs = st.executeQuery()) {
                return rs.next() ? rs.getString(1) : null;
            }
        }
    }

    private Long release(Connection c) throws SQLException {
        try (PreparedStatement st = c.prepareStatement("SELECT dlock_release(?, ?)")) {
            st.setString(1, name);
            st.setString(2, owner);
            try (ResultSet rs = st.executeQuery()) {
                return rs.next() && rs.getBoolean(1) ? 1L : 0L;
            }
        }
    }

    private Long releaseAll(Connection c) throws SQLException {
        try (PreparedStatement st = c.prepareStatement("SELECT dlock_release_all(?)")) {
            st.setString(1, owner);
            return longResult(st);
        }
    }

    private static Long longResult(PreparedStatement st) throws SQLException {
        try (ResultSet rs = st.executeQuery()) {
            if (!rs.next()) {
                return null;
            }
            long v = rs.getLong(1);
            return rs.wasNull() ? null : v;
        }
    }

    private double ttlSeconds() {
        return ttl.toNanos() / 1e9;
    }

    /** A renewal refused because the key no longer holds the lock. */
    static boolean isLostError(SQLException e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof SQLException) {
                SQLException s = (SQLException) t;
                if (LOST_STATE.equals(s.getSQLState())) {
                    return true; // PostgreSQL
                }
                String m = s.getMessage();
                if (s.getErrorCode() == 1105 && m != null && m.contains("[" + LOST_STATE + "]")) {
                    return true; // MariaDB
                }
            }
        }
        return false;
    }

    private static Thread daemon(Runnable r, String threadName) {
        Thread t = new Thread(r, threadName);
        t.setDaemon(true);
        return t;
    }

    @Override
    public String toString() {
        return "DLock[" + name + (held ? ", token " + token : "") + (lost ? ", lost" : "") + "]";
    }
}
