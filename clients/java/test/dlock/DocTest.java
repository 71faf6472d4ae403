// SPDX-License-Identifier: PostgreSQL
package dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** docs/clients.md's Java snippet, compiled against the jar and run as it is written. */
class DocTest {
    static String snippet() throws Exception {
        String md = Files.readString(Path.of(System.getenv("DLOCK_ROOT"), "docs", "clients.md"));
        Matcher m = Pattern.compile("<!-- java-use:[^>]*-->\\s*```java\\n(.*?)```\\s*<!-- /java-use -->",
            Pattern.DOTALL).matcher(md);
        assertTrue(m.find(), "docs/clients.md has the java-use block");
        return m.group(1);
    }

    @ParameterizedTest(name = "{0}: the docs' snippet compiles against the jar and runs")
    @ValueSource(strings = {"postgresql", "mariadb"})
    void snippetRuns(String db, @org.junit.jupiter.api.io.TempDir Path tmp) throws Exception {
        String src = "import dlock.*;\nimport java.time.Duration;\nimport java.util.concurrent.TimeUnit;\n"
            + "import javax.sql.DataSource;\n"
            + "public class Snippet {\n    public static void run(DataSource dataSource) throws Exception {\n"
            + snippet() + "    }\n}\n";
        Path file = tmp.resolve("Snippet.java");
        Files.writeString(file, src);
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        // against the jar alone: the snippet needs nothing else
        int rc = javac.run(null, err, err, "-Xlint:all", "-Werror", "-cp", System.getenv("DLOCK_TEST_JAR"),
            "-d", tmp.toString(), file.toString());
        assertEquals(0, rc, "the snippet compiles:\n" + src + "\n" + err);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream was = System.out;
        try (URLClassLoader cl = new URLClassLoader(new URL[] {tmp.toUri().toURL()}, DocTest.class.getClassLoader())) {
            Method run = cl.loadClass("Snippet").getMethod("run", DataSource.class);
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            run.invoke(null, DLockTest.dataSource(db));
        } finally {
            System.setOut(was);
        }
        String printed = out.toString(StandardCharsets.UTF_8);
        was.print(printed);
        assertTrue(printed.matches("(?s).*orders/42 token [1-9][0-9]*\n.*"), printed);
        assertTrue(printed.contains("jobs free: 3\n"), printed);
        for (String n : List.of("orders/42", "jobs", "scheduler")) {
            assertEquals(List.of(), DLockTest.rows(db, n), n + " left nothing");
        }
    }
}
