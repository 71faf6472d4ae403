// SPDX-License-Identifier: PostgreSQL
package dlock;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/** One process of the exclusion check: fencing-checked critical sections. */
public final class Worker {
    private Worker() {
    }

    public static void main(String[] args) throws Exception {
        String db = args[0];
        String name = args[1];
        int rounds = Integer.parseInt(args[2]);
        Path store = Path.of(args[3]);
        Path inside = Path.of(args[3] + ".inside");
        int bad = 0;
        for (int i = 0; i < rounds; i++) {
            DLock l = new DLock(DLockTest.dataSource(db), name, Duration.ofSeconds(10));
            if (!l.tryLock(60, TimeUnit.SECONDS)) {
                System.out.println("not granted in 60 s");
                System.exit(2);
            }
            try (l) {
                try {
                    Files.createDirectory(inside); // fails if another holder is inside
                } catch (FileAlreadyExistsException e) {
                    bad++;
                    System.out.println("overlap: token " + l.token());
                    continue;
                }
                bad += fence(store, l.token());
                Thread.sleep(3);
                Files.delete(inside);
            }
        }
        System.out.println("violations " + bad);
        System.exit(bad == 0 ? 0 : 1);
    }

    /** Appends the token; 1 if it is not above the last one written. */
    private static int fence(Path store, long token) throws IOException {
        try (RandomAccessFile f = new RandomAccessFile(store.toFile(), "rw");
             FileLock lock = f.getChannel().lock()) {
            byte[] all = new byte[(int) f.length()];
            f.readFully(all);
            String[] lines = new String(all, StandardCharsets.US_ASCII).trim().split("\n");
            long last = lines[0].isEmpty() ? 0 : Long.parseLong(lines[lines.length - 1].trim());
            f.seek(f.length());
            f.write((token + "\n").getBytes(StandardCharsets.US_ASCII));
            if (token <= last) {
                System.out.println("fencing: token " + token + " after " + last);
                return 1;
            }
            return 0;
        }
    }
}
