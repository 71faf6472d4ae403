// SPDX-License-Identifier: PostgreSQL
package dlock

// Semaphores, elections, errors and the version, against real servers
// (clients/go/test.sh starts them).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// forceRelease: dlock_force_release(name, key, reason) as an administrator.
func (b backend) forceRelease(t testing.TB, db *sql.DB, name, key string) {
	var n int64
	q := "SELECT dlock_force_release($1, $2, $3)"
	if b.driver == "mysql" {
		q = "SELECT dlock_force_release(?, ?, ?)"
	}
	if err := db.QueryRow(q, name, key, "go client test").Scan(&n); err != nil {
		t.Fatalf("force release: %v", err)
	}
	if n != 1 {
		t.Fatalf("force release of %s released %d holders, want 1", name, n)
	}
}

// waitLost: Lost() closed and Ctx() cancelled within limit.
func waitLost(t *testing.T, l *Lock, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-l.Lost():
	case <-time.After(limit):
		t.Fatalf("Lost() not closed within %v", limit)
	}
	select {
	case <-l.Ctx().Done():
	case <-time.After(100 * time.Millisecond):
		t.Fatalf("Ctx() not cancelled with Lost()")
	}
	return time.Since(start)
}

// exclusion by permits: never more than the capacity held, FIFO, try and
// available
func testSemaphore(t *testing.T, b backend, db, admin *sql.DB) {
	ctx := bg(t)
	name := lockName(t)
	sem, err := NewSemaphore(db, name, 3, TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sem.Available(ctx); err != nil || n != 3 {
		t.Fatalf("Available of an unused semaphore: %d, %v; want 3", n, err)
	}
	two, err := sem.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if two.Permits() != 2 || two.Token() <= 0 {
		t.Fatalf("Permits %d token %d", two.Permits(), two.Token())
	}
	if n, err := sem.Available(ctx); err != nil || n != 1 {
		t.Fatalf("Available with 2 of 3 held: %d, %v; want 1", n, err)
	}
	if _, err := sem.TryAcquire(ctx, 2); !errors.Is(err, ErrTimeout) {
		t.Fatalf("TryAcquire(2) with 1 free: %v, want ErrTimeout", err)
	}
	one, err := sem.TryAcquire(ctx, 1)
	if err != nil {
		t.Fatalf("TryAcquire(1) with 1 free: %v", err)
	}
	if one.Token() <= two.Token() {
		t.Fatalf("token %d not above %d", one.Token(), two.Token())
	}
	start := time.Now()
	_, err = sem.Acquire(ctx, 1, Timeout(700*time.Millisecond))
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), name) {
		t.Fatalf("Acquire with all permits held: %v, want ErrTimeout naming %s", err, name)
	}
	if el := time.Since(start); el < 600*time.Millisecond {
		t.Fatalf("Timeout(0.7 s) gave up after %v", el)
	}
	if n := b.rows(t, admin, name); n != 2 {
		t.Fatalf("view shows %d rows after a timed-out wait, want 2 holders", n)
	}
	// a waiter for 2 is granted when the 2 are given back
	got := make(chan *Lock, 1)
	go func() {
		l, err := sem.Acquire(ctx, 2)
		if err != nil {
			t.Errorf("waiting Acquire(2): %v", err)
		}
		got <- l
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case <-got:
		t.Fatalf("Acquire(2) granted with 2 of 3 held")
	default:
	}
	if err := two.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var w *Lock
	select {
	case w = <-got:
	case <-time.After(3 * time.Second):
		t.Fatalf("Acquire(2) not granted within 3 s of the release")
	}
	if w == nil {
		t.FailNow()
	}
	if n, err := sem.Available(ctx); err != nil || n != 0 {
		t.Fatalf("Available: %d, %v; want 0", n, err)
	}
	for _, l := range []*Lock{w, one} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.rows(t, admin, name); n != 0 {
		t.Fatalf("%d rows left", n)
	}
	// 6 goroutines × 3 rounds of 1 permit of 2: never more than 2 inside
	sem2, err := NewSemaphore(db, lockName(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	var inside, most int32
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				l, err := sem2.Acquire(ctx, 1)
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				n := atomic.AddInt32(&inside, 1)
				for {
					m := atomic.LoadInt32(&most)
					if n <= m || atomic.CompareAndSwapInt32(&most, m, n) {
						break
					}
				}
				time.Sleep(30 * time.Millisecond)
				atomic.AddInt32(&inside, -1)
				if err := l.Release(ctx); err != nil {
					t.Errorf("release: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if most != 2 {
		t.Fatalf("at most %d holders at once, want exactly 2 (capacity)", most)
	}
	// the capacity is the server's: another one is refused while in use
	held, err := sem2.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewSemaphore(db, sem2.Name(), 5)
	if _, err := other.TryAcquire(ctx, 1); err == nil || errors.Is(err, ErrTimeout) {
		t.Fatalf("a semaphore in use with another capacity: %v, want the server's refusal", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := NewSemaphore(db, name, 0); err == nil {
		t.Fatalf("capacity 0 accepted")
	}
	if _, err := sem.Acquire(ctx, 4); err == nil || !strings.Contains(err.Error(), name) {
		t.Fatalf("4 permits of 3: %v", err)
	}
}

// a semaphore's lease is renewed, and a force release is noticed
func testSemaphoreLost(t *testing.T, b backend, db, admin *sql.DB) {
	ctx := bg(t)
	name := lockName(t)
	const ttl = 3 * time.Second
	var calls int32
	sem, err := NewSemaphore(db, name, 2, TTL(ttl), OnLost(func() { atomic.AddInt32(&calls, 1) }))
	if err != nil {
		t.Fatal(err)
	}
	l, err := sem.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
		t.Fatalf("lost while renewed")
	case <-time.After(ttl + 500*time.Millisecond):
	}
	if n := b.heldBy(t, admin, name, l.OwnerKey()); n != 1 {
		t.Fatalf("not held after a ttl: %d", n)
	}
	b.forceRelease(t, admin, name, l.OwnerKey())
	// at the next renewal: the refusal is final, not retried until the
	// local deadline (ttl - margin = 2.7 s)
	el := waitLost(t, l, ttl/3+time.Second)
	t.Logf("force release noticed after %v", el)
	time.Sleep(100 * time.Millisecond)
	if c := atomic.LoadInt32(&calls); c != 1 {
		t.Fatalf("OnLost called %d times", c)
	}
	err = l.Release(ctx)
	var le *LockError
	if !errors.Is(err, ErrLost) || !errors.As(err, &le) || le.Name != name {
		t.Fatalf("Release after loss: %v, want ErrLost naming %s", err, name)
	}
}

// observed: the observer's values as they come
type observed struct {
	mu  sync.Mutex
	got []Leader
}

func observe(ctx context.Context, e *Election) *observed {
	o := &observed{}
	ch := e.Observe(ctx)
	go func() {
		for ld := range ch {
			o.mu.Lock()
			o.got = append(o.got, ld)
			o.mu.Unlock()
		}
	}()
	return o
}

// waitFor: the observer reports want within limit; how long it took
func (o *observed) waitFor(t *testing.T, want Leader, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		o.mu.Lock()
		n := len(o.got)
		last := Leader{Term: -1}
		if n > 0 {
			last = o.got[n-1]
		}
		o.mu.Unlock()
		if last == want {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("Observe did not report %+v within %v (last: %+v)", want, limit, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var modeMu sync.Mutex
var modes_ = map[string]string{}

func init() {
	observeHook = func(name, mode string) {
		modeMu.Lock()
		modes_[name] = mode
		modeMu.Unlock()
	}
}

func observeModeOf(name string) string {
	modeMu.Lock()
	defer modeMu.Unlock()
	return modes_[name]
}

// campaign, observe, proclaim, resign hands over
func testElection(t *testing.T, b backend, db, admin *sql.DB, mode string, opts ...Option) {
	ctx := bg(t)
	name := lockName(t)
	// polling every 20 s: a change seen within 2 s was seen by LISTEN
	poll := 300 * time.Millisecond
	if mode == "listen" {
		poll = 20 * time.Second
	}
	const bound = 2 * time.Second
	ea, err := NewElection(db, name, append([]Option{TTL(10 * time.Second), PollInterval(poll)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ea.Leader(ctx); !errors.Is(err, ErrNoLeader) || !strings.Contains(err.Error(), name) {
		t.Fatalf("Leader without one: %v, want ErrNoLeader naming %s", err, name)
	}
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	obs := observe(octx, ea)
	obs.waitFor(t, Leader{}, bound)
	if m := observeModeOf(name); m != mode {
		t.Fatalf("Observe %ss, want %s", m, mode)
	}
	a, err := ea.Campaign(ctx, "node-a:8080")
	if err != nil {
		t.Fatal(err)
	}
	if a.Token() <= 0 || a.Value() != "node-a:8080" {
		t.Fatalf("leadership: term %d value %q", a.Token(), a.Value())
	}
	el := obs.waitFor(t, Leader{"node-a:8080", a.Token()}, bound)
	t.Logf("observer saw the first leader after %v", el)
	if ld, err := ea.Leader(ctx); err != nil || ld != (Leader{"node-a:8080", a.Token()}) {
		t.Fatalf("Leader: %+v, %v", ld, err)
	}
	// B campaigns and waits behind A
	eb, _ := NewElection(db, name, TTL(10*time.Second))
	bch := make(chan *Leadership, 1)
	go func() {
		l, err := eb.Campaign(ctx, "node-b:8080")
		if err != nil {
			t.Errorf("B campaign: %v", err)
		}
		bch <- l
	}()
	if err := a.Proclaim(ctx, "node-a:9090"); err != nil {
		t.Fatal(err)
	}
	obs.waitFor(t, Leader{"node-a:9090", a.Token()}, bound)
	time.Sleep(300 * time.Millisecond)
	select {
	case <-bch:
		t.Fatalf("B leads while A leads")
	default:
	}
	// a campaign cannot be tried
	if _, err := eb.Campaign(ctx, "x", Timeout(0)); err == nil {
		t.Fatalf("Campaign with Timeout(0) accepted")
	}
	if _, err := eb.Campaign(ctx, "x", Timeout(300*time.Millisecond)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Campaign behind a leader with Timeout: %v, want ErrTimeout", err)
	}
	start := time.Now()
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	var bl *Leadership
	select {
	case bl = <-bch:
	case <-time.After(bound):
		t.Fatalf("B does not lead within %v of A's resignation", bound)
	}
	if bl == nil {
		t.FailNow()
	}
	t.Logf("B leads %v after A resigned", time.Since(start))
	if bl.Token() <= a.Token() {
		t.Fatalf("B's term %d not above A's %d", bl.Token(), a.Token())
	}
	el = obs.waitFor(t, Leader{"node-b:8080", bl.Token()}, bound)
	t.Logf("observer saw the hand-over after %v", el)
	if err := a.Proclaim(ctx, "node-a:1"); !errors.Is(err, ErrLost) {
		t.Fatalf("Proclaim after resigning: %v, want ErrLost", err)
	}
	if err := bl.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	obs.waitFor(t, Leader{}, bound)
	ocancel()
	// the observer's channel is closed when its ctx ends
	ch := ea.Observe(octx)
	select {
	case _, ok := <-ch:
		if ok {
			// a value may be sent before the close is seen: then it closes
			if _, ok := <-ch; ok {
				t.Fatalf("Observe goes on after ctx ended")
			}
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("Observe's channel not closed after ctx ended")
	}
	if n := b.rows(t, admin, name); n != 0 {
		t.Fatalf("%d rows left", n)
	}
}

// a force-released leader notices, and the observer sees nobody lead
func testElectionLost(t *testing.T, b backend, db, admin *sql.DB) {
	ctx := bg(t)
	name := lockName(t)
	const ttl = 3 * time.Second
	e, err := NewElection(db, name, TTL(ttl), PollInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Campaign(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	obs := observe(octx, e)
	obs.waitFor(t, Leader{"v", p.Token()}, 2*time.Second)
	b.forceRelease(t, admin, name, p.OwnerKey())
	waitLost(t, p.Lock, ttl/3+time.Second)
	obs.waitFor(t, Leader{}, 2*time.Second)
	if err := p.Proclaim(ctx, "w"); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), name) {
		t.Fatalf("Proclaim after a force release: %v, want ErrLost naming %s", err, name)
	}
	if err := p.Resign(ctx); !errors.Is(err, ErrLost) {
		t.Fatalf("Resign after loss: %v, want ErrLost", err)
	}
}

// every client error names the lock; a timeout too
func testErrors(t *testing.T, b backend, db *sql.DB) {
	ctx := bg(t)
	name := lockName(t)
	l, err := Acquire(ctx, db, name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	check := func(what string, err error, op string, is error) {
		t.Helper()
		var le *LockError
		if err == nil || !errors.As(err, &le) || le.Name != name || le.Op != op ||
			!strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("%s: %v (%#v), want a *LockError of %s naming %q", what, err, le, op, name)
		}
		if is != nil && !errors.Is(err, is) {
			t.Errorf("%s: %v is not %v", what, err, is)
		}
	}
	_, err = Acquire(ctx, db, name, Timeout(200*time.Millisecond))
	check("timeout", err, "acquire", ErrTimeout)
	_, err = Acquire(ctx, db, name, Timeout(0))
	check("try", err, "acquire", ErrTimeout)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = Acquire(cctx, db, name)
	check("cancelled", err, "acquire", context.Canceled)
	_, err = Acquire(ctx, db, name, Mode("bogus"))
	check("bad mode", err, "acquire", nil)
	_, err = Acquire(ctx, db, name, Mode("shared"), Timeout(time.Second), TTL(-time.Second))
	check("bad ttl", err, "acquire", nil)
	// a server error: a lock's name used as a semaphore
	sem, _ := NewSemaphore(db, name, 2)
	_, err = sem.TryAcquire(ctx, 1)
	check("semaphore on a lock", err, "semaphore", nil)
	_, err = sem.Available(ctx)
	if err != nil {
		check("available", err, "available", nil)
	}
}

// hints where the fix is known: no dlock_user, not the extension's database
func testHints(t *testing.T, b backend, admin *sql.DB) {
	ctx := bg(t)
	name := lockName(t)
	nopriv := backend{b.name, b.driver, ""}
	switch b.driver {
	case "mysql":
		for _, q := range []string{
			"CREATE USER IF NOT EXISTS 'dlock_go_nopriv'@'localhost'",
			"GRANT USAGE ON *.* TO 'dlock_go_nopriv'@'localhost'",
		} {
			if _, err := admin.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		nopriv.dsn = "dlock_go_nopriv@unix(" + mustEnv(t, "DLOCK_TEST_MY_SOCKET") + ")/"
	default:
		if _, err := admin.Exec("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dlock_go_nopriv') THEN CREATE ROLE dlock_go_nopriv LOGIN; END IF; END$$"); err != nil {
			t.Fatal(err)
		}
		nopriv.dsn = strings.Replace(b.dsn, "user=postgres", "user=dlock_go_nopriv", 1)
	}
	ndb := nopriv.open(t)
	defer ndb.Close()
	_, err := Acquire(ctx, ndb, name, Timeout(time.Second))
	var le *LockError
	if !errors.As(err, &le) || le.Name != name || !strings.Contains(le.Hint, "GRANT dlock_user") ||
		!strings.Contains(err.Error(), "GRANT dlock_user") {
		t.Fatalf("acquire without dlock_user: %v, want a hint to grant dlock_user", err)
	}
	t.Logf("%v", err)
	if b.driver == "mysql" {
		return // the plugin's functions are the whole server's
	}
	var exists bool
	if err := admin.QueryRow("SELECT EXISTS (SELECT FROM pg_database WHERE datname = 'dlock_go_other')").Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		if _, err := admin.Exec("CREATE DATABASE dlock_go_other"); err != nil {
			t.Fatal(err)
		}
	}
	other := backend{b.name, b.driver, strings.Replace(b.dsn, "dbname=postgres", "dbname=dlock_go_other", 1)}
	odb := other.open(t)
	defer odb.Close()
	_, err = Acquire(ctx, odb, name, Timeout(time.Second))
	if !errors.As(err, &le) || le.Name != name || !strings.Contains(le.Hint, "dlock.database") {
		t.Fatalf("acquire in a database without the extension: %v, want a hint to dlock.database", err)
	}
	t.Logf("%v", err)
}

// the client's version is the extension's default_version
func TestVersion(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "pg_ext", "dlock.control"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^default_version\s*=\s*'([^']+)'`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("no default_version in dlock.control")
	}
	if Version != string(m[1]) {
		t.Fatalf("Version %q, extension's default_version %q", Version, m[1])
	}
	// and the docs tell users to require that version
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "clients.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "github.com/dlock/dlock/clients/go@v" + Version + ".0"
	if !strings.Contains(string(doc), want) {
		t.Fatalf("docs/clients.md does not require %s", want)
	}
}

// through pgbouncer (transaction mode): Observe polls, a campaign's wait
// and a semaphore's lease work as directly
func TestPgBouncerElection(t *testing.T) {
	host, port := mustEnv(t, "DLOCK_TEST_BOUNCER_HOST"), mustEnv(t, "DLOCK_TEST_BOUNCER_PORT")
	b := backend{"pgx-bouncer", "pgx", fmt.Sprintf(
		"host=%s port=%s user=postgres dbname=postgres sslmode=disable prefer_simple_protocol=true statement_cache_capacity=0",
		pgKV(host), port)}
	db := b.open(t)
	defer db.Close()
	db.SetMaxOpenConns(8)
	admin := backends(t)["pq"].open(t)
	defer admin.Close()
	t.Run("election", func(t *testing.T) { testElection(t, b, db, admin, wantObserve[b.name]) })
	t.Run("election_lost", func(t *testing.T) { testElectionLost(t, b, db, admin) })
	t.Run("semaphore_lost", func(t *testing.T) { testSemaphoreLost(t, b, db, admin) })
}
