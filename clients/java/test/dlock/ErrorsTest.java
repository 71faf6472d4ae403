// SPDX-License-Identifier: PostgreSQL
package dlock;

import static dlock.DLockTest.dataSource;
import static dlock.DLockTest.name;
import static dlock.DLockTest.pg;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.mariadb.jdbc.MariaDbDataSource;
import org.postgresql.ds.PGSimpleDataSource;

/** Errors name the lock, hint at the fix, and report the first error, not the clean-up's. */
class ErrorsTest {
    static void admin(String db, String sql) throws SQLException {
        try (Connection c = dataSource(db).getConnection(); Statement st = c.createStatement()) {
            st.execute(sql);
        }
    }

    /** A user that may connect but is not granted dlock_user. */
    static DataSource noPrivileges(String db) throws SQLException {
        if (db.equals("postgresql")) {
            admin(db, "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dlock_java_nopriv') "
                + "THEN CREATE ROLE dlock_java_nopriv LOGIN; END IF; END $$");
            PGSimpleDataSource d = pg(Integer.parseInt(System.getenv("DLOCK_TEST_PG_PORT")));
            d.setUser("dlock_java_nopriv");
            return d;
        }
        admin(db, "CREATE USER IF NOT EXISTS 'dlock_java_nopriv'@'127.0.0.1' IDENTIFIED BY 'nopriv'");
        return new MariaDbDataSource("jdbc:mariadb://127.0.0.1:" + System.getenv("DLOCK_TEST_MY_PORT")
            + "/?user=dlock_java_nopriv&password=nopriv");
    }

    @ParameterizedTest(name = "{0}: no dlock_user: the acquire's error, named, with the grant as hint; the clean-up's suppressed")
    @ValueSource(strings = {"postgresql", "mariadb"})
    void permissionDenied(String db) throws Exception {
        String n = name(db, "nopriv");
        DataSource ds = noPrivileges(db);
        DLockException e = assertThrows(DLockException.class, () -> new DLock(ds, n, Duration.ofSeconds(5)).lock());
        String m = e.getMessage();
        assertTrue(m.contains("\"" + n + "\""), m);
        assertEquals(n, e.lockName());
        assertTrue(m.contains("dlock_acquire"), "the first error, the acquire's: " + m);
        assertFalse(m.contains("dlock_release_all"), "not the clean-up's: " + m);
        assertTrue(m.contains("hint: grant the role dlock_user"), m);
        assertEquals(1, e.getSuppressed().length, "the clean-up's error kept as suppressed");
        assertTrue(e.getSuppressed()[0].getMessage().contains("dlock_release_all"), e.getSuppressed()[0].getMessage());

        DLockException s = assertThrows(DLockException.class,
            () -> new Semaphore(ds, n + "/sem", 2).acquire());
        assertTrue(s.getMessage().contains("\"" + n + "/sem\"") && s.getMessage().contains("dlock_user"), s.getMessage());
        DLockException l = assertThrows(DLockException.class, () -> new Election(ds, n + "/elect").leader());
        assertTrue(l.getMessage().contains("\"" + n + "/elect\"") && l.getMessage().contains("dlock_user"), l.getMessage());
    }

    @Test
    void extensionNotInThisDatabase() throws Exception {
        try (Connection c = dataSource("postgresql").getConnection(); Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT 1 FROM pg_database WHERE datname = 'dlock_java_other'")) {
            if (!rs.next()) {
                st.execute("CREATE DATABASE dlock_java_other");
            }
        }
        PGSimpleDataSource d = pg(Integer.parseInt(System.getenv("DLOCK_TEST_PG_PORT")));
        d.setDatabaseName("dlock_java_other");
        String n = "java/postgresql/otherdb";
        DLockException e = assertThrows(DLockException.class, () -> new DLock(d, n).lock());
        String m = e.getMessage();
        assertTrue(m.contains("\"" + n + "\""), m);
        assertTrue(m.contains("dlock_acquire"), "the first error: " + m);
        assertTrue(m.contains("not installed in this database") && m.contains("dlock.database"), m);
        assertEquals("42883", e.getSQLState());
    }
}
