// SPDX-License-Identifier: PostgreSQL
package dlock;

import java.sql.SQLException;

/**
 * A server error of a dlock call (unchecked, as {@link java.util.concurrent.locks.Lock}
 * allows no checked ones). The message names the lock and, where the fix is
 * known, ends with a hint; the {@link SQLException} is the cause. The first
 * error of a call is the one reported: an error of the clean-up after it
 * (withdrawing a request) is added as suppressed.
 */
public class DLockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String lockName;

    public DLockException(String message, Throwable cause) {
        this(null, message, cause);
    }

    /** An error of a call on the lock, semaphore or election {@code lockName}. */
    public DLockException(String lockName, String message, Throwable cause) {
        super(message, cause);
        this.lockName = lockName;
    }

    /** "dlock: acquire "orders/42": the server's message (hint: …)". */
    static DLockException of(String what, String lockName, SQLException e) {
        String h = hint(e);
        return new DLockException(lockName, "dlock: " + what + " \"" + lockName + "\": " + e.getMessage()
            + (h == null ? "" : " (hint: " + h + ")"), e);
    }

    /** The name of the lock, semaphore or election the call was about, or null. */
    public String lockName() {
        return lockName;
    }

    /** The SQLSTATE of the server's error (PostgreSQL: e.g. 22023; MariaDB: HY000), or null. */
    public String getSQLState() {
        return getCause() instanceof SQLException ? ((SQLException) getCause()).getSQLState() : null;
    }

    /** The fix, for the errors whose fix is known. */
    static String hint(SQLException e) {
        String state = e.getSQLState();
        int code = e.getErrorCode();
        String m = e.getMessage() == null ? "" : e.getMessage();
        // PostgreSQL
        if ("42883".equals(state) && m.contains("dlock_")) {
            return "the dlock extension is not installed in this database: connect to the database "
                + "named by dlock.database (SHOW dlock.database), where CREATE EXTENSION dlock was run";
        }
        if ("42501".equals(state) && m.contains("permission denied for function")) {
            return "grant the role dlock_user to this user: GRANT dlock_user TO <user>";
        }
        if ("42501".equals(state) && m.contains("permission denied for lock")) {
            return "the name is outside the prefixes granted to this role: an administrator grants "
                + "them with dlock_grant(prefix, role)";
        }
        // MariaDB
        if (code == 1370 && m.contains("dlock_user")) {
            return "grant the role dlock_user to this account: GRANT dlock_user TO <account>; "
                + "SET DEFAULT ROLE dlock_user FOR <account>";
        }
        if (code == 1370 && m.contains("[42501]")) {
            return "the name is outside the prefixes granted to this account: an administrator grants "
                + "them with dlock_grant(prefix, account)";
        }
        if (code == 1305 && m.toLowerCase().contains("dlock_") || code == 1046) {
            // 1046 "No database selected": how an unknown function is reported without one
            return "the dlock plugin's functions are not installed on this server: "
                + "scripts/mysql_install.sh (docs/mariadb.md)";
        }
        return null;
    }
}
