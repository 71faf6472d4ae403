// SPDX-License-Identifier: PostgreSQL

package dlock

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrTimeout: not granted within the Timeout option (or, with
	// Timeout(0) and TryAcquire, not free at once). Nothing is left
	// waiting on the server.
	ErrTimeout = errors.New("not granted within the timeout")
	// ErrLost: Release of a lock whose lease was lost before.
	ErrLost = errors.New("lease lost")
	// ErrNoLeader: Election.Leader when nobody leads.
	ErrNoLeader = errors.New("no leader")
)

// LockError is what every call of this package returns on failure: it names
// the call and the lock, wraps the cause (ErrTimeout, ErrLost, ErrNoLeader,
// a ctx error or the driver's error: use errors.Is / errors.As) and, where
// the fix is known, says it in Hint.
type LockError struct {
	Op   string // "acquire", "semaphore", "campaign", "release", "proclaim", "leader", "available", "observe"
	Name string // the lock's, semaphore's or election's name
	Err  error
	Hint string
}

func (e *LockError) Error() string {
	s := fmt.Sprintf("dlock: %s %q: %v", e.Op, e.Name, e.Err)
	if e.Hint != "" {
		s += " (hint: " + e.Hint + ")"
	}
	return s
}

func (e *LockError) Unwrap() error { return e.Err }

// wrapErr names the lock in err, once.
func wrapErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var le *LockError
	if errors.As(err, &le) {
		return err
	}
	return &LockError{Op: op, Name: name, Err: err, Hint: hintFor(err)}
}

const (
	hintGrantPG    = "the role lacks dlock_user: GRANT dlock_user TO <role>"
	hintGrantMy    = "the account lacks dlock_user: GRANT dlock_user TO 'app'@'%'; SET DEFAULT ROLE dlock_user FOR 'app'@'%'"
	hintNamespace  = "the name is outside the prefixes granted to this role (dlock_grant, docs/security.md)"
	hintNoExtPG    = "the dlock extension is not installed in this database: connect to the database named by the server's dlock.database setting (default postgres), where CREATE EXTENSION dlock was run"
	hintNoPluginMy = "dlock's functions are not installed on this server: load the plugin and run scripts/mysql_install.sh (docs/mariadb.md)"
)

// hintFor: the fix of a server error, where it is known.
func hintFor(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s, ok := e.(interface{ SQLState() string }); ok {
			msg := e.Error()
			switch s.SQLState() {
			case "42501":
				if strings.Contains(msg, "permission denied for function") {
					return hintGrantPG
				}
				if strings.Contains(msg, "permission denied for lock") {
					return hintNamespace
				}
			case "42883": // undefined_function
				if strings.Contains(msg, "dlock_") {
					return hintNoExtPG
				}
			}
		}
		if n, msg, ok := mysqlError(e); ok {
			switch {
			case n == 1370 && strings.Contains(msg, "permission denied for lock"):
				return hintNamespace
			case n == 1370 && strings.Contains(msg, "dlock_user"):
				return hintGrantMy
			case n == 1305 && strings.Contains(msg, "dlock_"): // FUNCTION … does not exist
				return hintNoPluginMy
			}
		}
	}
	return ""
}
