// SPDX-License-Identifier: PostgreSQL
package dlock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import javax.sql.DataSource;

/**
 * Leader election on dlock: campaigns wait in FIFO order, the leader
 * publishes a value (where to reach it) and holds a lease renewed as a
 * {@link DLock}'s is, with the same lost listeners; its term is its fencing
 * token, larger for every new leader.
 *
 * <pre>{@code
 * Election e = new Election(dataSource, "scheduler", Duration.ofSeconds(15));
 * e.addLostListener(x -> stopLeading());
 * e.campaign("host-a:8080");              // waits until leading
 * e.proclaim("host-a:9090");              // a new value, same term
 * e.resign();                             // the next in line leads
 * try (Election.Observer o = e.observe(l -> System.out.println(l))) { ... }
 * }</pre>
 *
 * <p>One object is one owner key, one campaign at a time; its methods may
 * be called from any thread (they are serialized).
 */
public final class Election implements AutoCloseable {
    /** A leader: its published value and its term (its fencing token). */
    public record Leader(String value, long term) {
    }

    private final Lease lease;
    private final List<Consumer<Election>> lostListeners = new CopyOnWriteArrayList<>();
    private volatile Boolean listen;

    /** The election {@code name}; a leader's lease is {@code ttl}. */
    public Election(DataSource source, String name, Duration ttl) {
        this.lease = new Lease(source, name, ttl, this::told);
    }

    /** With the default lease of 30 s. */
    public Election(DataSource source, String name) {
        this(source, name, Duration.ofSeconds(30));
    }

    public Election setOwner(String key) {
        lease.setOwner(key);
        return this;
    }

    /** The longest single call of a wait, and an observer's polling interval (default 500 ms). */
    public Election setPoll(Duration poll) {
        lease.setPoll(poll);
        return this;
    }

    /**
     * Whether an observer on PostgreSQL uses LISTEN dlock_leader: null (the
     * default) when connected straight to the server, not through a proxy
     * (pgbouncer); true always; false never (polling alone).
     */
    public Election setListen(Boolean listen) {
        this.listen = listen;
        return this;
    }

    /** Called once, on the renewal thread, when the leader's lease is lost. */
    public Election addLostListener(Consumer<Election> listener) {
        lostListeners.add(listener);
        return this;
    }

    /** Waits until leading, publishing {@code value} (at most 1 KiB); an interrupt ends the wait. */
    public synchronized void campaign(String value) throws InterruptedException {
        run(value, -1);
    }

    /** Waits at most {@code timeout} to lead; false when not leading by then. */
    public synchronized boolean campaign(String value, long timeout, TimeUnit unit) throws InterruptedException {
        // no try-only campaign on the server: the shortest wait instead
        return run(value, Math.max(1, unit.toNanos(timeout)));
    }

    private boolean run(String value, long timeoutNanos) throws InterruptedException {
        Objects.requireNonNull(value, "dlock: the value of a campaign for \"" + lease.name + "\"");
        double ttl = lease.ttl.toNanos() / 1e9;
        return lease.acquire("campaign", (c, d, owner, timeout, tryOnly) ->
            Sql.queryLong(c, Sql.campaign(d), lease.name, value, timeout, ttl, owner), timeoutNanos, true);
    }

    /** Publishes a new value while leading; returns the term. DLockException when no longer leading. */
    public synchronized long proclaim(String value) {
        Objects.requireNonNull(value, "dlock: the value to proclaim for \"" + lease.name + "\"");
        if (!lease.isHeld()) {
            throw new IllegalStateException("dlock: election \"" + lease.name + "\" is not led by this object");
        }
        String owner = lease.owner();
        return lease.callHeld("proclaim", (c, d) -> Sql.queryLong(c, Sql.PROCLAIM, lease.name, value, owner));
    }

    /** Gives up the lead (or the campaign's place); the next campaign in line leads. */
    public synchronized void resign() {
        if (!lease.isHeld()) {
            throw new IllegalMonitorStateException("dlock: election \"" + lease.name + "\" is not led by this object");
        }
        lease.release();
    }

    /** try-with-resources: resigns if leading. */
    @Override
    public synchronized void close() {
        if (lease.isHeld()) {
            lease.release();
        }
    }

    /** Whether this object leads (its lease not known lost). */
    public boolean isLeader() {
        return lease.isHeld() && !lease.isLost();
    }

    /** The term (fencing token) of the current (or last) lead. */
    public long term() {
        return lease.token();
    }

    public String owner() {
        return lease.owner();
    }

    public String name() {
        return lease.name;
    }

    public boolean isLost() {
        return lease.isLost();
    }

    public String lostReason() {
        return lease.lostReason();
    }

    /** The current leader, from the server; empty when nobody leads. */
    public Optional<Leader> leader() {
        try {
            return Sql.call(lease.source, (c, d) -> read(c, d, lease.name));
        } catch (SQLException e) {
            throw DLockException.of("leader of", lease.name, e);
        }
    }

    private static Optional<Leader> read(Connection c, Sql.Dialect d, String name) throws SQLException {
        try (PreparedStatement st = Sql.prepare(c, Sql.leader(d), name); ResultSet rs = st.executeQuery()) {
            if (!rs.next()) {
                return Optional.empty();
            }
            return Optional.of(new Leader(rs.getString(1), Long.parseLong(rs.getString(2))));
        }
    }

    /**
     * Watches the leader: {@code listener} is called on a thread of the
     * observer's with the leader now, then with every change (a new leader,
     * a new value, none). On PostgreSQL it LISTENs for dlock_leader on a
     * connection of its own, kept until {@link Observer#close}, so a
     * change is seen at once; the leader is also read every poll interval,
     * which is all there is through pgbouncer and on MariaDB.
     */
    public Observer observe(Consumer<Optional<Leader>> listener) {
        Observer o = new Observer(listener);
        o.thread.start();
        return o;
    }

    /** A running observation; close() stops it. */
    public final class Observer implements AutoCloseable {
        private final Consumer<Optional<Leader>> listener;
        private final Thread thread;
        private volatile boolean closed;
        private volatile boolean listening;
        private volatile SQLException lastError;

        private Observer(Consumer<Optional<Leader>> listener) {
            this.listener = listener;
            this.thread = Lease.daemon(this::loop, "dlock-observe " + lease.name);
        }

        /** Whether it LISTENs now (else it polls). */
        public boolean isListening() {
            return listening;
        }

        /** The last error of a read or of the LISTEN connection (retried every poll interval), or null. */
        public SQLException lastError() {
            return lastError;
        }

        private void loop() {
            Optional<Leader> last = null;
            Connection conn = null;
            PgListen pg = null;
            boolean decided = Boolean.FALSE.equals(listen); // whether to LISTEN: asked once per connection
            try {
                while (!closed) {
                    long pollNanos = lease.poll.toNanos();
                    try {
                        if (!decided) {
                            conn = lease.source.getConnection();
                            if (Sql.dialect(conn) == Sql.Dialect.POSTGRES) {
                                pg = PgListen.open(conn, lease.name, listen);
                            }
                            if (pg == null) {
                                conn = closeQuietly(conn); // nothing to listen on: poll with short calls
                            }
                            decided = true;
                            listening = pg != null;
                        }
                        Optional<Leader> now = pg != null
                            ? read(conn, Sql.Dialect.POSTGRES, lease.name)
                            : Sql.call(lease.source, (c, d) -> read(c, d, lease.name));
                        lastError = null;
                        if (!now.equals(last)) {
                            last = now;
                            try {
                                listener.accept(now);
                            } catch (RuntimeException e) {
                                // the listener's own failure: it is told of the next change all the same
                            }
                        }
                        long next = System.nanoTime() + pollNanos;
                        if (pg != null) {
                            // a notification, or the poll interval: read again; awake at least
                            // every second for close()
                            long left;
                            while (!closed && (left = next - System.nanoTime()) > 0) {
                                if (pg.await((int) Math.min(1000, Math.max(1, left / 1_000_000)))) {
                                    break;
                                }
                            }
                        } else {
                            TimeUnit.NANOSECONDS.sleep(pollNanos);
                        }
                    } catch (SQLException e) {
                        lastError = e;
                        listening = false;
                        pg = null;
                        conn = closeQuietly(conn);
                        decided = Boolean.FALSE.equals(listen);
                        TimeUnit.NANOSECONDS.sleep(pollNanos);
                    }
                }
            } catch (InterruptedException e) {
                // close()
            } finally {
                closeQuietly(conn);
            }
        }

        /** Stops observing (and closes the LISTEN connection). */
        @Override
        public void close() {
            closed = true;
            thread.interrupt();
            try {
                thread.join(lease.callLimit.toMillis());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static Connection closeQuietly(Connection c) {
        if (c != null) {
            try {
                c.close();
            } catch (SQLException e) {
                // it is given up anyway
            }
        }
        return null;
    }

    private void told() {
        for (Consumer<Election> l : lostListeners) {
            try {
                l.accept(this);
            } catch (RuntimeException e) {
                // one listener's failure must not keep the others from being told
            }
        }
    }

    @Override
    public String toString() {
        return "Election[" + lease.name + (lease.isHeld() ? ", term " + lease.token() : "")
            + (isLost() ? ", lost" : "") + "]";
    }
}
