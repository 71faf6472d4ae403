// SPDX-License-Identifier: PostgreSQL
package dlock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import javax.sql.DataSource;

/** The calls of both databases, in one place: every value a parameter, never SQL text. */
final class Sql {
    static final String LOST_STATE = "DL001";

    enum Dialect { POSTGRES, MARIADB }

    @FunctionalInterface
    interface Call<T> {
        T apply(Connection c, Dialect d) throws SQLException;
    }

    private Sql() {
    }

    static Dialect dialect(Connection c) throws SQLException {
        String product = c.getMetaData().getDatabaseProductName();
        return product.toLowerCase().contains("postgres") ? Dialect.POSTGRES : Dialect.MARIADB;
    }

    /**
     * One call on a connection of the DataSource; commits only if not
     * autocommit. A failed rollback is added to the call's error, never
     * put in its place: the first error is the one that says what went wrong.
     */
    static <T> T call(DataSource source, Call<T> body) throws SQLException {
        try (Connection c = source.getConnection()) {
            return on(c, body);
        }
    }

    static <T> T on(Connection c, Call<T> body) throws SQLException {
        Dialect d = dialect(c);
        boolean commit = !c.getAutoCommit();
        try {
            T r = body.apply(c, d);
            if (commit) {
                c.commit();
            }
            return r;
        } catch (SQLException e) {
            if (commit) {
                try {
                    c.rollback();
                } catch (SQLException r) {
                    e.addSuppressed(r);
                }
            }
            throw e;
        }
    }

    /** The first column of the one row as a Long; null for SQL NULL or no row. */
    static Long longResult(PreparedStatement st) throws SQLException {
        try (ResultSet rs = st.executeQuery()) {
            if (!rs.next()) {
                return null;
            }
            long v = rs.getLong(1);
            return rs.wasNull() ? null : v;
        }
    }

    static PreparedStatement prepare(Connection c, String sql, Object... args) throws SQLException {
        PreparedStatement st = c.prepareStatement(sql);
        try {
            for (int i = 0; i < args.length; i++) {
                Object a = args[i];
                if (a instanceof Double) {
                    st.setDouble(i + 1, (Double) a);
                } else if (a instanceof Integer) {
                    st.setInt(i + 1, (Integer) a);
                } else {
                    st.setString(i + 1, (String) a);
                }
            }
            return st;
        } catch (SQLException | RuntimeException e) {
            st.close();
            throw e;
        }
    }

    static Long queryLong(Connection c, String sql, Object... args) throws SQLException {
        try (PreparedStatement st = prepare(c, sql, args)) {
            return longResult(st);
        }
    }

    /** A call whose answer is not needed (dlock_renew's timestamptz, dlock_release's boolean). */
    static Void exec(Connection c, String sql, Object... args) throws SQLException {
        try (PreparedStatement st = prepare(c, sql, args); ResultSet rs = st.executeQuery()) {
            rs.next();
            return null;
        }
    }

    /** A renewal (or proclaim) refused because the key no longer holds the name. */
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

    // ------------------------------------------------------ the statements

    private static final String IV = "make_interval(secs => ?)";

    static String renew(Dialect d) {
        return d == Dialect.POSTGRES ? "SELECT dlock_renew(?, " + IV + ", ?)" : "SELECT dlock_renew(?, ?, ?)";
    }

    static final String RELEASE = "SELECT dlock_release(?, ?)";
    static final String RELEASE_ALL = "SELECT dlock_release_all(?)";
    static final String PROCLAIM = "SELECT dlock_proclaim(?, ?, ?)";
    static final String AVAILABLE = "SELECT dlock_semaphore_available(?)";

    static String acquire(Dialect d) {
        return d == Dialect.POSTGRES
            ? "SELECT dlock_acquire(?, mode => ?, timeout => " + IV + ", ttl => " + IV
              + ", owner => ?, keep_place => true)"
            : "SELECT dlock_acquire(?, ?, ?, ?, ?, 1)";
    }

    static String tryAcquire(Dialect d) {
        return d == Dialect.POSTGRES
            ? "SELECT dlock_try_acquire(?, mode => ?, ttl => " + IV + ", owner => ?)"
            : "SELECT dlock_try_acquire(?, ?, ?, ?)";
    }

    static String semaphore(Dialect d) {
        return d == Dialect.POSTGRES
            ? "SELECT dlock_semaphore(?, ?, ?, timeout => " + IV + ", ttl => " + IV
              + ", owner => ?, keep_place => true)"
            : "SELECT dlock_semaphore(?, ?, ?, ?, ?, ?, 1)";
    }

    static String trySemaphore(Dialect d) {
        return d == Dialect.POSTGRES
            ? "SELECT dlock_try_semaphore(?, ?, ?, ttl => " + IV + ", owner => ?)"
            : "SELECT dlock_try_semaphore(?, ?, ?, ?, ?)";
    }

    static String campaign(Dialect d) {
        return d == Dialect.POSTGRES
            ? "SELECT dlock_campaign(?, ?, timeout => " + IV + ", ttl => " + IV
              + ", owner => ?, keep_place => true)"
            : "SELECT dlock_campaign(?, ?, ?, ?, ?, 1)";
    }

    /** The leader's value and term (its token); no row without a leader. */
    static String leader(Dialect d) {
        return d == Dialect.POSTGRES
            ? "SELECT value, token FROM dlock_leader(?)"
            : "SELECT JSON_VALUE(i, '$.value'), JSON_VALUE(i, '$.term') "
              + "FROM (SELECT dlock_leader_info(?) AS i) x WHERE i IS NOT NULL";
    }
}
