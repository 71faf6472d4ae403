// SPDX-License-Identifier: PostgreSQL

package dlock

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"
)

// Leader is an election's leader: the value it published and its term
// (the fencing token of its leadership, larger for every new leader).
// The zero Leader (Term 0) stands for "nobody leads" in Observe.
type Leader struct {
	Value string
	Term  int64
}

// Election is the leader election name (dlock_campaign): one leader at a
// time, which publishes a value (where to reach it, at most 1 KiB); the
// campaigns wait in FIFO order. An Election may be used from several
// goroutines.
type Election struct {
	db   *sql.DB
	d    dialect
	name string
	opts []Option
	poll time.Duration
	pql  interface{} // a *pq.Listener (PQListener)
}

// NewElection returns the election name. The options (TTL, Timeout, Owner,
// OnLost) apply to every Campaign; PollInterval to Observe; Mode does not
// apply.
func NewElection(db *sql.DB, name string, opts ...Option) (*Election, error) {
	o, err := parseOptions("campaign", name, opts)
	if err != nil {
		return nil, err
	}
	if o.modeSet {
		return nil, &LockError{Op: "campaign", Name: name, Err: errors.New("Mode does not apply to an election")}
	}
	d, err := detect(db)
	if err != nil {
		return nil, wrapErr("campaign", name, err)
	}
	return &Election{db: db, d: d, name: name, opts: opts, poll: o.poll, pql: o.pqListener}, nil
}

// Name is the election's name.
func (e *Election) Name() string { return e.name }

// Leadership is a campaign that leads: a *Lock (Token() is the term;
// Lost(), Ctx(), OnLost as for a lock, renewed in the background) that can
// publish another value and resign.
type Leadership struct {
	*Lock
	mu    sync.Mutex
	value string
}

// Campaign waits in FIFO order until it leads, publishing value, and
// returns the leadership; as Acquire of a lock: until ctx is done or the
// Timeout option passes (ErrTimeout; a campaign cannot be tried without
// waiting, so Timeout(0) is refused), withdrawing the campaign when it
// gives up.
func (e *Election) Campaign(ctx context.Context, value string, opts ...Option) (*Leadership, error) {
	o, err := parseOptions("campaign", e.name, append(append([]Option(nil), e.opts...), opts...))
	if err != nil {
		return nil, err
	}
	wait := func(ctx context.Context, l *Lock, w time.Duration) (sql.NullInt64, error) {
		var tok sql.NullInt64
		var err error
		switch l.d {
		case postgres:
			err = l.db.QueryRowContext(ctx,
				`SELECT dlock_campaign($1, $2, timeout => make_interval(secs => $3), ttl => make_interval(secs => $4), owner => $5, keep_place => true)`,
				l.name, value, secs(w), secs(l.ttl), l.owner).Scan(&tok)
		case mariadb:
			err = l.db.QueryRowContext(ctx,
				`SELECT dlock_campaign(?, ?, ?, ?, ?, 1)`,
				l.name, value, secs(w), secs(l.ttl), l.owner).Scan(&tok)
		}
		return tok, err
	}
	l, err := grant(ctx, e.db, e.name, "campaign", o, wait, nil)
	if err != nil {
		return nil, err
	}
	return &Leadership{Lock: l, value: value}, nil
}

// Value is the value the leadership published last.
func (p *Leadership) Value() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.value
}

// Proclaim publishes another value (dlock_proclaim). When the server
// answers that this campaign no longer leads, the leadership is lost
// (Lost() closed, Ctx() cancelled) and the error wraps ErrLost.
func (p *Leadership) Proclaim(ctx context.Context, value string) error {
	var term sql.NullInt64
	var err error
	switch p.d {
	case postgres:
		err = p.db.QueryRowContext(ctx, `SELECT dlock_proclaim($1, $2, $3)`, p.name, value, p.owner).Scan(&term)
	case mariadb:
		err = p.db.QueryRowContext(ctx, `SELECT dlock_proclaim(?, ?, ?)`, p.name, value, p.owner).Scan(&term)
	}
	if err != nil {
		if isLostError(err) {
			p.markLost()
			return &LockError{Op: "proclaim", Name: p.name, Err: fmt.Errorf("%w: %v", ErrLost, err)}
		}
		return wrapErr("proclaim", p.name, err)
	}
	p.mu.Lock()
	p.value = value
	p.mu.Unlock()
	return nil
}

// Resign gives up the leadership (Release): the next campaign in line
// leads. ErrLost if it had been lost before.
func (p *Leadership) Resign(ctx context.Context) error { return p.Release(ctx) }

// Leader returns the current leader, from any connection; ErrNoLeader
// when nobody leads (or the leader's lease ran out).
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	ld, ok, err := e.leader(ctx)
	if err != nil {
		return Leader{}, wrapErr("leader", e.name, err)
	}
	if !ok {
		return Leader{}, &LockError{Op: "leader", Name: e.name, Err: ErrNoLeader}
	}
	return ld, nil
}

func (e *Election) leader(ctx context.Context) (Leader, bool, error) {
	var ld Leader
	switch e.d {
	case postgres:
		err := e.db.QueryRowContext(ctx, `SELECT value, token FROM dlock_leader($1)`, e.name).Scan(&ld.Value, &ld.Term)
		if errors.Is(err, sql.ErrNoRows) {
			return Leader{}, false, nil
		}
		return ld, err == nil, err
	case mariadb:
		var info sql.NullString
		if err := e.db.QueryRowContext(ctx, `SELECT dlock_leader_info(?)`, e.name).Scan(&info); err != nil {
			return Leader{}, false, err
		}
		if !info.Valid {
			return Leader{}, false, nil
		}
		var j struct {
			Value string `json:"value"`
			Term  int64  `json:"term"`
		}
		if err := json.Unmarshal([]byte(info.String), &j); err != nil {
			return Leader{}, false, fmt.Errorf("dlock_leader_info: %w", err)
		}
		return Leader{j.Value, j.Term}, true, nil
	}
	return Leader{}, false, errors.New("unknown database")
}

// listenRecheck: how often a listening Observe asks for the leader
// without a notification (a lease that ran out is reaped by the server,
// which notifies too; this covers what a notification could not tell).
const listenRecheck = 10 * time.Second

// Observe reports the leader: the current one first, then every change of
// leader or value, until ctx is done (the channel is closed then). The
// zero Leader means nobody leads. Consecutive equal values are sent once;
// a slow reader gets the latest state, not every step between.
//
// On PostgreSQL through pgx it waits on LISTEN dlock_leader on a
// connection of its own, taken from the pool for as long as it observes
// (notifications whose payload is the election's dlock_notify_key and
// whose sender is the lock manager). Through lib/pq (whose notifications
// need its own Listener), through pgbouncer (transaction pooling loses a
// LISTEN) and on MariaDB (no notifications) it polls dlock_leader every
// PollInterval; through lib/pq with the PQListener option it waits on that
// Listener. Errors of the server are retried at that pace.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	ch := make(chan Leader)
	go func() {
		defer close(ch)
		o := observer{e: e, ctx: ctx, ch: ch}
		if e.d == postgres && e.pql != nil && o.listenPQ() {
			return
		}
		if e.d == postgres && e.pql == nil && isPgx(e.db) && o.listen() {
			return
		}
		o.poll()
	}()
	return ch
}

type observer struct {
	e    *Election
	ctx  context.Context
	ch   chan Leader
	last Leader
	sent bool
}

// check asks for the leader and sends it when it changed; false when ctx
// is done.
func (o *observer) check() bool {
	cctx, cancel := context.WithTimeout(o.ctx, cleanupTime)
	ld, _, err := o.e.leader(cctx)
	cancel()
	if err != nil {
		return o.ctx.Err() == nil // retried at the next check
	}
	if o.sent && ld == o.last {
		return true
	}
	select {
	case o.ch <- ld:
		o.last, o.sent = ld, true
		return true
	case <-o.ctx.Done():
		return false
	}
}

func (o *observer) poll() {
	observeMode(o.e, "poll")
	t := time.NewTicker(o.e.poll)
	defer t.Stop()
	for o.check() {
		select {
		case <-o.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// observeHook lets the tests see how an Observe observes.
var observeHook func(name, mode string)

func observeMode(e *Election, mode string) {
	if h := observeHook; h != nil {
		h(e.name, mode)
	}
}

func isPgx(db *sql.DB) bool {
	t := reflect.TypeOf(db.Driver())
	for t != nil && t.Kind() == reflect.Ptr {
		t = t.Elem()
	}
	return t != nil && t.PkgPath() != "github.com/lib/pq"
}

// listen observes through LISTEN dlock_leader on a pgx connection of its
// own; false when it cannot (pgbouncer, an error before listening), so
// that the caller polls. True when ctx is done.
func (o *observer) listen() bool {
	conn, err := o.e.db.Conn(o.ctx)
	if err != nil {
		return o.ctx.Err() != nil
	}
	defer conn.Close()
	var key string
	var mgr sql.NullInt64
	var backend int64
	if err := conn.QueryRowContext(o.ctx,
		`SELECT dlock_notify_key($1), dlock_manager_pid(), pg_backend_pid()`, o.e.name).Scan(&key, &mgr, &backend); err != nil {
		return o.ctx.Err() != nil
	}
	err = conn.Raw(func(dc interface{}) error {
		pc, ok := pgxConn(dc)
		if !ok {
			return errors.New("not a pgx connection")
		}
		// pgbouncer answers the startup with a process id of its own: the
		// LISTEN would stay on a server connection that goes back to the pool
		if pid, ok := call1(pc.MethodByName("PgConn")); !ok || !pid.IsValid() {
			return errors.New("no PgConn")
		} else if p, ok := call1(pid.MethodByName("PID")); !ok || int64(p.Uint()) != backend {
			return errors.New("pooled connection")
		}
		return nil
	})
	if err != nil {
		return o.ctx.Err() != nil
	}
	if _, err := conn.ExecContext(o.ctx, `LISTEN dlock_leader`); err != nil {
		return o.ctx.Err() != nil
	}
	defer func() {
		// the connection goes back to the pool: not listening, and with no
		// notification left in pgx's buffer
		cctx, cancel := context.WithTimeout(context.Background(), cleanupTime)
		defer cancel()
		if _, err := conn.ExecContext(cctx, `UNLISTEN dlock_leader`); err == nil {
			_ = conn.Raw(func(dc interface{}) error {
				if pc, ok := pgxConn(dc); ok {
					done, cancel := context.WithCancel(context.Background())
					cancel()
					wait := pc.MethodByName("WaitForNotification")
					for {
						out := wait.Call([]reflect.Value{reflect.ValueOf(done)})
						if !out[1].IsNil() || out[0].IsNil() {
							break
						}
					}
				}
				return nil
			})
		}
	}()
	observeMode(o.e, "listen")
	if !o.check() {
		return true
	}
	// the wait itself: only inside Raw may the driver's connection be used
	_ = conn.Raw(func(dc interface{}) error {
		pc, _ := pgxConn(dc)
		wait := pc.MethodByName("WaitForNotification")
		for {
			wctx, cancel := context.WithTimeout(o.ctx, listenRecheck)
			out := wait.Call([]reflect.Value{reflect.ValueOf(wctx)})
			cancel()
			if o.ctx.Err() != nil {
				return nil
			}
			if e, _ := out[1].Interface().(error); e != nil {
				if wctx.Err() == nil {
					return e // the connection broke: poll instead
				}
				if !o.check() { // the periodic look
					return nil
				}
				continue
			}
			if out[0].IsNil() {
				continue
			}
			n := out[0].Elem()
			if n.FieldByName("Payload").String() != key ||
				(mgr.Valid && int64(n.FieldByName("PID").Uint()) != mgr.Int64) {
				continue // another election's, or not from the lock manager
			}
			if !o.check() {
				return nil
			}
		}
	})
	// false: the listening connection broke (it goes back closed); the
	// caller polls from here
	return o.ctx.Err() != nil
}

// pgxConn: the *pgx.Conn behind a pgx stdlib driver connection.
func pgxConn(dc interface{}) (reflect.Value, bool) {
	m := reflect.ValueOf(dc).MethodByName("Conn")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return reflect.Value{}, false
	}
	c := m.Call(nil)[0]
	if c.Kind() != reflect.Ptr || c.IsNil() || !c.MethodByName("WaitForNotification").IsValid() {
		return reflect.Value{}, false
	}
	return c, true
}

// call1 calls a method of no arguments and one result.
func call1(m reflect.Value) (reflect.Value, bool) {
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return reflect.Value{}, false
	}
	return m.Call(nil)[0], true
}

// listenPQ observes through a *pq.Listener (PQListener); false when it
// cannot (the caller polls), true when ctx is done.
func (o *observer) listenPQ() bool {
	l := reflect.ValueOf(o.e.pql)
	var key string
	var mgr sql.NullInt64
	if err := o.e.db.QueryRowContext(o.ctx,
		`SELECT dlock_notify_key($1), dlock_manager_pid()`, o.e.name).Scan(&key, &mgr); err != nil {
		return o.ctx.Err() != nil
	}
	out := l.MethodByName("Listen").Call([]reflect.Value{reflect.ValueOf("dlock_leader")})
	if e, _ := out[0].Interface().(error); e != nil {
		return o.ctx.Err() != nil
	}
	defer l.MethodByName("Unlisten").Call([]reflect.Value{reflect.ValueOf("dlock_leader")})
	ch := l.MethodByName("NotificationChannel").Call(nil)[0]
	observeMode(o.e, "listen")
	if !o.check() {
		return true
	}
	for {
		timer := time.NewTimer(listenRecheck)
		chosen, n, ok := reflect.Select([]reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(o.ctx.Done())},
			{Dir: reflect.SelectRecv, Chan: ch},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
		})
		timer.Stop()
		switch {
		case chosen == 0:
			return true
		case chosen == 1 && !ok:
			return o.ctx.Err() != nil // the Listener was closed: poll
		case chosen == 1 && !n.IsNil():
			// nil: the Listener reconnected (and may have missed some): look
			if v := n.Elem(); v.FieldByName("Extra").String() != key ||
				(mgr.Valid && v.FieldByName("BePid").Int() != mgr.Int64) {
				continue // another election's, or not from the lock manager
			}
		}
		if !o.check() {
			return true
		}
	}
}
