// SPDX-License-Identifier: PostgreSQL

package dlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Semaphore is a counting semaphore of the server: at most Capacity()
// permits of the name are held at once, granted in strict FIFO order
// (dlock_semaphore). Each Acquire holds its permits under an owner key of
// its own, as a *Lock renewed in the background like a lock: Lost() and
// Ctx() tell of a lost lease, Release gives the permits back. A Semaphore
// may be used from several goroutines.
type Semaphore struct {
	db       *sql.DB
	d        dialect
	name     string
	capacity int
	opts     []Option
}

// NewSemaphore returns the semaphore name of the given capacity. The
// options (TTL, Timeout, Owner, OnLost) apply to every Acquire; Mode does
// not apply. Every user of the name must give the same capacity while
// anyone holds or waits for it (the server refuses another one, DL004).
func NewSemaphore(db *sql.DB, name string, capacity int, opts ...Option) (*Semaphore, error) {
	o, err := parseOptions("semaphore", name, opts)
	if err != nil {
		return nil, err
	}
	if o.modeSet {
		return nil, &LockError{Op: "semaphore", Name: name, Err: errors.New("Mode does not apply to a semaphore")}
	}
	if capacity <= 0 {
		return nil, &LockError{Op: "semaphore", Name: name, Err: fmt.Errorf("capacity must be positive, got %d", capacity)}
	}
	d, err := detect(db)
	if err != nil {
		return nil, wrapErr("semaphore", name, err)
	}
	return &Semaphore{db: db, d: d, name: name, capacity: capacity, opts: opts}, nil
}

// Name is the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Capacity is the number of permits of the semaphore.
func (s *Semaphore) Capacity() int { return s.capacity }

func (s *Semaphore) check(permits int) error {
	if permits < 1 || permits > s.capacity {
		return &LockError{Op: "semaphore", Name: s.name,
			Err: fmt.Errorf("permits must be 1 … %d, got %d", s.capacity, permits)}
	}
	return nil
}

// Acquire waits in FIFO order for permits of the semaphore and returns
// them held (Permits() of the returned lock). It waits as Acquire of a
// lock does: until granted, ctx is done or the Timeout option passes
// (ErrTimeout), in short calls that keep the request's place, withdrawing
// the request when it gives up.
func (s *Semaphore) Acquire(ctx context.Context, permits int, opts ...Option) (*Lock, error) {
	if err := s.check(permits); err != nil {
		return nil, err
	}
	o, err := parseOptions("semaphore", s.name, append(append([]Option(nil), s.opts...), opts...))
	if err != nil {
		return nil, err
	}
	capacity := s.capacity
	wait := func(ctx context.Context, l *Lock, w time.Duration) (sql.NullInt64, error) {
		var tok sql.NullInt64
		var err error
		switch l.d {
		case postgres:
			err = l.db.QueryRowContext(ctx,
				`SELECT dlock_semaphore($1, $2, $3, timeout => make_interval(secs => $4), ttl => make_interval(secs => $5), owner => $6, keep_place => true)`,
				l.name, capacity, permits, secs(w), secs(l.ttl), l.owner).Scan(&tok)
		case mariadb:
			err = l.db.QueryRowContext(ctx,
				`SELECT dlock_semaphore(?, ?, ?, ?, ?, ?, 1)`,
				l.name, capacity, permits, secs(w), secs(l.ttl), l.owner).Scan(&tok)
		}
		return tok, err
	}
	try := func(ctx context.Context, l *Lock) (sql.NullInt64, error) {
		var tok sql.NullInt64
		var err error
		switch l.d {
		case postgres:
			err = l.db.QueryRowContext(ctx,
				`SELECT dlock_try_semaphore($1, $2, $3, ttl => make_interval(secs => $4), owner => $5)`,
				l.name, capacity, permits, secs(l.ttl), l.owner).Scan(&tok)
		case mariadb:
			err = l.db.QueryRowContext(ctx,
				`SELECT dlock_try_semaphore(?, ?, ?, ?, ?)`,
				l.name, capacity, permits, secs(l.ttl), l.owner).Scan(&tok)
		}
		return tok, err
	}
	l, err := grant(ctx, s.db, s.name, "semaphore", o, wait, try)
	if err != nil {
		return nil, err
	}
	l.permits = permits
	return l, nil
}

// TryAcquire takes permits only if they are free now and nobody waits
// before (dlock_try_semaphore): never queues. ErrTimeout when not.
func (s *Semaphore) TryAcquire(ctx context.Context, permits int, opts ...Option) (*Lock, error) {
	return s.Acquire(ctx, permits, append(append([]Option(nil), opts...), Timeout(0))...)
}

// Available returns the permits free now: the capacity less the permits
// held under leases that have not run out (dlock_semaphore_available); the
// whole capacity when nobody holds or waits for the semaphore.
func (s *Semaphore) Available(ctx context.Context) (int, error) {
	var n sql.NullInt64
	var err error
	switch s.d {
	case postgres:
		err = s.db.QueryRowContext(ctx, `SELECT dlock_semaphore_available($1)`, s.name).Scan(&n)
	case mariadb:
		err = s.db.QueryRowContext(ctx, `SELECT dlock_semaphore_available(?)`, s.name).Scan(&n)
	}
	if err != nil {
		return 0, wrapErr("available", s.name, err)
	}
	if !n.Valid {
		return s.capacity, nil
	}
	return int(n.Int64), nil
}
