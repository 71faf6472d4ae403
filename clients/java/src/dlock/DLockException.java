// SPDX-License-Identifier: PostgreSQL
package dlock;

import java.sql.SQLException;

/** A server error of a dlock call (unchecked, as {@link java.util.concurrent.locks.Lock} allows no checked ones). */
public class DLockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public DLockException(String message, Throwable cause) {
        super(message, cause);
    }

    /** The SQLSTATE of the server's error (PostgreSQL: e.g. 22023; MariaDB: HY000), or null. */
    public String getSQLState() {
        return getCause() instanceof SQLException ? ((SQLException) getCause()).getSQLState() : null;
    }
}
