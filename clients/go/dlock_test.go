// SPDX-License-Identifier: PostgreSQL
package dlock

// Tests against real servers (clients/testenv.sh, started by test.sh):
// PostgreSQL through pgx and lib/pq, pgbouncer in transaction mode, MariaDB.

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v4/stdlib"
	"github.com/lib/pq"
)

type backend struct {
	name   string // pgx, pq, mariadb
	driver string
	dsn    string
}

func mustEnv(t testing.TB, k string) string {
	v := os.Getenv(k)
	if v == "" {
		t.Fatalf("%s not set: run clients/go/test.sh", k)
	}
	return v
}

// pgKV quotes a value for a key=value connection string.
func pgKV(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

func backends(t testing.TB) map[string]backend {
	pgHost, pgPort := mustEnv(t, "DLOCK_TEST_PG_HOST"), mustEnv(t, "DLOCK_TEST_PG_PORT")
	sock := mustEnv(t, "DLOCK_TEST_MY_SOCKET")
	pg := fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable", pgKV(pgHost), pgPort)
	return map[string]backend{
		"pgx":     {"pgx", "pgx", pg},
		"pq":      {"pq", "postgres", pg},
		"mariadb": {"mariadb", "mysql", "root@unix(" + sock + ")/"},
	}
}

func (b backend) open(t testing.TB) *sql.DB {
	db, err := sql.Open(b.driver, b.dsn)
	if err != nil {
		t.Fatalf("open %s: %v", b.name, err)
	}
	db.SetMaxOpenConns(20)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping %s: %v", b.name, err)
	}
	return db
}

func (b backend) ph(i int) string {
	if b.driver == "mysql" {
		return "?"
	}
	return "$" + strconv.Itoa(i)
}

// rows of dlock.locks for name (holders and waiters, kept places too)
func (b backend) rows(t testing.TB, db *sql.DB, name string) int {
	var n int
	q := "SELECT count(*) FROM dlock.locks WHERE name = " + b.ph(1)
	if err := db.QueryRow(q, name).Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

// granted rows of dlock.locks for name held under key
func (b backend) heldBy(t testing.TB, db *sql.DB, name, key string) int {
	var n int
	q := "SELECT count(*) FROM dlock.locks WHERE name = " + b.ph(1) + " AND owner = " + b.ph(2) + " AND granted"
	if b.driver == "mysql" {
		q = "SELECT COUNT(*) FROM dlock.locks WHERE name = ? AND owner = ? AND granted = 1"
	}
	if err := db.QueryRow(q, name, key).Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

// adminRelease: what an administrator does with the holder's key, from
// another connection.
func (b backend) adminRelease(t testing.TB, db *sql.DB, name, key string) {
	var s string
	q := "SELECT CAST(dlock_release(" + b.ph(1) + ", " + b.ph(2) + ") AS text)"
	if b.driver == "mysql" {
		q = "SELECT CAST(dlock_release(?, ?) AS CHAR)"
	}
	if err := db.QueryRow(q, name, key).Scan(&s); err != nil {
		t.Fatalf("admin release: %v", err)
	}
	if s != "true" && s != "1" {
		t.Fatalf("admin release of %s returned %s, want true", name, s)
	}
}

var uniq int64

func lockName(t *testing.T) string {
	return fmt.Sprintf("go-test/%s/%d/%d", t.Name(), os.Getpid(), atomic.AddInt64(&uniq, 1))
}

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestMain(m *testing.M) {
	if os.Getenv("DLOCK_GO_WORKER") != "" {
		os.Exit(worker())
	}
	os.Exit(m.Run())
}

func runSuite(t *testing.T, which string) {
	b := backends(t)[which]
	db := b.open(t)
	defer db.Close()
	admin := b.open(t)
	defer admin.Close()
	admin.SetMaxOpenConns(2)

	if d, err := detect(db); err != nil || (d == mariadb) != (which == "mariadb") {
		t.Fatalf("detect %s: %v %v", which, d, err)
	}

	t.Run("token_increasing", func(t *testing.T) { testTokens(t, b, db, admin) })
	t.Run("exclusion_processes", func(t *testing.T) { testProcesses(t, b, admin) })
	t.Run("lease_loss", func(t *testing.T) { testLoss(t, b, db, admin) })
	t.Run("cancel_and_release", func(t *testing.T) { testCancel(t, b, db, admin) })
	t.Run("no_foreign_release", func(t *testing.T) { testForeign(t, b, db, admin) })
	t.Run("local_deadline_loss", func(t *testing.T) { testDeadline(t, b, admin) })
	t.Run("concurrent_release", func(t *testing.T) { testConcurrentRelease(t, b, db, admin) })
	t.Run("semaphore_permits", func(t *testing.T) { testSemaphore(t, b, db, admin) })
	t.Run("semaphore_lost", func(t *testing.T) { testSemaphoreLost(t, b, db, admin) })
	t.Run("election", func(t *testing.T) { testElection(t, b, db, admin, wantObserve[which]) })
	t.Run("election_lost", func(t *testing.T) { testElectionLost(t, b, db, admin) })
	if which == "pq" {
		// lib/pq listens only through a pq.Listener of its own
		t.Run("election_pq_listener", func(t *testing.T) {
			l := pq.NewListener(b.dsn, 100*time.Millisecond, time.Second, nil)
			defer l.Close()
			testElection(t, b, db, admin, "listen", PQListener(l))
		})
	}
	t.Run("errors_name_the_lock", func(t *testing.T) { testErrors(t, b, db) })
	t.Run("error_hints", func(t *testing.T) { testHints(t, b, admin) })
}

// how Observe must observe on each backend
var wantObserve = map[string]string{"pgx": "listen", "pq": "poll", "mariadb": "poll", "pgx-bouncer": "poll"}

func TestPgx(t *testing.T)     { runSuite(t, "pgx") }
func TestPq(t *testing.T)      { runSuite(t, "pq") }
func TestMariaDB(t *testing.T) { runSuite(t, "mariadb") }

// 1. tokens are returned and strictly increasing across acquisitions
func testTokens(t *testing.T, b backend, db, admin *sql.DB) {
	ctx := bg(t)
	name := lockName(t)
	var last int64
	for i := 0; i < 5; i++ {
		l, err := Acquire(ctx, db, name, TTL(10*time.Second), Timeout(5*time.Second))
		if err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
		if l.Token() <= last {
			t.Fatalf("token %d not above previous %d", l.Token(), last)
		}
		last = l.Token()
		if len(l.OwnerKey()) != 32 {
			t.Fatalf("default owner key %q is not 32 hex digits", l.OwnerKey())
		}
		if n := b.heldBy(t, admin, name, l.OwnerKey()); n != 1 {
			t.Fatalf("view shows %d grants of the key, want 1", n)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("second release (idempotent): %v", err)
		}
		if l.Ctx().Err() == nil {
			t.Fatalf("Ctx not cancelled after Release")
		}
		if n := b.rows(t, admin, name); n != 0 {
			t.Fatalf("%d rows left after release", n)
		}
	}
	// try once: granted when free, ErrTimeout when held, nothing left behind
	l, err := Acquire(ctx, db, name, Timeout(0), Mode("shared"))
	if err != nil || l.Token() <= last {
		t.Fatalf("try acquire: %v (token %v, last %d)", err, l, last)
	}
	if _, err := Acquire(ctx, db, name, Timeout(0)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("exclusive try while shared held: %v, want ErrTimeout", err)
	}
	l2, err := Acquire(ctx, db, name, Timeout(0), Mode("PR"))
	if err != nil {
		t.Fatalf("second shared: %v", err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.rows(t, admin, name); n != 0 {
		t.Fatalf("%d rows left", n)
	}
	if _, err := Acquire(ctx, db, name, Mode("bogus")); err == nil {
		t.Fatalf("unknown mode accepted")
	}
}

// 2. exclusion among 4 OS processes, 20 acquisitions each, fencing checked
func testProcesses(t *testing.T, b backend, admin *sql.DB) {
	name := lockName(t)
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const procs, iters = 4, 20
	var cmds []*exec.Cmd
	for i := 0; i < procs; i++ {
		c := exec.Command(exe, "-test.run=^$")
		c.Env = append(os.Environ(),
			"DLOCK_GO_WORKER="+b.name,
			"DLOCK_GO_WORKER_NAME="+name,
			"DLOCK_GO_WORKER_DIR="+dir,
			"DLOCK_GO_WORKER_OUT="+filepath.Join(dir, fmt.Sprintf("out.%d", i)),
			"DLOCK_GO_WORKER_N="+strconv.Itoa(iters))
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}
	if t.Failed() {
		return
	}
	type rec struct{ token, enter, exit int64 }
	var recs []rec
	for i := 0; i < procs; i++ {
		f, err := os.Open(filepath.Join(dir, fmt.Sprintf("out.%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r rec
			if _, err := fmt.Sscan(sc.Text(), &r.token, &r.enter, &r.exit); err != nil {
				t.Fatalf("bad record %q", sc.Text())
			}
			recs = append(recs, r)
		}
		f.Close()
	}
	if len(recs) != procs*iters {
		t.Fatalf("%d records, want %d", len(recs), procs*iters)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].enter < recs[j].enter })
	for i := 1; i < len(recs); i++ {
		if recs[i].enter < recs[i-1].exit {
			t.Errorf("overlap: %+v entered before %+v left", recs[i], recs[i-1])
		}
		if recs[i].token <= recs[i-1].token {
			t.Errorf("token %d not above %d in entry order", recs[i].token, recs[i-1].token)
		}
	}
	if n := b.rows(t, admin, name); n != 0 {
		t.Errorf("%d rows left", n)
	}
}

// worker: one process of testProcesses. Inside the hold: an O_EXCL marker
// (fails if someone else is inside) and a token store that refuses a token
// not above the highest seen.
func worker() int {
	fail := func(f string, a ...interface{}) int {
		fmt.Fprintf(os.Stderr, "worker %d: "+f+"\n", append([]interface{}{os.Getpid()}, a...)...)
		return 1
	}
	b, ok := backends(nil)[os.Getenv("DLOCK_GO_WORKER")]
	if !ok {
		return fail("unknown backend")
	}
	name, dir := os.Getenv("DLOCK_GO_WORKER_NAME"), os.Getenv("DLOCK_GO_WORKER_DIR")
	n, _ := strconv.Atoi(os.Getenv("DLOCK_GO_WORKER_N"))
	out, err := os.Create(os.Getenv("DLOCK_GO_WORKER_OUT"))
	if err != nil {
		return fail("%v", err)
	}
	defer out.Close()
	db, err := sql.Open(b.driver, b.dsn)
	if err != nil {
		return fail("%v", err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	marker, store := filepath.Join(dir, "inside"), filepath.Join(dir, "highest")
	for i := 0; i < n; i++ {
		l, err := Acquire(ctx, db, name, TTL(20*time.Second))
		if err != nil {
			return fail("acquire: %v", err)
		}
		enter := time.Now().UnixNano()
		f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fail("someone else is inside: %v", err)
		}
		f.Close()
		if data, err := os.ReadFile(store); err == nil {
			high, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
			if l.Token() <= high {
				return fail("fencing: token %d not above stored %d", l.Token(), high)
			}
		}
		if err := os.WriteFile(store, []byte(strconv.FormatInt(l.Token(), 10)), 0o644); err != nil {
			return fail("%v", err)
		}
		time.Sleep(2 * time.Millisecond)
		if err := os.Remove(marker); err != nil {
			return fail("%v", err)
		}
		exit := time.Now().UnixNano()
		if err := l.Release(ctx); err != nil {
			return fail("release: %v", err)
		}
		fmt.Fprintf(out, "%d %d %d\n", l.Token(), enter, exit)
	}
	return 0
}

// 3. a lease released by someone else (with the key) is noticed as lost
func testLoss(t *testing.T, b backend, db, admin *sql.DB) {
	ctx := bg(t)
	name := lockName(t)
	var calls int32
	const ttl = 3 * time.Second
	l, err := Acquire(ctx, db, name, TTL(ttl), OnLost(func() { atomic.AddInt32(&calls, 1) }))
	if err != nil {
		t.Fatal(err)
	}
	// it is renewed: still held after more than a ttl
	select {
	case <-l.Lost():
		t.Fatalf("lost while renewed")
	case <-time.After(ttl + 500*time.Millisecond):
	}
	if n := b.heldBy(t, admin, name, l.OwnerKey()); n != 1 {
		t.Fatalf("not held after a ttl: %d", n)
	}
	b.adminRelease(t, admin, name, l.OwnerKey())
	start := time.Now()
	limit := ttl/3 + 2*time.Second
	select {
	case <-l.Lost():
	case <-time.After(limit):
		t.Fatalf("Lost() not closed within %v", limit)
	}
	el := time.Since(start)
	select {
	case <-l.Ctx().Done():
	case <-time.After(100 * time.Millisecond):
		t.Fatalf("Ctx() not cancelled with Lost()")
	}
	t.Logf("loss noticed after %v", el)
	time.Sleep(ttl/3 + 300*time.Millisecond) // room for a wrong second call
	if c := atomic.LoadInt32(&calls); c != 1 {
		t.Fatalf("OnLost called %d times, want 1", c)
	}
	if err := l.Release(ctx); !errors.Is(err, ErrLost) {
		t.Fatalf("Release after loss: %v, want ErrLost", err)
	}
	if err := l.Release(ctx); !errors.Is(err, ErrLost) {
		t.Fatalf("second Release after loss: %v, want ErrLost", err)
	}
	if c := atomic.LoadInt32(&calls); c != 1 {
		t.Fatalf("OnLost called %d times, want 1", c)
	}
}

// 4. a cancelled wait leaves nothing behind; a cancelled caller still releases
func testCancel(t *testing.T, b backend, db, admin *sql.DB) {
	ctx := bg(t)
	name := lockName(t)
	holder, err := Acquire(ctx, db, name, TTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// a waiter cancelled after a few calls (its place kept between them)
	wctx, cancel := context.WithCancel(ctx)
	key, _ := NewOwnerKey()
	type res struct {
		l   *Lock
		err error
	}
	ch := make(chan res, 1)
	go func() {
		l, err := Acquire(wctx, db, name, TTL(20*time.Second), Owner(key))
		ch <- res{l, err}
	}()
	time.Sleep(1200 * time.Millisecond)
	if n := b.rows(t, admin, name); n != 2 {
		t.Fatalf("view shows %d rows while one waits behind a holder, want 2", n)
	}
	cancel()
	start := time.Now()
	var r res
	select {
	case r = <-ch:
	case <-time.After(3 * time.Second):
		t.Fatalf("Acquire did not return within 3 s of the cancel")
	}
	t.Logf("cancelled acquire returned after %v", time.Since(start))
	if !errors.Is(r.err, context.Canceled) || r.l != nil {
		t.Fatalf("cancelled acquire: %v, %v; want context.Canceled", r.l, r.err)
	}
	if n := b.rows(t, admin, name); n != 1 {
		t.Fatalf("view shows %d rows after the cancelled wait, want 1 (the holder)", n)
	}
	if n := b.heldBy(t, admin, name, holder.OwnerKey()); n != 1 {
		t.Fatalf("holder lost its grant")
	}

	// a deadline and a Timeout: the same
	dctx, dcancel := context.WithTimeout(ctx, 700*time.Millisecond)
	_, err = Acquire(dctx, db, name)
	dcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire past ctx deadline: %v", err)
	}
	start = time.Now()
	_, err = Acquire(ctx, db, name, Timeout(1300*time.Millisecond))
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("acquire with Timeout: %v, want ErrTimeout", err)
	}
	if el := time.Since(start); el < 1200*time.Millisecond || el > 4*time.Second {
		t.Fatalf("Timeout(1.3 s) returned after %v", el)
	}
	if n := b.rows(t, admin, name); n != 1 {
		t.Fatalf("view shows %d rows after timeouts, want 1", n)
	}

	// the holder's caller ctx is cancelled: Release still releases
	hctx, hcancel := context.WithCancel(ctx)
	hcancel()
	if err := holder.Release(hctx); err != nil {
		t.Fatalf("Release with a cancelled ctx: %v", err)
	}
	if n := b.rows(t, admin, name); n != 0 {
		t.Fatalf("view shows %d rows after Release(cancelled ctx), want 0", n)
	}
	// and the lock is free again at once
	l, err := Acquire(ctx, db, name, Timeout(0))
	if err != nil {
		t.Fatalf("not free after release: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// 5. after a loss, Release never frees the next holder's lock
func testForeign(t *testing.T, b backend, db, admin *sql.DB) {
	ctx := bg(t)
	name := lockName(t)
	a, err := Acquire(ctx, db, name, TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b.adminRelease(t, admin, name, a.OwnerKey())
	bl, err := Acquire(ctx, db, name, TTL(10*time.Second), Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("B acquire: %v", err)
	}
	if bl.Token() <= a.Token() {
		t.Fatalf("B's token %d not above A's %d", bl.Token(), a.Token())
	}
	if err := a.Release(ctx); !errors.Is(err, ErrLost) {
		t.Fatalf("A.Release: %v, want ErrLost", err)
	}
	select {
	case <-a.Lost():
	default:
		t.Fatalf("A.Lost() not closed after Release found the lease gone")
	}
	if n := b.heldBy(t, admin, name, bl.OwnerKey()); n != 1 {
		t.Fatalf("B no longer holds after A.Release")
	}
	if n := b.rows(t, admin, name); n != 1 {
		t.Fatalf("view shows %d rows, want 1 (B)", n)
	}
	select {
	case <-bl.Lost():
		t.Fatalf("B lost")
	default:
	}
	if err := bl.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// 6. through pgbouncer (transaction mode, 2 server connections): 8
// goroutines × 2 grants of one name, waits do not pin the server connections
func TestPgBouncer(t *testing.T) {
	host, port := mustEnv(t, "DLOCK_TEST_BOUNCER_HOST"), mustEnv(t, "DLOCK_TEST_BOUNCER_PORT")
	b := backend{"pgx-bouncer", "pgx", fmt.Sprintf(
		"host=%s port=%s user=postgres dbname=postgres sslmode=disable prefer_simple_protocol=true statement_cache_capacity=0",
		pgKV(host), port)}
	db := b.open(t)
	defer db.Close()
	db.SetMaxOpenConns(16)
	name := lockName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const workers, rounds = 8, 2
	var inside, grants int32
	var mu sync.Mutex
	var last int64
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				l, err := Acquire(ctx, db, name, TTL(30*time.Second))
				if err != nil {
					errs <- fmt.Errorf("acquire: %w", err)
					return
				}
				if atomic.AddInt32(&inside, 1) != 1 {
					errs <- errors.New("two holders at once")
				}
				mu.Lock()
				if l.Token() <= last {
					errs <- fmt.Errorf("token %d not above %d", l.Token(), last)
				}
				last = l.Token()
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
				atomic.AddInt32(&inside, -1)
				atomic.AddInt32(&grants, 1)
				if err := l.Release(ctx); err != nil {
					errs <- fmt.Errorf("release: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	el := time.Since(start)
	t.Logf("%d grants through pgbouncer in %v", atomic.LoadInt32(&grants), el)
	if g := atomic.LoadInt32(&grants); g != workers*rounds {
		t.Fatalf("%d grants, want %d", g, workers*rounds)
	}
	if el > 60*time.Second {
		t.Fatalf("took %v", el)
	}
	direct := backends(t)["pq"].open(t)
	defer direct.Close()
	if n := b.rows(t, direct, name); n != 0 {
		t.Fatalf("%d rows left", n)
	}
}

// no successful renewal before the local deadline (here: the lock's pool is
// closed, every renewal fails): lost before the server's lease runs out
func testDeadline(t *testing.T, b backend, admin *sql.DB) {
	ctx := bg(t)
	name := lockName(t)
	own := b.open(t)
	const ttl = 3 * time.Second
	var calls int32
	start := time.Now()
	l, err := Acquire(ctx, own, name, TTL(ttl), OnLost(func() { atomic.AddInt32(&calls, 1) }))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl/3 + 300*time.Millisecond) // one renewal made
	own.Close()
	closed := time.Now()
	select {
	case <-l.Lost():
	case <-time.After(ttl + time.Second):
		t.Fatalf("not lost within ttl + 1 s of the last possible renewal")
	}
	el, since := time.Since(closed), time.Since(start)
	// lost at the local deadline, which lies before the server's lease end
	held := b.heldBy(t, admin, name, l.OwnerKey())
	t.Logf("lost %v after the pool closed (%v after acquire); server still shows the hold: %d",
		el, since, held)
	if since < ttl-margin(ttl) {
		t.Fatalf("lost %v after acquire: before the local deadline (ttl - margin)", since)
	}
	if held != 1 {
		t.Fatalf("lost locally only after the server's lease ended (view: %d)", held)
	}
	if l.Ctx().Err() == nil {
		t.Fatalf("Ctx not cancelled")
	}
	time.Sleep(200 * time.Millisecond)
	if c := atomic.LoadInt32(&calls); c != 1 {
		t.Fatalf("OnLost called %d times", c)
	}
	if err := l.Release(ctx); !errors.Is(err, ErrLost) {
		t.Fatalf("Release after loss: %v", err)
	}
	// the lease runs out on the server by itself
	for i := 0; b.rows(t, admin, name) != 0; i++ {
		if i > 100 {
			t.Fatalf("lease never ran out on the server")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Release from several goroutines at once: one release on the server, nil for all
func testConcurrentRelease(t *testing.T, b backend, db, admin *sql.DB) {
	ctx := bg(t)
	name := lockName(t)
	key, _ := NewOwnerKey()
	l, err := Acquire(ctx, db, name, Owner(key))
	if err != nil {
		t.Fatal(err)
	}
	if l.OwnerKey() != key {
		t.Fatalf("Owner option ignored")
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func(i int) { defer wg.Done(); errs[i] = l.Release(ctx) }(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Release %d: %v", i, err)
		}
	}
	if n := b.rows(t, admin, name); n != 0 {
		t.Fatalf("%d rows left", n)
	}
}
