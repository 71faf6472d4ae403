// SPDX-License-Identifier: PostgreSQL
package dlock;

import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;
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
 * <p>Re-entrant per thread, as {@link ReentrantLock}: the threads of this
 * JVM that share one DLock contend for it locally first (fairly, in
 * order), and only the thread that gets it takes the one server hold; its
 * nested {@code lock()} calls only count, and the hold is released at its
 * last {@code unlock()}. {@code unlock()} by a thread that does not hold it
 * throws {@link IllegalMonitorStateException}.
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
 */
public final class DLock implements Lock, AutoCloseable {
    private static final SecureRandom RANDOM = new SecureRandom();

    private final Lease lease;
    private final ReentrantLock local = new ReentrantLock(true); // fair, as the server's line
    private volatile String mode = "exclusive";
    private final List<Consumer<DLock>> lostListeners = new CopyOnWriteArrayList<>();

    /** A lock on {@code name} with leases of {@code ttl} (renewed every ttl/3). */
    public DLock(DataSource source, String name, Duration ttl) {
        this.lease = new Lease(source, name, ttl, this::told);
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
        lease.setOwner(key);
        return this;
    }

    /** The longest single call of a wait (default 500 ms). */
    public DLock setPoll(Duration poll) {
        lease.setPoll(poll);
        return this;
    }

    /** Called once, on the renewal thread, when the lease is lost. */
    public DLock addLostListener(Consumer<DLock> listener) {
        lostListeners.add(listener);
        return this;
    }

    public String name() {
        return lease.name;
    }

    /** The fencing token of the current (or last) hold. */
    public long token() {
        return lease.token();
    }

    /** The owner key of the current (or last) hold. */
    public String owner() {
        return lease.owner();
    }

    /** Whether the server hold is there (held by some thread of this object). */
    public boolean isHeld() {
        return lease.isHeld();
    }

    /** Whether the calling thread holds it, as {@link ReentrantLock#isHeldByCurrentThread}. */
    public boolean isHeldByCurrentThread() {
        return local.isHeldByCurrentThread();
    }

    /** The calling thread's count of lock() calls not yet unlocked. */
    public int getHoldCount() {
        return local.getHoldCount();
    }

    /** Whether the current hold's lease was lost; stays true until the next hold. */
    public boolean isLost() {
        return lease.isLost();
    }

    public String lostReason() {
        return lease.lostReason();
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
        local.lock();
        if (local.getHoldCount() > 1) {
            return;
        }
        boolean interrupted = false;
        boolean done = false;
        try {
            while (true) {
                try {
                    lease.acquire("acquire", this::grant, -1, false);
                    done = true;
                    return;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (!done) {
                local.unlock();
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** Waits; an interrupt ends the wait (here or in line on the server, within one poll). */
    @Override
    public void lockInterruptibly() throws InterruptedException {
        local.lockInterruptibly();
        serverHold(-1, true);
    }

    /** Tries once, never waits (dlock_try_acquire): never overtakes a queued request. */
    @Override
    public boolean tryLock() {
        if (!local.tryLock()) {
            return false;
        }
        try {
            return serverHold(0, false);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // not reached: a try does not wait
            return false;
        }
    }

    /** Waits at most {@code time} in all (here and on the server); false when not granted by then. */
    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        long nanos = Math.max(0, unit.toNanos(time));
        long end = System.nanoTime() + nanos;
        if (!local.tryLock(nanos, TimeUnit.NANOSECONDS)) {
            return false;
        }
        // the server's wait gets what is left, at least a try
        long left = Math.max(0, end - System.nanoTime());
        return serverHold(left == 0 ? 0 : left, true);
    }

    /** After the local lock: the server hold for the first level, nothing for nested ones. */
    private boolean serverHold(long timeoutNanos, boolean interruptible) throws InterruptedException {
        if (local.getHoldCount() > 1) {
            return true;
        }
        boolean got = false;
        try {
            got = lease.acquire("acquire", this::grant, timeoutNanos, interruptible);
            return got;
        } finally {
            if (!got) {
                local.unlock();
            }
        }
    }

    /**
     * One level less; the last releases the hold by its owner key (also after
     * a loss: it can free only the key's own hold). IllegalMonitorStateException
     * when the calling thread does not hold it.
     */
    @Override
    public void unlock() {
        if (!local.isHeldByCurrentThread()) {
            throw new IllegalMonitorStateException("dlock: \"" + lease.name + "\" is not held by this thread");
        }
        try {
            if (local.getHoldCount() == 1) {
                lease.release();
            }
        } finally {
            local.unlock();
        }
    }

    /** try-with-resources: one unlock() if the calling thread holds it. */
    @Override
    public void close() {
        if (local.isHeldByCurrentThread()) {
            unlock();
        }
    }

    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("dlock: \"" + lease.name + "\": no conditions");
    }

    private Long grant(java.sql.Connection c, Sql.Dialect d, String owner, double timeout, boolean tryOnly)
            throws java.sql.SQLException {
        double ttl = lease.ttl.toNanos() / 1e9;
        String n = lease.name;
        if (tryOnly) {
            return d == Sql.Dialect.POSTGRES
                ? Sql.queryLong(c, Sql.tryAcquire(d), n, mode, ttl, owner)
                : Sql.queryLong(c, Sql.tryAcquire(d), n, ttl, mode, owner);
        }
        return d == Sql.Dialect.POSTGRES
            ? Sql.queryLong(c, Sql.acquire(d), n, mode, timeout, ttl, owner)
            : Sql.queryLong(c, Sql.acquire(d), n, timeout, ttl, mode, owner);
    }

    private void told() {
        for (Consumer<DLock> l : lostListeners) {
            try {
                l.accept(this);
            } catch (RuntimeException e) {
                // one listener's failure must not keep the others from being told
            }
        }
    }

    /** A renewal refused because the key no longer holds the lock. */
    static boolean isLostError(java.sql.SQLException e) {
        return Sql.isLostError(e);
    }

    @Override
    public String toString() {
        boolean held = isHeld();
        return "DLock[" + lease.name + (held ? ", token " + lease.token() : "") + (isLost() ? ", lost" : "") + "]";
    }
}
