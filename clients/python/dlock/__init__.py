# SPDX-License-Identifier: PostgreSQL
"""dlock for Python: hold a dlock lease safely.

    with dlock.lock(pool, "orders/42", ttl=30, timeout=5) as held:
        write(fence=held.token)        # LeaseLost at the end if the lease went

    lk = dlock.lock(pool, "orders/42", ttl=30)
    held = lk.acquire(timeout=5)       # None if not granted in time
    ...; lk.renew(); lk.locked(); lk.release()

    @dlock.lock(pool, "nightly", ttl=60)
    def nightly(): ...                 # each call holds the lock

    async with dlock.lock(apool, "orders/42", ttl=30) as held:
        ...                            # cancelled (LeaseLost) if the lease goes

    for leader in dlock.observe(factory, "orders-service"):
        ...                            # (value, term) or None, at each change

The source is a connection pool (psycopg_pool's, psycopg2.pool's), a
factory (a callable returning a new connection), or a connection (psycopg 3
or psycopg2; MySQLdb and PyMySQL connections are not thread-safe, so give
those as a factory).  See clients/python/README.md.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import secrets
import select
import threading
import time
from concurrent.futures import ThreadPoolExecutor, TimeoutError as FutureTimeout
from typing import Any, Callable, Iterator, NamedTuple, NoReturn, Optional, TypeVar

from . import _sql
from ._steps import (Call, CallTimedOut, Refused, Sleep, acquire_steps, lease_margin,
                     release_steps, watch_steps, withdraw_steps)

__version__ = "1.2"

__all__ = ["lock", "semaphore", "leader", "current_leader", "observe", "new_owner", "Lock",
           "Held", "Leader", "Error", "Timeout", "LeaseLost", "DatabaseError",
           "PermissionDenied", "NotInstalled", "__version__"]

F = TypeVar("F", bound=Callable[..., Any])


class Error(Exception):
    """Base of dlock's own errors."""


class Timeout(Error, TimeoutError):
    """Not granted within the timeout; nothing is left waiting."""


class LeaseLost(Error):
    """The lease was lost while the guarded work ran."""


class DatabaseError(Error):
    """The database refused a call or could not be reached.

    `name` is the lock, `code` the SQLSTATE (PostgreSQL) or errno
    (MariaDB/MySQL), `hint` the fix where it is known (else None); the
    driver's error is `__cause__`."""

    def __init__(self, message: str, name: str, code: Any = None,
                 hint: Optional[str] = None) -> None:
        super().__init__(message)
        self.name, self.code, self.hint = name, code, hint


class PermissionDenied(DatabaseError):
    """The account may not call dlock's functions (hint: grant dlock_user)."""


class NotInstalled(DatabaseError):
    """dlock's functions are not there: the PostgreSQL extension is not in
    this database (connect to the one named by dlock.database), or the
    MariaDB/MySQL plugin is not installed."""


_KINDS = {"permission": PermissionDenied, "missing": NotInstalled}


def _wrapped(exc: BaseException, name: str, what: str) -> BaseException:
    """A driver's error as a DatabaseError naming the lock; others as they are."""
    if isinstance(exc, Error) or not _sql.is_driver_error(exc):
        return exc
    kind, code, hint = _sql.diagnose(exc)
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    msg = "dlock: %s of %r failed: %s" % (what, name, first)
    if hint:
        msg += " — hint: " + hint
    return _KINDS.get(kind, DatabaseError)(msg, name, code, hint)


def _reraise(exc: BaseException, name: str, what: str, lost: bool = False) -> NoReturn:
    """Raise exc as dlock reports it (a DatabaseError from the driver's,
    LeaseLost for a refused call on a lost lease), the original as cause."""
    if lost and isinstance(exc, Refused):
        raise LeaseLost("dlock: lease of %r lost: %s" % (name, exc)) from exc
    new = _wrapped(exc, name, what)
    if new is exc:
        raise exc
    raise new from exc


def new_owner() -> str:
    """A fresh owner key: 128 random bits, as dlock_new_owner() makes."""
    return secrets.token_hex(16)


class Leader(NamedTuple):
    """An election's leader: its published value and term (None on MySQL)."""
    value: str
    term: Optional[int]


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

_SPEC_TIMEOUT: Any = object()  # acquire(): the timeout given to lock()


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

    def fresh(self, timeout: Any = None) -> "_Spec":
        """This request for one acquisition: its own key (unless the caller
        gave one) and, when given, another timeout."""
        new = copy.copy(self)
        new.args = dict(self.args)
        if timeout is not _SPEC_TIMEOUT:
            if timeout is not None and timeout < 0:
                raise ValueError("dlock: timeout must be None (wait until granted) or >= 0")
            if timeout == 0 and self.try_op is None:
                raise ValueError("dlock: a campaign cannot be tried without waiting; give a timeout")
            new.timeout = timeout
        if self.own_key:
            new.owner = new.args["owner"] = new_owner()
        return new


class Held:
    """A lease being held: its token, and whether it is lost.

    `token` is the fencing token (a leader's term); pass it to whatever the
    work writes to, so a store can refuse an older holder.  `lost` turns
    True — and `lost_event` is set, `on_lost(held)` called once — when a
    renewal is refused or none succeeded before the lease could end; from
    then on the work must stop."""

    def __init__(self, spec: _Spec, token: int, sent_at: float,
                 on_lost: Optional[Callable[["Held"], None]]) -> None:
        self._spec = spec
        self.name: str = spec.name
        self.owner: str = spec.owner
        self.token: int = token
        self._sent_at = sent_at
        self._deadline = sent_at + spec.ttl - lease_margin(spec.ttl)
        self.lost_event = threading.Event()
        self.lost_reason: Optional[str] = None
        self._on_lost = on_lost
        self._released = False

    @property
    def lost(self) -> bool:
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

    def check(self) -> None:
        """Raise LeaseLost if the lease is lost (for work done in steps)."""
        if self.lost:
            raise LeaseLost("dlock: lease of %r lost: %s" % (self.name, self.lost_reason))

    def proclaim(self, value: str) -> Any:
        """A leader publishes a new value (set by the lock for elections)."""
        raise TypeError("dlock: only a leader proclaims")


class Lock:
    """A lease to hold: `with`/`async with`, acquire()/release(), or a decorator.

    One object holds at most one lease at a time (each acquisition under
    a key of its own gets a fresh key); as a decorator, every call takes
    its own lease, so calls from several threads or tasks are fine."""

    def __init__(self, source: Any, spec: "_Spec", on_lost: Optional[Callable[[Held], None]],
                 raise_on_lost: bool = True) -> None:
        self._source_obj = source
        self._spec = spec
        self._on_lost = on_lost
        self.raise_on_lost = raise_on_lost
        self.held: Optional[Held] = None

    @property
    def name(self) -> str:
        return self._spec.name

    def _copy(self) -> "Lock":
        return Lock(self._source_obj, self._spec, self._on_lost, self.raise_on_lost)

    def _check_free(self) -> None:
        if self.held is not None and not self.held._released:
            raise Error("dlock: %r is already held by this Lock object (token %d): release() "
                        "it first, or use another Lock" % (self._spec.name, self.held.token))

    def _require_held(self) -> Held:
        if self.held is None or self.held._released:
            raise Error("dlock: %r is not held by this Lock object" % self._spec.name)
        return self.held

    def locked(self) -> bool:
        """True while this object holds the lease and it is not known lost
        (not whether anybody else holds the name)."""
        return self.held is not None and not self.held._released and not self.held.lost

    # ---- threads
    def acquire(self, timeout: Any = _SPEC_TIMEOUT) -> Optional[Held]:
        """Wait for the grant (timeout: seconds, None: until granted, 0: try
        once; default: the one given to lock()) and start renewing it.

        Returns the Held (its token), or None when not granted within the
        timeout (nothing left waiting).  Errors of the database come as
        dlock.DatabaseError naming the lock, the driver's error chained."""
        self._check_free()
        spec = self._spec.fresh(timeout)
        source = _source_of(self._source_obj)
        try:
            token, sent_at = _drive(acquire_steps(spec), source, None, None)
        except Exception as e:
            source.close()
            _reraise(e, spec.name, "acquire")
        except BaseException:
            source.close()
            raise
        if token is None:
            source.close()
            return None
        self._source = source
        held = self.held = Held(spec, token, sent_at, self._on_lost)
        held.proclaim = self._proclaim
        self._stop = threading.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="dlock-call")
        self._watcher = threading.Thread(target=self._watch, name="dlock-renew " + spec.name,
                                         daemon=True)
        self._watcher.start()
        return held

    def _watch(self) -> None:
        held = self.held
        why = _drive(watch_steps(held), self._source, self._stop, self._executor)
        if why is not None:
            held._lose(why)

    def _proclaim(self, value: str) -> Any:
        spec = self.held._spec
        try:
            return _call_limited(self._source, self._executor, Call(
                "proclaim", {"name": spec.name, "value": value, "owner": spec.owner}))
        except Exception as e:
            _reraise(e, spec.name, "proclaim", lost=True)

    def renew(self) -> None:
        """Renew the lease now (the watchdog renews every ttl/3 anyway).

        Raises LeaseLost, and marks the lease lost, if the server no longer
        has it or the lease could have ended already."""
        held = self._require_held()
        held.check()
        spec = held._spec
        sent_at = time.monotonic()
        why = None
        try:
            _call_limited(self._source, self._executor, Call(
                "renew", {"name": spec.name, "ttl": spec.ttl, "owner": spec.owner},
                limit=max(0.0, held._deadline - sent_at)))
        except Refused as e:
            why = "the server no longer has the lease (%s)" % e
        except CallTimedOut:
            why = "a renewal did not finish before the lease could end"
        except Exception as e:
            _reraise(e, spec.name, "renew")
        if why is not None:
            held._lose(why)
            held.check()
        held._deadline = max(held._deadline, sent_at + spec.ttl - lease_margin(spec.ttl))

    def release(self) -> bool:
        """Stop renewing and release.  True when the lease was held to the
        end; False when it had been lost (the work was not protected)."""
        held = self._require_held()
        self._stop.set()
        self._watcher.join(held._spec.release_limit)
        _drive(release_steps(held._spec), self._source, None, self._executor)
        self._executor.shutdown(wait=False)
        self._source.close()
        held._released = True
        return not held.lost

    def __enter__(self) -> Held:
        held = self.acquire()
        if held is None:
            raise Timeout("dlock: %r not granted within %s s" % (self._spec.name,
                                                                 self._spec.timeout))
        return held

    def __exit__(self, exc_type, exc, tb) -> bool:
        kept = self.release()
        if not kept and self.raise_on_lost and exc_type is None:
            raise LeaseLost("dlock: lease of %r lost inside the with block: %s"
                            % (self._spec.name, self.held.lost_reason))
        return False

    # ---- asyncio
    async def acquire_async(self, timeout: Any = _SPEC_TIMEOUT) -> Optional[Held]:
        """acquire() for asyncio (held.lost tells of a loss; `async with`
        also cancels the guarded task)."""
        return await self._aacquire(timeout, None)

    async def _aacquire(self, timeout: Any, guarded: "Optional[asyncio.Task]") -> Optional[Held]:
        self._check_free()
        spec = self._spec.fresh(timeout)
        asource = _async_source_of(self._source_obj)
        try:
            token, sent_at = await _adrive(acquire_steps(spec), asource, None)
        except Exception as e:
            await asource.close()
            _reraise(e, spec.name, "acquire")
        except BaseException:
            await asource.close()
            raise
        if token is None:
            await asource.close()
            return None
        self._asource = asource
        held = self.held = Held(spec, token, sent_at, self._on_lost)
        held.proclaim = self._aproclaim
        self._astop = asyncio.Event()
        self._guarded = guarded
        self._cancelled_for_loss = False
        self._watch_task = asyncio.create_task(self._awatch())
        return held

    async def _awatch(self) -> None:
        held = self.held
        why = await _adrive(watch_steps(held), self._asource, self._astop)
        if why is not None and held._lose(why) and self._guarded is not None \
                and not self._astop.is_set():
            self._cancelled_for_loss = True
            self._guarded.cancel()

    async def _aproclaim(self, value: str) -> Any:
        spec = self.held._spec
        try:
            return await self._asource.call("proclaim", {"name": spec.name, "value": value,
                                                         "owner": spec.owner})
        except Exception as e:
            _reraise(e, spec.name, "proclaim", lost=True)

    async def renew_async(self) -> None:
        """renew() for asyncio."""
        held = self._require_held()
        held.check()
        spec = held._spec
        sent_at = time.monotonic()
        try:
            await asyncio.wait_for(self._asource.call(
                "renew", {"name": spec.name, "ttl": spec.ttl, "owner": spec.owner}),
                max(0.0, held._deadline - sent_at))
        except Refused as e:
            held._lose("the server no longer has the lease (%s)" % e)
            held.check()
        except asyncio.TimeoutError:
            held._lose("a renewal did not finish before the lease could end")
            held.check()
        except Exception as e:
            _reraise(e, spec.name, "renew")
        held._deadline = max(held._deadline, sent_at + spec.ttl - lease_margin(spec.ttl))

    async def release_async(self) -> bool:
        """release() for asyncio."""
        held = self._require_held()
        self._astop.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._watch_task), held._spec.release_limit)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            self._watch_task.cancel()
        await _adrive(release_steps(held._spec), self._asource, None)
        await self._asource.close()
        held._released = True
        return not held.lost

    async def __aenter__(self) -> Held:
        held = await self._aacquire(_SPEC_TIMEOUT, asyncio.current_task())
        if held is None:
            raise Timeout("dlock: %r not granted within %s s" % (self._spec.name,
                                                                 self._spec.timeout))
        return held

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        kept = await self.release_async()
        if self._cancelled_for_loss and exc_type is asyncio.CancelledError:
            task = asyncio.current_task()
            if hasattr(task, "uncancel"):
                task.uncancel()
            raise LeaseLost("dlock: lease of %r lost: %s" % (self._spec.name,
                                                            self.held.lost_reason)) from None
        if not kept and self.raise_on_lost and exc_type is None:
            raise LeaseLost("dlock: lease of %r lost inside the async with block: %s"
                            % (self._spec.name, self.held.lost_reason))
        return False

    # ---- a decorator
    def __call__(self, fn: F) -> F:
        """@dlock.lock(source, name, ...): every call runs holding its own lease
        (a coroutine function under `async with`); Timeout or LeaseLost as for `with`."""
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def run_async(*args, **kwargs):
                async with self._copy():
                    return await fn(*args, **kwargs)
            return run_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(*args, **kwargs):
            with self._copy():
                return fn(*args, **kwargs)
        return run  # type: ignore[return-value]


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

def lock(source: Any, name: str, *, ttl: float = 30, timeout: Optional[float] = None,
         mode: str = "exclusive", owner: Optional[str] = None,
         on_lost: Optional[Callable[[Held], None]] = None, poll: float = 0.5,
         raise_on_lost: bool = True) -> Lock:
    """Hold the lock `name` under a lease of `ttl` seconds while the block runs.

    timeout: seconds to wait (None: until granted; 0: try once).  Raises
    Timeout when not granted (nothing left waiting).  Waits in calls of at
    most `poll` seconds that keep the request's place in line, so a pooled
    connection is never held for the whole wait.  raise_on_lost: a `with`
    block whose lease was lost inside it raises LeaseLost as it ends (if
    the block itself raised nothing)."""
    spec = _Spec(name, op="acquire", try_op="try_acquire", mode=mode, ttl=ttl,
                 timeout=timeout, owner=owner, poll=poll, extra={})
    return Lock(source, spec, on_lost, raise_on_lost)


def semaphore(source: Any, name: str, capacity: int, permits: int = 1, *, ttl: float = 30,
              timeout: Optional[float] = None, owner: Optional[str] = None,
              on_lost: Optional[Callable[[Held], None]] = None, poll: float = 0.5,
              raise_on_lost: bool = True) -> Lock:
    """Hold `permits` of the counting semaphore `name` (at most `capacity` held)."""
    spec = _Spec(name, op="semaphore", try_op="try_semaphore", mode=None, ttl=ttl,
                 timeout=timeout, owner=owner, poll=poll,
                 extra=dict(capacity=capacity, permits=permits))
    return Lock(source, spec, on_lost, raise_on_lost)


def leader(source: Any, name: str, value: str, *, ttl: float = 30,
           timeout: Optional[float] = None, owner: Optional[str] = None,
           on_lost: Optional[Callable[[Held], None]] = None, poll: float = 0.5,
           raise_on_lost: bool = True) -> Lock:
    """Campaign for the election `name` publishing `value`; lead while the block runs.

    The token is the term.  held.proclaim(new_value) publishes another value
    (a coroutine under `async with`)."""
    if timeout == 0:
        raise ValueError("dlock: a campaign cannot be tried without waiting; give a timeout")
    spec = _Spec(name, op="campaign", try_op=None, mode=None, ttl=ttl, timeout=timeout,
                 owner=owner, poll=poll, extra=dict(value=value))
    del spec.args["mode"]
    return Lock(source, spec, on_lost, raise_on_lost)


def current_leader(source: Any, name: str) -> Optional[Leader]:
    """(value, term) of the election's leader, or None; term is None on MySQL."""
    src = _source_of(source)
    try:
        row = src.call("leader", {"name": name})
    except Exception as e:
        _reraise(e, name, "leader")
    finally:
        src.close()
    return _leader_of(row)


def _leader_of(row: Any) -> Optional[Leader]:
    if row is None or row[0] is None:
        return None
    return Leader(_text(row[0]), None if row[1] is None else int(row[1]))


# ------------------------------------------------------------- observe

def observe(source: Any, name: str, *, poll: Optional[float] = None,
            listen: Optional[bool] = None,
            stop: Optional[threading.Event] = None) -> Iterator[Optional[Leader]]:
    """The leader of the election `name`, now and at every change: yields
    Leader(value, term) or None (nobody leads), each time it differs from
    the one before.  Ends when `stop` is set (checked at least every poll
    seconds) or when the caller stops iterating (close() frees the
    connection).

    On PostgreSQL with a factory as the source, a connection of its own
    LISTENs on dlock_leader (payload: dlock_notify_key(name)) and the
    leader is read at each notification, and every `poll` seconds (default
    5) in case one was missed.  Otherwise — a pool or a connection as the
    source, MariaDB/MySQL, or a factory whose connections go through a
    pooler (pgbouncer: its port differs from the server's `port` setting;
    or listen=False) — it polls dlock_leader every `poll` seconds (default
    0.5).  listen=True insists on LISTEN.  On MariaDB/MySQL a change is a
    change of the value (no term there)."""
    if not isinstance(name, str) or not name:
        raise ValueError("dlock: the name must be a non-empty string")
    if poll is not None and poll <= 0:
        raise ValueError("dlock: poll must be a positive number of seconds")
    conn = None
    if listen is not False and callable(source) and not hasattr(source, "cursor") \
            and not hasattr(source, "connection") and not hasattr(source, "getconn"):
        try:
            conn = source()
        except Exception as e:
            _reraise(e, name, "observe (connect)")
        if _sql.dialect_of(conn) is not _sql.POSTGRES:
            conn.close()
            conn = None
    return _observe(source, name, poll, listen, stop, conn)


def _observe(source, name, poll, listen, stop, conn):
    src = _source_of(source) if conn is None else None
    notifier = None
    try:
        if conn is not None:
            _autocommit(conn)
            try:
                notifier = _Notifier.start(conn, name, listen)
            except Exception as e:
                _reraise(e, name, "observe (LISTEN dlock_leader)")
            if notifier is None:  # a pooler in between: poll instead
                conn.close()
                conn = None
                src = _source_of(source)
        if poll is None:
            poll = 5.0 if notifier is not None else 0.5
        last = _MISSING = object()
        while stop is None or not stop.is_set():
            try:
                if notifier is not None:
                    row = _run(notifier.conn, "leader", {"name": name})
                else:
                    row = src.call("leader", {"name": name})
            except Exception as e:
                _reraise(e, name, "observe")
            now = _leader_of(row)
            if last is _MISSING or now != last:
                last = now
                yield now
            if notifier is not None:
                try:
                    notifier.wait(poll, stop)
                except Exception as e:
                    _reraise(e, name, "observe (waiting for NOTIFY)")
            elif stop is not None:
                stop.wait(poll)
            else:
                time.sleep(poll)
    finally:
        if src is not None:
            src.close()
        for c in (conn, notifier and notifier.conn):
            if c is not None:
                try:
                    c.close()
                except Exception:
                    pass


class _Notifier:
    """LISTEN dlock_leader on a PostgreSQL connection of the observer's own."""

    def __init__(self, conn, key):
        self.conn, self.key = conn, key
        self.heard = []
        if hasattr(conn, "add_notify_handler"):  # psycopg 3: those read during a query
            conn.add_notify_handler(lambda n: self.heard.append(n.payload))

    @classmethod
    def start(cls, conn, name, listen):
        """A notifier, or None when a pooler stands between (LISTEN would
        be lost with the server connection it ran on)."""
        if listen is None and not _sql.direct_to_server(conn):
            return None
        key = _run(conn, "notify_key", {"name": name})
        cur = conn.cursor()
        try:
            cur.execute("LISTEN dlock_leader")
        finally:
            cur.close()
        return cls(conn, key)

    def _drain(self):
        if hasattr(self.conn, "pgconn"):  # psycopg 3
            self.conn.pgconn.consume_input()
            while True:
                n = self.conn.pgconn.notifies()
                if n is None:
                    break
                self.heard.append(n.extra.decode("utf-8"))
        else:  # psycopg2
            self.conn.poll()
            self.heard.extend(n.payload for n in self.conn.notifies)
            del self.conn.notifies[:]

    def wait(self, seconds, stop):
        """Until a notification names this election, or `seconds` pass."""
        end = time.monotonic() + seconds
        while True:
            self._drain()
            mine = self.key in self.heard
            self.heard.clear()
            left = end - time.monotonic()
            if mine or left <= 0 or (stop is not None and stop.is_set()):
                return
            # a stop is seen within 0.2 s; a notification at once
            select.select([self.conn.fileno()], [], [], min(left, 0.2 if stop else left))
