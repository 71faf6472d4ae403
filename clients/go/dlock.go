// SPDX-License-Identifier: PostgreSQL

// Package dlock is the Go client of dlock: fair, leased, named distributed
// locks, counting semaphores (NewSemaphore) and leader elections
// (NewElection) in plain SQL, on PostgreSQL (the dlock extension) and
// MariaDB (the dlock plugin), over a *sql.DB pool. Module
// github.com/dlock/dlock/clients/go; every error is a *LockError naming
// the lock.
//
//	l, err := dlock.Acquire(ctx, db, "orders/42", dlock.TTL(30*time.Second))
//	if err != nil { ... }
//	defer l.Release(context.Background())
//	doWork(l.Ctx(), l.Token())
//
// Every lock is owner-keyed (never session-owned): the acquire, the renewals
// and the release may each use another pooled connection, and a release by
// key can only ever free the key's own hold. Waiting is a loop of short
// dlock_acquire calls with keep_place, so a waiter never pins a pooled
// connection and keeps its FIFO place between calls. A goroutine renews the
// lease every ttl/3; when the lease is lost, Lost() is closed, Ctx() is
// cancelled and OnLost is called.
//
// The package imports no database driver: it recognises pgx (stdlib),
// lib/pq and go-sql-driver/mysql by the type of db.Driver(), and their
// errors by their methods and fields.
package dlock

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
)

const (
	defaultTTL    = 30 * time.Second
	maxCall       = 500 * time.Millisecond // longest single waiting call
	cleanupTime   = 5 * time.Second        // budget of a withdrawal / release on a fresh context
	retryPause    = 100 * time.Millisecond // between renewals after a transient error
	minCallWindow = 10 * time.Millisecond  // shortest server-side wait worth a call
	// the pause after a call that returned at once, behind another request:
	// doubling from pauseMin, at most pauseMax (which bounds how long a grant
	// made between two calls waits for its collecting call)
	pauseMin    = 10 * time.Millisecond
	pauseMax    = 100 * time.Millisecond
	defaultPoll = 500 * time.Millisecond // Observe's polling period
)

type dialect int

const (
	postgres dialect = iota + 1
	mariadb
)

// Option configures Acquire.
type Option func(*options) error

type options struct {
	ttl        time.Duration
	timeout    time.Duration
	hasTimeout bool
	mode       string
	modeSet    bool
	onLost     func()
	owner      string
	poll       time.Duration
	pqListener interface{}
}

func parseOptions(op, name string, opts []Option) (options, error) {
	o := options{ttl: defaultTTL, mode: "exclusive", poll: defaultPoll}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, &LockError{Op: op, Name: name, Err: err}
		}
	}
	if name == "" {
		return o, &LockError{Op: op, Name: name, Err: errors.New("empty lock name")}
	}
	return o, nil
}

// TTL sets the lease (default 30 s). The lock is renewed every ttl/3.
func TTL(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("TTL must be positive, got %v", d)
		}
		o.ttl = d
		return nil
	}
}

// Timeout bounds the wait: ErrTimeout when not granted within d. Timeout(0)
// tries once and never waits. Without it Acquire waits until granted or ctx
// is done.
func Timeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("Timeout must not be negative, got %v", d)
		}
		o.timeout, o.hasTimeout = d, true
		return nil
	}
}

var modes = map[string]bool{
	"NL": true, "CR": true, "CW": true, "PR": true, "PW": true, "EX": true,
	"SHARED": true, "EXCLUSIVE": true,
}

// Mode sets the lock mode: one of the six DLM modes NL, CR, CW, PR, PW, EX,
// or "shared" (PR) / "exclusive" (EX, the default); case-insensitive.
func Mode(m string) Option {
	return func(o *options) error {
		if !modes[strings.ToUpper(m)] {
			return fmt.Errorf("unknown mode %q", m)
		}
		o.mode, o.modeSet = m, true
		return nil
	}
}

// OnLost sets a function called once (in its own goroutine) when the lease
// is lost. It is not called after a successful Release.
func OnLost(f func()) Option {
	return func(o *options) error { o.onLost = f; return nil }
}

// Owner sets the owner key (1–255 bytes, no control characters). Default: a
// fresh key of 128 random bits (32 hex digits). The key is what guards
// release: keep it secret and do not share one key between two holds of the
// same name.
func Owner(key string) Option {
	return func(o *options) error {
		if key == "" {
			return errors.New("empty owner key")
		}
		o.owner = key
		return nil
	}
}

// PollInterval sets how often Election.Observe asks for the leader where it
// cannot LISTEN (MariaDB, lib/pq, pgbouncer); default 0.5 s.
func PollInterval(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("PollInterval must be positive, got %v", d)
		}
		o.poll = d
		return nil
	}
}

// PQListener makes Election.Observe wait for notifications through l, a
// *pq.Listener of lib/pq (pq.NewListener(dsn, …) on a direct connection,
// not through pgbouncer): lib/pq delivers notifications only to its
// Listener, which needs the connection string that a *sql.DB does not
// tell. Observe listens on dlock_leader with it and unlistens at the end;
// give each Observe a Listener of its own.
func PQListener(l interface{}) Option {
	return func(o *options) error {
		v := reflect.ValueOf(l)
		if !v.IsValid() || !v.MethodByName("Listen").IsValid() || !v.MethodByName("NotificationChannel").IsValid() {
			return fmt.Errorf("PQListener wants a *pq.Listener, got %T", l)
		}
		o.pqListener = l
		return nil
	}
}

// NewOwnerKey returns a fresh owner key: 128 bits from crypto/rand in hex.
func NewOwnerKey() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("dlock: owner key: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Lock is a held lock (a lease under an owner key).
type Lock struct {
	db    *sql.DB
	d     dialect
	name  string
	owner string
	ttl   time.Duration
	token int64

	permits int // a semaphore's permits held (0 for a lock)

	lost      chan struct{}
	ctx       context.Context
	cancelCtx context.CancelFunc
	onLost    func()

	stop     chan struct{} // closed by Release: the renewer ends
	stopOnce sync.Once
	done     chan struct{} // closed when the renewer has ended

	lostOnce sync.Once
	relMu    sync.Mutex
	mu       sync.Mutex
	isLost   bool
	released bool // released on the server (or the release was not needed)
}

// Token is the fencing token of the grant.
func (l *Lock) Token() int64 { return l.token }

// Permits is the number of a semaphore's permits held (0 for a lock or a
// leadership).
func (l *Lock) Permits() int { return l.permits }

// Name is the lock's name.
func (l *Lock) Name() string { return l.name }

// OwnerKey is the owner key the lock is held under.
func (l *Lock) OwnerKey() string { return l.owner }

// Lost is closed when the lease is lost.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Ctx is derived from context.Background() and cancelled when the lease is
// lost and after Release.
func (l *Lock) Ctx() context.Context { return l.ctx }

func detect(db *sql.DB) (dialect, error) {
	t := reflect.TypeOf(db.Driver())
	for t != nil && t.Kind() == reflect.Ptr {
		t = t.Elem()
	}
	if t == nil {
		return 0, errors.New("no driver")
	}
	p := t.PkgPath()
	switch {
	case p == "github.com/lib/pq",
		strings.HasPrefix(p, "github.com/jackc/pgx/") && strings.HasSuffix(p, "/stdlib"),
		p == "github.com/jackc/pgx/stdlib":
		return postgres, nil
	case p == "github.com/go-sql-driver/mysql":
		return mariadb, nil
	}
	return 0, fmt.Errorf("unsupported driver %s.%s (pgx stdlib, lib/pq or go-sql-driver/mysql)", p, t.Name())
}

// Acquire takes the lock name and returns it held, renewed in the
// background until Release or until the lease is lost.
//
// It waits in FIFO order until granted, ctx is done (ctx's error) or the
// Timeout option passes (ErrTimeout). The wait is a loop of short calls
// (at most 0.5 s each) that keep the request's place in line between them;
// on giving up, the kept place is withdrawn (with a fresh context), so
// nothing is left behind. Cancelling ctx is noticed between calls, that is
// within 0.5 s: the call in flight is left to end by its own short
// server-side timeout instead of being cancelled by the driver, so that the
// withdrawal that follows cannot race with it.
func Acquire(ctx context.Context, db *sql.DB, name string, opts ...Option) (*Lock, error) {
	o, err := parseOptions("acquire", name, opts)
	if err != nil {
		return nil, err
	}
	mode := o.mode
	return grant(ctx, db, name, "acquire", o,
		func(ctx context.Context, l *Lock, wait time.Duration) (sql.NullInt64, error) {
			return l.acquireCall(ctx, mode, wait)
		},
		func(ctx context.Context, l *Lock) (sql.NullInt64, error) {
			return l.tryAcquire(ctx, mode)
		})
}

// waitCall asks for the grant, waiting at most wait on the server and
// keeping the request's place in line afterwards; tryCall asks without
// waiting. Both return the token, NULL when not granted.
type (
	waitCall func(ctx context.Context, l *Lock, wait time.Duration) (sql.NullInt64, error)
	tryCall  func(ctx context.Context, l *Lock) (sql.NullInt64, error)
)

// grant is the wait (or the try) shared by locks, semaphores and campaigns,
// and starts the renewer of the grant; every error names the lock.
func grant(ctx context.Context, db *sql.DB, name, op string, o options, wait waitCall, try tryCall) (*Lock, error) {
	fail := func(err error) (*Lock, error) { return nil, wrapErr(op, name, err) }
	d, err := detect(db)
	if err != nil {
		return fail(err)
	}
	if o.owner == "" {
		if o.owner, err = NewOwnerKey(); err != nil {
			return fail(err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	l := &Lock{db: db, d: d, name: name, owner: o.owner, ttl: o.ttl, onLost: o.onLost}

	start := time.Now()
	var sent time.Time // monotonic time just before the granting call was sent
	if o.hasTimeout && o.timeout == 0 {
		if try == nil {
			return fail(errors.New("Timeout(0): this request cannot be tried without waiting; give a positive Timeout"))
		}
		sent = time.Now()
		tok, err := try(ctx, l)
		if err != nil {
			if ctx.Err() != nil {
				// the driver cancelled the call: make sure no grant stays
				l.withdraw()
				return fail(ctx.Err())
			}
			return fail(err)
		}
		if !tok.Valid {
			return fail(fmt.Errorf("%w (Timeout(0): tried once, busy)", ErrTimeout))
		}
		l.token = tok.Int64
	} else {
		var pause time.Duration
		for {
			w := maxCall
			if o.hasTimeout {
				left := o.timeout - time.Since(start)
				if left < minCallWindow {
					l.withdraw()
					return fail(fmt.Errorf("%w (%v)", ErrTimeout, o.timeout))
				}
				if left < w {
					w = left
				}
			}
			if dl, ok := ctx.Deadline(); ok {
				left := time.Until(dl)
				if left < minCallWindow {
					l.withdraw()
					return fail(ctxErrOr(ctx, context.DeadlineExceeded))
				}
				if left < w {
					w = left
				}
			}
			if err := ctx.Err(); err != nil {
				l.withdraw()
				return fail(err)
			}
			// A grant made while no call waited (collected by this call) runs
			// under a lease set by the previous call, so the local deadline
			// counts from the previous call's sending: never later than the
			// server's lease end.
			prev := sent
			sent = time.Now()
			// not ctx: the call ends by its own server-side timeout (see above)
			cctx, cancel := context.WithTimeout(context.Background(), w+cleanupTime)
			tok, err := wait(cctx, l, w)
			cancel()
			if err != nil {
				l.withdraw()
				return fail(err)
			}
			if tok.Valid {
				l.token = tok.Int64
				if !prev.IsZero() {
					sent = prev
				}
				break
			}
			// a call behind another request returns at once, its place kept
			// (the server waits only for the first in line): pause before the
			// next one, longer while it stays behind
			if time.Since(sent) < w/2 {
				pause = nextPause(pause)
				t := time.NewTimer(jitter(pause))
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
			} else {
				pause = 0
			}
		}
		if err := ctx.Err(); err != nil {
			// granted, but the caller gave up meanwhile
			l.withdraw()
			return fail(err)
		}
	}

	l.lost = make(chan struct{})
	l.stop = make(chan struct{})
	l.done = make(chan struct{})
	l.ctx, l.cancelCtx = context.WithCancel(context.Background())
	go l.renewer(sent)
	return l, nil
}

func ctxErrOr(ctx context.Context, e error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return e
}

func secs(d time.Duration) float64 { return d.Seconds() }

func (l *Lock) acquireCall(ctx context.Context, mode string, wait time.Duration) (sql.NullInt64, error) {
	var tok sql.NullInt64
	var err error
	switch l.d {
	case postgres:
		err = l.db.QueryRowContext(ctx,
			`SELECT dlock_acquire($1, mode => $2, timeout => make_interval(secs => $3), ttl => make_interval(secs => $4), owner => $5, keep_place => true)`,
			l.name, mode, secs(wait), secs(l.ttl), l.owner).Scan(&tok)
	case mariadb:
		err = l.db.QueryRowContext(ctx,
			`SELECT dlock_acquire(?, ?, ?, ?, ?, 1)`,
			l.name, secs(wait), secs(l.ttl), mode, l.owner).Scan(&tok)
	}
	return tok, err
}

func (l *Lock) tryAcquire(ctx context.Context, mode string) (sql.NullInt64, error) {
	var tok sql.NullInt64
	var err error
	switch l.d {
	case postgres:
		err = l.db.QueryRowContext(ctx,
			`SELECT dlock_try_acquire($1, mode => $2, ttl => make_interval(secs => $3), owner => $4)`,
			l.name, mode, secs(l.ttl), l.owner).Scan(&tok)
	case mariadb:
		err = l.db.QueryRowContext(ctx,
			`SELECT dlock_try_acquire(?, ?, ?, ?)`,
			l.name, secs(l.ttl), mode, l.owner).Scan(&tok)
	}
	return tok, err
}

func (l *Lock) renewCall(ctx context.Context) error {
	var err error
	switch l.d {
	case postgres:
		var exp sql.NullTime
		err = l.db.QueryRowContext(ctx,
			`SELECT dlock_renew($1, make_interval(secs => $2), $3)`,
			l.name, secs(l.ttl), l.owner).Scan(&exp)
	case mariadb:
		var exp sql.NullString
		err = l.db.QueryRowContext(ctx,
			`SELECT dlock_renew(?, ?, ?)`,
			l.name, secs(l.ttl), l.owner).Scan(&exp)
	}
	return err
}

// releaseCall releases (or withdraws) by the owner key; held is false when
// the key neither held the lock nor kept a place for it.
func (l *Lock) releaseCall(ctx context.Context) (held bool, err error) {
	switch l.d {
	case postgres:
		var ok sql.NullBool
		err = l.db.QueryRowContext(ctx, `SELECT dlock_release($1, $2)`, l.name, l.owner).Scan(&ok)
		held = ok.Valid && ok.Bool
	case mariadb:
		var ok sql.NullInt64
		err = l.db.QueryRowContext(ctx, `SELECT dlock_release(?, ?)`, l.name, l.owner).Scan(&ok)
		held = ok.Valid && ok.Int64 != 0
	}
	return held, err
}

// withdraw takes back a kept place (or a grant nobody collected) after the
// acquire gave up, on a fresh context: the caller's may be cancelled.
func (l *Lock) withdraw() {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTime)
	defer cancel()
	_, _ = l.releaseCall(ctx)
}

// margin between the local deadline and the server's lease end.
func margin(ttl time.Duration) time.Duration {
	m := ttl / 10
	if m > time.Second {
		m = time.Second
	}
	return m
}

func (l *Lock) renewer(sent time.Time) {
	defer close(l.done)
	every := l.ttl / 3
	deadline := sent.Add(l.ttl - margin(l.ttl))
	timer := time.NewTimer(time.Until(sent.Add(every)))
	defer timer.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-timer.C:
		}
		now := time.Now()
		if !now.Before(deadline) {
			l.markLost()
			return
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		go func() { // a Release stops a renewal in flight too
			select {
			case <-l.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		err := l.renewCall(ctx)
		cancel()
		select {
		case <-l.stop:
			return
		default:
		}
		switch {
		case err == nil:
			deadline = now.Add(l.ttl - margin(l.ttl))
			timer.Reset(time.Until(now.Add(every)))
		case isLostError(err):
			l.markLost()
			return
		default: // transient: retry soon, until the local deadline
			left := time.Until(deadline)
			if left <= 0 {
				l.markLost()
				return
			}
			p := retryPause
			if left < p {
				p = left
			}
			timer.Reset(p)
		}
	}
}

func (l *Lock) markLost() {
	l.mu.Lock()
	if l.isLost || l.released {
		l.mu.Unlock()
		return
	}
	l.isLost = true
	l.mu.Unlock()
	l.closeLost()
	l.cancelCtx()
	if l.onLost != nil {
		go l.onLost()
	}
}

func (l *Lock) closeLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// Release stops the renewals and releases the lock by its owner key. It
// returns ErrLost when the lease was lost before; the release by key is
// still sent then (harmless: it can free only the key's own hold), since a
// lease given up for want of a renewal may still be held on the server.
// If ctx is already done (or is cancelled during the call), the
// release is made on a fresh context with a timeout of a few seconds, so a
// lock is released even by a caller whose ctx was cancelled. Release is
// idempotent: later calls return nil (or ErrLost).
func (l *Lock) Release(ctx context.Context) error {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done       // the renewer ends promptly: its call in flight is cancelled
	l.relMu.Lock() // one release call at a time: a second would find nothing
	defer l.relMu.Unlock()
	l.mu.Lock()
	if l.isLost {
		first := !l.released
		l.released = true
		l.mu.Unlock()
		if first {
			fctx, cancel := context.WithTimeout(context.Background(), cleanupTime)
			_, _ = l.releaseCall(fctx)
			cancel()
		}
		return l.lostErr()
	}
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()

	var held bool
	var err error
	if ctx.Err() == nil {
		held, err = l.releaseCall(ctx)
	}
	if ctx.Err() != nil {
		fctx, cancel := context.WithTimeout(context.Background(), cleanupTime)
		held, err = l.releaseCall(fctx)
		cancel()
	}
	if err != nil {
		return wrapErr("release", l.name, err)
	}
	l.mu.Lock()
	l.released = true
	if !held {
		// the server had nothing of the key: the lease was lost (ran out or
		// was released by someone with the key) before the renewer noticed
		l.isLost = true
	}
	l.mu.Unlock()
	l.cancelCtx()
	if !held {
		l.closeLost()
		return l.lostErr()
	}
	return nil
}

// lostErr: ErrLost, naming the lock.
func (l *Lock) lostErr() error { return &LockError{Op: "release", Name: l.name, Err: ErrLost} }

// isLostError: a renewal (or a proclaim) answered "not held" (DL001).
func isLostError(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s, ok := e.(interface{ SQLState() string }); ok && s.SQLState() == "DL001" {
			return true
		}
		// "… [DL001]", or "… [DL001]; reason: …" after a force release
		if n, msg, ok := mysqlError(e); ok && n == 1105 && strings.Contains(msg, "[DL001]") {
			return true
		}
	}
	return false
}

// mysqlError reads a *mysql.MySQLError (go-sql-driver/mysql) without
// importing the driver.
func mysqlError(e error) (uint16, string, bool) {
	v := reflect.ValueOf(e)
	if v.Kind() != reflect.Ptr || v.IsNil() {
		return 0, "", false
	}
	v = v.Elem()
	t := v.Type()
	if t.Kind() != reflect.Struct || t.Name() != "MySQLError" || t.PkgPath() != "github.com/go-sql-driver/mysql" {
		return 0, "", false
	}
	num, msg := v.FieldByName("Number"), v.FieldByName("Message")
	if !num.IsValid() || !msg.IsValid() || num.Kind() != reflect.Uint16 || msg.Kind() != reflect.String {
		return 0, "", false
	}
	return uint16(num.Uint()), msg.String(), true
}

// nextPause doubles the pause between calls behind another request, from
// pauseMin to pauseMax.
func nextPause(p time.Duration) time.Duration {
	if p == 0 {
		return pauseMin
	}
	if p *= 2; p > pauseMax {
		p = pauseMax
	}
	return p
}

// jitter draws from the upper half of p, so that waiters do not call in step.
func jitter(p time.Duration) time.Duration {
	var b [1]byte
	_, _ = rand.Read(b[:])
	return p/2 + p/2*time.Duration(b[0])/255
}
