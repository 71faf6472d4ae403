# SPDX-License-Identifier: PostgreSQL
"""dlock for Python: hold a dlock lease safely.

    with dlock.lock(pool, "orders/42", ttl=30, timeout=5) as held:
        write(fence=held.token)        # held.lost turns True if the lease goes

    async with dlock.lock(apool, "orders/42", ttl=30) as held:
        ...                            # cancelled (LeaseLost) if the lease goes

The source is a connection pool (psycopg_pool's, psycopg2.pool's), a
factory (a callable returning a new connection), or a connection (psycopg 3
or psycopg2; MySQLdb and PyMySQL connections are not thread-safe, so give
those as a factory).  See clients/python/README.md.
"""

import asyncio
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor, TimeoutError as FutureTimeout

from . import _sql
from ._steps import (Call, CallTimedOut, Refused, Sleep, acquire_steps, lease_margin,
                     release_steps, watch_steps, withdraw_steps)

__all__ = ["lock", "semaphore", "leader", "current_leader", "new_owner", "Held",
           "Error", "Timeout", "LeaseLost"]


class Error(Exception):
    """Base of dlock's own errors (server errors come as the driver's)."""


class Timeout(Error, TimeoutError):
    """Not granted within the timeout; nothing is left waiting."""


class LeaseLost(Error):
    """The lease was lost while the guarded work ran."""


def new_owner():
    """A fresh owner key: 128 random bits, as dlock_new_owner() makes."""
    return secrets.token_hex(16)


# ---------------------------------------------------------------- sources

class _PlainSource:
    """The caller's own connection, shared with the renewals (one at a time)."""

    def __init__(self, conn):
        if not _sql.thread_safe(conn):
            raise TypeError("dlock: %s connections are not thread-safe and the renewals run "
                            "in a thread: pass a factory (a callable returning a new "
                            "connection) or a pool instead" % type(conn).__module__.split(".")[0])
        self.conn = conn
        self.mutex = threading.Lock()

    def call(self, op, args):
        with self.mutex:
            return _run(self.conn, op, args)

    def close(self):
        pass


class _FactorySource:
    """Connections of our own from a factory: one kept, another on breakage."""

    def __init__(self, factory):
        self.factory = factory
        self.conn = None
        self.mutex = threading.Lock()

    def call(self, op, args):
        with self.mutex:
            if self.conn is None or _sql.is_broken(self.conn):
                self._drop()
                self.conn = self.factory()
                _autocommit(self.conn)
            try:
                return _run(self.conn, op, args)
            except Exception as e:
                if not _sql.dialect_of(self.conn).is_server_error(e):
                    self._drop()  # a lost connection: the next call opens another
                raise

    def _drop(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
        self.conn = None

    def close(self):
        with self.mutex:
            self._drop()


class _PoolSource:
    """A connection borrowed for each call (psycopg_pool, psycopg2.pool)."""

    def __init__(self, pool):
        self.pool = pool

    def call(self, op, args):
        if not hasattr(self.pool, "connection"):  # psycopg2.pool
            conn = self.pool.getconn()
            broken = False
            try:
                return _run(conn, op, args)
            except Exception as e:
                broken = not _sql.dialect_of(conn).is_server_error(e)
                raise
            finally:
                self.pool.putconn(conn, close=broken or _sql.is_broken(conn))
        with self.pool.connection() as conn:
            return _run(conn, op, args)

    def close(self):
        pass


def _autocommit(conn):
    if _sql.dialect_of(conn) is _sql.MYSQL:
        conn.autocommit(True)
    else:
        conn.autocommit = True


def _run(conn, op, args):
    """One call on a connection; commits only a transaction it began."""
    dialect = _sql.dialect_of(conn)
    sql, params = dialect.sql(op, args)
    began = _sql.idle(conn)
    try:
        cur = conn.cursor()
        try:
            cur.execute(sql, params)
            row = cur.fetchone()
        finally:
            try:
                cur.close()
            except Exception:
                pass  # an interrupted call's cursor: the first error is the one to tell
        if began:
            conn.commit()
    except Exception as e:
        if began and not _sql.is_broken(conn):
            try:
                conn.rollback()
            except Exception:
                pass
        if dialect.is_lost(e):
            raise Refused(str(e).strip().splitlines()[0]) from e
        raise
    if op == "leader":
        return None if row is None else tuple(_text(v) for v in row)
    return None if row is None else _text(row[0])


def _text(v):
    """The MySQL drivers return a UDF's string as bytes."""
    return v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else v


def _source_of(obj):
    if hasattr(obj, "cursor"):
        return _PlainSource(obj)
    if hasattr(obj, "connection") or hasattr(obj, "getconn"):
        return _PoolSource(obj)
    if callable(obj):
        return _FactorySource(obj)
    raise TypeError("dlock: expected a connection, a pool or a factory, not %r" % (obj,))


# ------------------------------------------------------- asyncio sources

class _AsyncPlainSource:
    def __init__(self, conn):
        self.conn = conn
        self.mutex = asyncio.Lock()

    async def call(self, op, args):
        async with self.mutex:
            return await _arun(self.conn, op, args)

    async def close(self):
        pass


class _AsyncFactorySource:
    def __init__(self, factory):
        self.factory = factory
        self.conn = None
        self.mutex = asyncio.Lock()

    async def call(self, op, args):
        async with self.mutex:
            if self.conn is None or self.conn.closed:
                await self._drop()
                self.conn = await self.factory()
                await self.conn.set_autocommit(True)
            try:
                return await _arun(self.conn, op, args)
            except BaseException as e:
                if not _sql.POSTGRES.is_server_error(e):
                    await self._drop()  # also after a cancel inside the call
                raise

    async def _drop(self):
        if self.conn is not None:
            try:
                await self.conn.close()
            except Exception:
                pass
        self.conn = None

    async def close(self):
        await self._drop()


class _AsyncPoolSource:
    def __init__(self, pool):
        self.pool = pool

    async def call(self, op, args):
        async with self.pool.connection() as conn:
            return await _arun(conn, op, args)

    async def close(self):
        pass


class _ThreadedSource:
    """A sync source used from asyncio: its calls run in threads."""

    def __init__(self, source):
        self.source = source

    async def call(self, op, args):
        return await asyncio.to_thread(self.source.call, op, args)

    async def close(self):
        await asyncio.to_thread(self.source.close)


async def _arun(conn, op, args):
    sql, params = _sql.POSTGRES.sql(op, args)  # psycopg 3 is the asyncio driver
    began = _sql.idle(conn)
    try:
        async with conn.cursor() as cur:
            await cur.execute(sql, params)
            row = await cur.fetchone()
        if began:
            await conn.commit()
    except BaseException as e:
        if began and not conn.closed:
            try:
                await conn.rollback()
            except Exception:
                pass
        if isinstance(e, Exception) and _sql.POSTGRES.is_lost(e):
            raise Refused(str(e).strip().splitlines()[0]) from e
        raise
    if op == "leader":
        return row
    return None if row is None else row[0]


def _async_source_of(obj):
    import inspect
    kind = type(obj).__name__
    if kind.startswith("Async") and hasattr(obj, "cursor"):  # psycopg.AsyncConnection
        return _AsyncPlainSource(obj)
    if kind.startswith("Async") and hasattr(obj, "connection"):  # psycopg_pool's
        return _AsyncPoolSource(obj)
    if inspect.iscoroutinefunction(obj):
        return _AsyncFactorySource(obj)
    return _ThreadedSource(_source_of(obj))


# ------------------------------------------------------------------ Held

class _Spec:
    """What is asked for: one lock, a semaphore's permits or leadership."""

    def __init__(self, name, *, op, try_op, mode, ttl, timeout, owner, poll, extra):
        if not isinstance(name, str) or not name:
            raise ValueError("dlock: the name must be a non-empty string")
        if ttl is None or ttl <= 0:
            raise ValueError("dlock: ttl must be a positive number of seconds")
        if timeout is not None and timeout < 0:
            raise ValueError("dlock: timeout must be None (wait until granted) or >= 0")
        self.name, self.op, self.try_op = name, op, try_op
        self.ttl, self.timeout, self.poll = float(ttl), timeout, poll
        self.own_key = owner is None
        self.owner = owner or new_owner()
        self.release_limit = 10.0
        self.args = dict(name=name, mode=mode, ttl=self.ttl, owner=self.owner, **extra)


class Held:
    """A lease being held: its token, and whether it is lost.

    `token` is the fencing token (a leader's term); pass it to whatever the
    work writes to, so a store can refuse an older holder.  `lost` turns
    True — and `lost_event` is set, `on_lost(held)` called once — when a
    renewal is refused or none succeeded before the lease could end; from
    then on the work must stop."""

    def __init__(self, spec, token, sent_at, on_lost):
        self._spec = spec
        self.name = spec.name
        self.owner = spec.owner
        self.token = token
        self._sent_at = sent_at
        self._deadline = sent_at + spec.ttl - lease_margin(spec.ttl)
        self.lost_event = threading.Event()
        self.lost_reason = None
        self._on_lost = on_lost
        self._released = False

    @property
    def lost(self):
        return self.lost_event.is_set()

    def _lose(self, why):
        if self.lost_event.is_set():
            return False
        self.lost_reason = why
        self.lost_event.set()
        if self._on_lost is not None:
            try:
                self._on_lost(self)
            except Exception:
                pass  # the callback's failure must not stop the rest
        return True

    def check(self):
        """Raise LeaseLost if the lease is lost (for work done in steps)."""
        if self.lost:
            raise LeaseLost("dlock: lease of %r lost: %s" % (self.name, self.lost_reason))

    def proclaim(self, value):
        """A leader publishes a new value (set by the lock for elections)."""
        raise TypeError("dlock: only a leader proclaims")


class Lock:
    """`with`/`async with` a dlock lease: acquire, renew, release."""

    def __init__(self, source, spec, on_lost):
        self._source_obj = source
        self._spec = spec
        self._on_lost = on_lost
        self.held = None

    # ---- threads
    def __enter__(self):
        spec = self._spec
        self._source = _source_of(self._source_obj)
        try:
            token, sent_at = _drive(acquire_steps(spec), self._source, None, None)
        except BaseException:
            self._source.close()
            raise
        if token is None:
            self._source.close()
            raise Timeout("dlock: %r not granted within %s s" % (spec.name, spec.timeout))
        held = self.held = Held(spec, token, sent_at, self._on_lost)
        held.proclaim = self._proclaim
        self._stop = threading.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="dlock-call")
        self._watcher = threading.Thread(target=self._watch, name="dlock-renew " + spec.name,
                                         daemon=True)
        self._watcher.start()
        return held

    def _watch(self):
        why = _drive(watch_steps(self.held), self._source, self._stop, self._executor)
        if why is not None:
            self.held._lose(why)

    def _proclaim(self, value):
        return _call_limited(self._source, self._executor, Call(
            "proclaim", {"name": self._spec.name, "value": value, "owner": self._spec.owner}))

    def __exit__(self, exc_type, exc, tb):
        self._stop.set()
        self._watcher.join(self._spec.release_limit)
        _drive(release_steps(self._spec), self._source, None, self._executor)
        self._executor.shutdown(wait=False)
        self._source.close()
        self.held._released = True
        return False

    # ---- asyncio
    async def __aenter__(self):
        spec = self._spec
        self._asource = _async_source_of(self._source_obj)
        try:
            token, sent_at = await _adrive(acquire_steps(spec), self._asource, None)
        except BaseException:
            await self._asource.close()
            raise
        if token is None:
            await self._asource.close()
            raise Timeout("dlock: %r not granted within %s s" % (spec.name, spec.timeout))
        held = self.held = Held(spec, token, sent_at, self._on_lost)
        held.proclaim = self._aproclaim
        self._astop = asyncio.Event()
        self._guarded = asyncio.current_task()
        self._cancelled_for_loss = False
        self._watch_task = asyncio.create_task(self._awatch())
        return held

    async def _awatch(self):
        why = await _adrive(watch_steps(self.held), self._asource, self._astop)
        if why is not None and self.held._lose(why) and self._guarded is not None \
                and not self._astop.is_set():
            self._cancelled_for_loss = True
            self._guarded.cancel()

    async def _aproclaim(self, value):
        return await self._asource.call("proclaim", {"name": self._spec.name, "value": value,
                                                     "owner": self._spec.owner})

    async def __aexit__(self, exc_type, exc, tb):
        self._astop.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._watch_task), self._spec.release_limit)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            self._watch_task.cancel()
        await _adrive(release_steps(self._spec), self._asource, None)
        await self._asource.close()
        self.held._released = True
        if self._cancelled_for_loss and exc_type is asyncio.CancelledError:
            task = asyncio.current_task()
            if hasattr(task, "uncancel"):
                task.uncancel()
            raise LeaseLost("dlock: lease of %r lost: %s" % (self._spec.name,
                                                            self.held.lost_reason)) from None
        return False


# ---------------------------------------------------------------- drivers

def _call_limited(source, executor, op):
    if op.limit is None or executor is None:
        return source.call(op.op, op.args)
    future = executor.submit(source.call, op.op, op.args)
    try:
        return future.result(timeout=max(0.0, op.limit))
    except FutureTimeout:
        raise CallTimedOut() from None


def _drive(steps, source, stop, executor):
    """Carry out steps with blocking calls (stop: a threading.Event)."""
    value, exc = None, None
    while True:
        try:
            op = steps.throw(exc) if exc is not None else steps.send(value)
        except StopIteration as e:
            return e.value
        value, exc = None, None
        if isinstance(op, Sleep):
            if stop is not None:
                value = stop.wait(op.seconds)
            else:
                time.sleep(op.seconds)
                value = False
            continue
        try:
            value = _call_limited(source, executor, op)
        except BaseException as e:  # KeyboardInterrupt too: the steps withdraw
            exc = e


async def _acall(source, op):
    """One call, never abandoned half-way: a cancel waits for the call's end
    (an acquire's call lasts at most `poll`), so the connection stays usable
    and the steps then withdraw what the call may have left in line."""
    call = asyncio.ensure_future(source.call(op.op, op.args))
    try:
        if op.limit is None:
            return await asyncio.shield(call)
        try:
            return await asyncio.wait_for(asyncio.shield(call), max(0.0, op.limit))
        except asyncio.TimeoutError:
            call.cancel()  # hung (a partition): the lease is given up anyway
            raise CallTimedOut() from None
    except asyncio.CancelledError:
        if not call.done():
            try:
                await asyncio.wait_for(asyncio.shield(call), 30)
            except BaseException:
                pass
        raise


async def _adrive(steps, source, stop):
    """Carry out steps in asyncio (stop: an asyncio.Event)."""
    value, exc = None, None
    while True:
        try:
            op = steps.throw(exc) if exc is not None else steps.send(value)
        except StopIteration as e:
            return e.value
        value, exc = None, None
        try:
            if isinstance(op, Sleep):
                if stop is None:
                    await asyncio.sleep(op.seconds)
                    value = False
                else:
                    try:
                        await asyncio.wait_for(stop.wait(), op.seconds)
                        value = True
                    except asyncio.TimeoutError:
                        value = False
                continue
            value = await _acall(source, op)
        except BaseException as e:  # CancelledError too: the steps withdraw
            exc = e


# ------------------------------------------------------------- the API

def lock(source, name, *, ttl=30, timeout=None, mode="exclusive", owner=None,
         on_lost=None, poll=0.5):
    """Hold the lock `name` under a lease of `ttl` seconds while the block runs.

    timeout: seconds to wait (None: until granted; 0: try once).  Raises
    Timeout when not granted (nothing left waiting).  Waits in calls of at
    most `poll` seconds that keep the request's place in line, so a pooled
    connection is never held for the whole wait."""
    spec = _Spec(name, op="acquire", try_op="try_acquire", mode=mode, ttl=ttl,
                 timeout=timeout, owner=owner, poll=poll, extra={})
    return Lock(source, spec, on_lost)


def semaphore(source, name, capacity, permits=1, *, ttl=30, timeout=None, owner=None,
              on_lost=None, poll=0.5):
    """Hold `permits` of the counting semaphore `name` (at most `capacity` held)."""
    spec = _Spec(name, op="semaphore", try_op="try_semaphore", mode=None, ttl=ttl,
                 timeout=timeout, owner=owner, poll=poll,
                 extra=dict(capacity=capacity, permits=permits))
    return Lock(source, spec, on_lost)


def leader(source, name, value, *, ttl=30, timeout=None, owner=None, on_lost=None, poll=0.5):
    """Campaign for the election `name` publishing `value`; lead while the block runs.

    The token is the term.  held.proclaim(new_value) publishes another value
    (a coroutine under `async with`)."""
    if timeout == 0:
        raise ValueError("dlock: a campaign cannot be tried without waiting; give a timeout")
    spec = _Spec(name, op="campaign", try_op=None, mode=None, ttl=ttl, timeout=timeout,
                 owner=owner, poll=poll, extra=dict(value=value))
    del spec.args["mode"]
    return Lock(source, spec, on_lost)


def current_leader(source, name):
    """(value, term) of the election's leader, or None; term is None on MySQL."""
    src = _source_of(source)
    try:
        row = src.call("leader", {"name": name})
    finally:
        src.close()
    if row is None or row[0] is None:
        return None
    return row[0], (None if row[1] is None else int(row[1]))
