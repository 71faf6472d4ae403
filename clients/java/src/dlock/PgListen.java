// SPDX-License-Identifier: PostgreSQL
package dlock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

/**
 * LISTEN dlock_leader through pgjdbc. A class of its own, loaded only on
 * PostgreSQL, so that MariaDB users need not have pgjdbc.
 */
final class PgListen {
    private static final Pattern HOSTS = Pattern.compile("^jdbc:postgresql://([^/?]*)");

    private final Connection c;
    private final PGConnection pg;
    private final String key;

    private PgListen(Connection c, String key) throws SQLException {
        this.c = c;
        this.pg = c.unwrap(PGConnection.class);
        this.key = key;
    }

    /**
     * LISTEN on {@code c} (autocommit, kept by the caller for as long as it
     * listens) for the election {@code name}; null when the connection goes
     * through a proxy (the server's port is none of the URL's ports): a
     * pooler in transaction mode such as pgbouncer would hand the session,
     * and the notifications, to other clients — polling alone is right there.
     */
    static PgListen open(Connection c, String name, Boolean force) throws SQLException {
        if (force == null && !direct(c)) {
            return null;
        }
        c.setAutoCommit(true);
        String key;
        try (PreparedStatement st = c.prepareStatement("SELECT dlock_notify_key(?)")) {
            st.setString(1, name);
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                key = rs.getString(1);
            }
        }
        try (Statement st = c.createStatement()) {
            st.execute("LISTEN dlock_leader");
        }
        return new PgListen(c, key);
    }

    /** Whether the server's port is one of the connection URL's (no proxy between). */
    private static boolean direct(Connection c) throws SQLException {
        Integer port;
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT inet_server_port()")) {
            rs.next();
            int p = rs.getInt(1);
            port = rs.wasNull() ? null : p;
        }
        if (port == null) {
            return false; // a unix socket on the server's side: a proxy's connection
        }
        Matcher m = HOSTS.matcher(c.getMetaData().getURL());
        if (!m.find()) {
            return false;
        }
        for (String host : m.group(1).split(",")) {
            int colon = host.lastIndexOf(':');
            int p = 5432;
            if (colon >= 0 && !host.endsWith("]")) {
                try {
                    p = Integer.parseInt(host.substring(colon + 1));
                } catch (NumberFormatException e) {
                    continue;
                }
            }
            if (p == port) {
                return true;
            }
        }
        return false;
    }

    /** Waits up to {@code millis} for notifications; whether one named this election. */
    boolean await(int millis) throws SQLException {
        PGNotification[] ns = pg.getNotifications(Math.max(1, millis));
        if (ns == null) {
            return false;
        }
        for (PGNotification n : ns) {
            if ("dlock_leader".equals(n.getName()) && key.equals(n.getParameter())) {
                return true;
            }
        }
        return false;
    }

    Connection connection() {
        return c;
    }
}
