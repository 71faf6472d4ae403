// SPDX-License-Identifier: PostgreSQL

// coordgo — bench/run.sh's section 8: dlock against etcd's fair lock and
// election, both driven by this one Go program so the client costs are
// equal. One process per cell, a goroutine per client, each client with
// its own connection (dlock: a pgx connection of its own, etcd: a
// clientv3.Client of its own, i.e. its own gRPC connection, and its own
// session lease).
//
// Backends:
//
//	dlock   pgx (database/sql, stdlib driver), autocommit. Leases (the
//	        default, -dlock-mode lease): SELECT dlock_acquire(name,
//	        ttl => TTL, owner => key) / SELECT dlock_release(name, key),
//	        every grant flushed before it is acknowledged, the lock kept
//	        for TTL after its client vanishes — what an etcd session's
//	        lease gives. -dlock-mode session: dlock_acquire(name) /
//	        dlock_release(name) (ends with the connection, no flush).
//	        Election: dlock_campaign(name, value, ttl =>, owner =>) and
//	        dlock_release (resign); session mode without ttl and owner.
//	etcd    go.etcd.io/etcd/clientv3 (3.4) + concurrency: NewSession
//	        (WithTTL) per client, NewMutex(session, pfx).Lock / Unlock
//	        (FIFO by create revision: each waiter watches the key before
//	        its own), NewElection(session, pfx).Campaign / Resign.
//
// Modes (-mode): pairs (each client its own name: acquire + release),
// handoff (all clients on one name: acquire -> hold -> release), election
// (all clients campaign on one election: campaign -> hold -> resign).
//
// -mode ping (etcd): print the server's revision, exit 0 if it answered.
//
// Output, one line: "rate jain wait_p50_ms wait_p99_ms wait_max_ms pairs
// revs" — the bench_stats.h summary (an operation counts when its acquire
// returned inside the common window [start, start + seconds); wait = the
// acquire or campaign call, monotonic clock; Jain over per-client counts),
// then every pair made (warm-up and overtime included) and, for etcd, how
// far the server's revision moved during the cell (-1 for dlock): each
// pair is a put and a delete, so revs = 2 × pairs.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v4/stdlib"
	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	"go.uber.org/zap"
)

type client interface {
	acquire(ctx context.Context) error
	release(ctx context.Context) error
	close()
}

var (
	backend   = flag.String("backend", "", "dlock or etcd")
	target    = flag.String("target", "", "dlock: a pgx connection string; etcd: host:port of the client URL")
	mode      = flag.String("mode", "pairs", "pairs, handoff or election")
	nclients  = flag.Int("clients", 1, "clients (goroutines, each with its own connection)")
	seconds   = flag.Float64("seconds", 5, "length of the measured window")
	hold      = flag.Duration("hold", 0, "time the lock (or the lead) is held")
	ttl       = flag.Int("ttl", 60, "lease TTL in seconds (etcd session, dlock ttl)")
	dlockMode = flag.String("dlock-mode", "lease", "dlock: lease (owner key and TTL) or session")
	tag       = flag.String("tag", "cg", "prefix of the lock names (unique per cell)")
)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "coordgo: "+format+"\n", args...)
	os.Exit(1)
}

// --- dlock ------------------------------------------------------------------

type dlockClient struct {
	db       *sql.DB
	conn     *sql.Conn
	acq, rel string
	acqArgs  []interface{}
	relArgs  []interface{}
	what     string
}

func newDlock(ctx context.Context, name string, idx int) (client, error) {
	db, err := sql.Open("pgx", *target)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	c := &dlockClient{db: db, conn: conn, what: name}
	owner := fmt.Sprintf("%s-owner-%d", *tag, idx)
	lease := fmt.Sprintf("%d s", *ttl)
	value := fmt.Sprintf("candidate-%d", idx)
	switch {
	case *mode != "election" && *dlockMode == "lease":
		c.acq = "SELECT dlock_acquire($1, ttl => $2::interval, owner => $3)"
		c.acqArgs = []interface{}{name, lease, owner}
		c.rel = "SELECT dlock_release($1, owner => $2)"
		c.relArgs = []interface{}{name, owner}
	case *mode != "election":
		c.acq = "SELECT dlock_acquire($1)"
		c.acqArgs = []interface{}{name}
		c.rel = "SELECT dlock_release($1)"
		c.relArgs = []interface{}{name}
	case *dlockMode == "lease":
		c.acq = "SELECT dlock_campaign($1, $2, ttl => $3::interval, owner => $4)"
		c.acqArgs = []interface{}{name, value, lease, owner}
		c.rel = "SELECT dlock_release($1, owner => $2)"
		c.relArgs = []interface{}{name, owner}
	default:
		c.acq = "SELECT dlock_campaign($1, $2)"
		c.acqArgs = []interface{}{name, value}
		c.rel = "SELECT dlock_release($1)"
		c.relArgs = []interface{}{name}
	}
	return c, nil
}

func (c *dlockClient) acquire(ctx context.Context) error {
	var tok sql.NullInt64
	if err := c.conn.QueryRowContext(ctx, c.acq, c.acqArgs...).Scan(&tok); err != nil {
		return err
	}
	if !tok.Valid {
		return fmt.Errorf("%s on %q returned no token", c.acq, c.what)
	}
	return nil
}

func (c *dlockClient) release(ctx context.Context) error {
	var ok sql.NullBool
	if err := c.conn.QueryRowContext(ctx, c.rel, c.relArgs...).Scan(&ok); err != nil {
		return err
	}
	if !ok.Valid || !ok.Bool {
		return fmt.Errorf("%s on %q did not release", c.rel, c.what)
	}
	return nil
}

func (c *dlockClient) close() {
	c.conn.Close()
	c.db.Close()
}

// --- etcd -------------------------------------------------------------------

type etcdClient struct {
	cli  *clientv3.Client
	sess *concurrency.Session
	mu   *concurrency.Mutex
	el   *concurrency.Election
	val  string
}

func etcdConnect() (*clientv3.Client, error) {
	lc := zap.NewProductionConfig()
	lc.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{*target},
		DialTimeout: 10 * time.Second,
		LogConfig:   &lc,
	})
}

func newEtcd(ctx context.Context, name string, idx int) (client, error) {
	cli, err := etcdConnect()
	if err != nil {
		return nil, err
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(*ttl), concurrency.WithContext(context.Background()))
	if err != nil {
		cli.Close()
		return nil, err
	}
	c := &etcdClient{cli: cli, sess: sess, val: fmt.Sprintf("candidate-%d", idx)}
	if *mode == "election" {
		c.el = concurrency.NewElection(sess, "/"+name)
	} else {
		c.mu = concurrency.NewMutex(sess, "/"+name)
	}
	return c, nil
}

func (c *etcdClient) acquire(ctx context.Context) error {
	if c.el != nil {
		return c.el.Campaign(ctx, c.val)
	}
	return c.mu.Lock(ctx)
}

func (c *etcdClient) release(ctx context.Context) error {
	if c.el != nil {
		return c.el.Resign(ctx)
	}
	return c.mu.Unlock(ctx)
}

func (c *etcdClient) close() {
	c.sess.Close()
	c.cli.Close()
}

// etcdRevision: the server's current revision (every write moves it by one).
func etcdRevision() (int64, error) {
	cli, err := etcdConnect()
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := cli.Get(ctx, "/coordgo-revision-probe")
	if err != nil {
		return 0, err
	}
	return r.Header.Revision, nil
}

// --- the cell ---------------------------------------------------------------

type result struct {
	count int64
	pairs int64
	waits []float64
	err   error
}

func main() {
	flag.Parse()
	var open func(context.Context, string, int) (client, error)
	switch *backend {
	case "dlock":
		open = newDlock
		if *dlockMode != "lease" && *dlockMode != "session" {
			fail("-dlock-mode is lease or session")
		}
	case "etcd":
		open = newEtcd
	default:
		fail("-backend is dlock or etcd")
	}
	if *mode == "ping" && *backend == "etcd" {
		// is etcd serving? (run.sh waits for it to start)
		r, err := etcdRevision()
		if err != nil {
			fail("etcd: %v", err)
		}
		fmt.Println(r)
		return
	}
	if *mode != "pairs" && *mode != "handoff" && *mode != "election" {
		fail("-mode is pairs, handoff or election (or ping for etcd)")
	}
	if *nclients < 1 || *seconds <= 0 || *target == "" {
		fail("need -target, -clients >= 1 and -seconds > 0")
	}
	n := *nclients
	win := time.Duration(*seconds * float64(time.Second))
	// a cell that hangs fails instead: every call has this deadline
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+win)
	defer cancel()

	rev0 := int64(-1)
	if *backend == "etcd" {
		r, err := etcdRevision()
		if err != nil {
			fail("etcd: %v", err)
		}
		rev0 = r
	}

	var start time.Time
	ready := make(chan error, n)
	goSig := make(chan struct{})
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%s-one", *tag, *mode)
		if *mode == "pairs" {
			name = fmt.Sprintf("%s-own-%d", *tag, i)
		}
		wg.Add(1)
		go func(i int, name string) {
			defer wg.Done()
			r := &results[i]
			c, err := open(ctx, name, i)
			if err == nil {
				// one warm-up pair: connected, statements prepared
				if err = c.acquire(ctx); err == nil {
					err = c.release(ctx)
					r.pairs++
				}
			}
			ready <- err
			if err != nil {
				r.err = err
				if c != nil {
					c.close()
				}
				return
			}
			defer c.close()
			<-goSig
			time.Sleep(time.Until(start))
			end := start.Add(win)
			for {
				t0 := time.Now()
				if err := c.acquire(ctx); err != nil {
					r.err = fmt.Errorf("client %d acquire: %w", i, err)
					return
				}
				t1 := time.Now()
				if *hold > 0 {
					time.Sleep(*hold)
				}
				if err := c.release(ctx); err != nil {
					r.err = fmt.Errorf("client %d release: %w", i, err)
					return
				}
				r.pairs++
				if t1.Before(end) {
					r.count++
					r.waits = append(r.waits, float64(t1.Sub(t0))/1e6)
				}
				if !time.Now().Before(end) {
					return
				}
			}
		}(i, name)
	}
	var errs []string
	for i := 0; i < n; i++ {
		if err := <-ready; err != nil {
			errs = append(errs, err.Error())
		}
	}
	// every client connected and warm: one common window
	start = time.Now().Add(100 * time.Millisecond)
	close(goSig)
	wg.Wait()
	for i := range results {
		if results[i].err != nil && !errors.Is(results[i].err, context.Canceled) {
			errs = append(errs, results[i].err.Error())
		}
	}
	if len(errs) > 0 {
		fail("%s %s c=%d: %s", *backend, *mode, n, strings.Join(errs, "; "))
	}

	var sum, sumsq float64
	var pairs int64
	var all []float64
	for _, r := range results {
		sum += float64(r.count)
		sumsq += float64(r.count) * float64(r.count)
		pairs += r.pairs
		all = append(all, r.waits...)
	}
	sort.Float64s(all)
	pick := func(k int) float64 {
		if len(all) == 0 {
			return 0
		}
		return all[k]
	}
	jain := 0.0
	if sumsq > 0 {
		jain = sum * sum / (float64(n) * sumsq)
	}
	revs := int64(-1)
	if *backend == "etcd" {
		r, err := etcdRevision()
		if err != nil {
			fail("etcd: %v", err)
		}
		revs = r - rev0
	}
	nw := len(all)
	fmt.Printf("%.0f %.4f %.2f %.2f %.2f %d %d\n", sum/(*seconds), jain,
		pick(nw/2), pick(int(float64(nw)*0.99)), pick(nw-1), pairs, revs)
}
