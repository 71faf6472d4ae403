#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/matrix.sh [--quick] [--only ROW,...] — `make matrix`: build and test
# dlock on every supported server version, from Debian's archive only.
#
#   row         system                      PostgreSQL   MariaDB
#   host        this machine (Debian 12)    15           10.11
#   trixie      Debian 13, a chroot         17           11.8
#   sid         Debian unstable, a chroot   18           sid's, when its upstream
#                                                        release differs from trixie's
#
# The chroots are made once with `debootstrap --variant=minbase` and kept in
# ${DLOCK_MATRIX_CACHE:-/var/cache/dlock-matrix}/<suite> (built in
# <suite>.tmp and renamed when complete: an interrupted build is made anew);
# each run installs what is missing there with the tree's scripts/deps.sh
# (services never start: /usr/sbin/policy-rc.d exits 101; sid's Release may
# be past its Valid-Until, which apt is told to allow there only), mounts
# /proc, a tmpfs on /dev/shm and a devpts, copies the working tree (with
# uncommitted changes, without .git and build products) to /srv/dlock and
# builds and tests there.  The host's row runs on a copy of the tree too,
# with a private copy of PostgreSQL 15 (scripts/private_pg.sh), so that the
# system's pkglibdir is not touched; the MariaDB suites install the plugin
# into the system plugin_dir as `make check` does.
#
# Per system: make -C core check (on the PostgreSQL row); per PostgreSQL
# version: the build, pg_regress (scripts/pg_regress.sh), the multi-session
# scenarios, the restart suite, the fuzzer and the quick torture run
# (regress/torture/run.sh --quick --no-patroni: fuzz, torture, torture-ha);
# per MariaDB version: the build, the mysql-test suite (regress/mysql/run.sh)
# and the quick torture run (regress/torture/mysql_torture.py --quick).
# --quick (make matrix QUICK=1): the builds, pg_regress, the scenarios and
# the mysql-test suite only.  --only host,trixie,...: those rows (the others
# are listed as not run and count as failed).
#
# Ports (beside make check's 5492-5497, 5566, 5588, 5591-5593, 3402-3404,
# 3491-3493, 3520-3530): row i (host 0, trixie 1, sid 2) uses PostgreSQL
# 56i0 (cluster), 56i1 (restart; +100..+102 → 57i1-57i3), 56i2 and 56i3
# (torture), MariaDB 36i0 (mysql torture) and mariadb-test-run's build thread
# 20i (ports 16000 + 30·i ...).
#
# Prints each suite's result as it ends (the log's tail when it failed), one
# table version × suite, the timings, and last "N passed, M failed" (suite
# runs); exits non-zero on any failure.  Servers are stopped by pid and the
# mounts undone on every exit path, also when interrupted.  Logs of a failed
# run are kept (the path is printed).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${DLOCK_MATRIX_CACHE:-/var/cache/dlock-matrix}
MIRROR=${DLOCK_MATRIX_MIRROR:-http://deb.debian.org/debian}
CHROOT_SRC=/srv/dlock          # the tree inside a chroot
CHROOT_OUT=/srv/dlock-out      # its results and logs
CHROOT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# ---------------------------------------------------------------------------
# inside a system: run one row's suites and write their results
#   matrix.sh --inside pg|mariadb OUTDIR SUITE...
# environment: MATRIX_PORT (the row's first port), MATRIX_MTR_THREAD
# results: OUTDIR/results, one line per cell:
#   cell <TAB> ok|FAIL <TAB> passed <TAB> failed <TAB> seconds <TAB> note
# ---------------------------------------------------------------------------
inside() {
    local kind=$1 out=$2; shift 2
    mkdir -p "$out"; chmod 755 "$out"
    : > "$out/results"
    cd "$ROOT" || exit 1
    local port=${MATRIX_PORT:?}
    TMP_ROW=$(mktemp -d /tmp/dlock-matrix-row.XXXXXX); chmod 755 "$TMP_ROW"
    local tmp=$TMP_ROW
    # the cluster of pg_regress and the scenarios, stopped on every exit
    # path (the other suites stop their own servers)
    RUN_PID=
    # (a second signal must not cut this short)
    trap 'trap "" INT TERM; "$ROOT/scripts/pg_cluster.sh" stop "$TMP_ROW/pg" >/dev/null 2>&1; rm -rf "$TMP_ROW"' EXIT
    # interrupted, or ended by make matrix: end the running suite (timeout
    # passes the signal on), whose own traps stop its servers
    trap 'trap "" INT TERM; [ -n "$RUN_PID" ] && kill -TERM "$RUN_PID" 2>/dev/null; wait; exit 143' TERM
    trap 'trap "" INT TERM; [ -n "$RUN_PID" ] && kill -TERM "$RUN_PID" 2>/dev/null; wait; exit 130' INT

    record() {  # cell status passed failed seconds note
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "${6:-}" >> "$out/results"
        local shown="$3 passed, $4 failed"
        [ "$2" == ok ] || shown="FAILED: $shown"
        printf '  %-14s %s (%d s)%s\n' "$1" "$shown" "$5" "${6:+ - $6}"
    }
    # summary CELL LOG RC SECONDS PREFIX...: the cell from the lines
    # "PREFIX: N passed, M failed" of LOG (summed); none, or a non-zero
    # exit without a failure counted, is a failure
    summary() {
        local cell=$1 log=$2 rc=$3 secs=$4; shift 4
        local p=0 f=0 found=0 pre line
        for pre in "$@"; do
            line=$(grep -E "^$pre: [0-9]+ passed, [0-9]+ failed" "$log" | tail -1)
            [ -n "$line" ] || continue
            found=1
            p=$((p + $(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')))
            f=$((f + $(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')))
        done
        if [ $found -eq 0 ]; then
            record "$cell" FAIL "$p" 1 "$secs" "no '$1: N passed, M failed' line (exit $rc)"
            tail -40 "$log" | sed 's/^/    | /'
        elif [ "$f" -gt 0 ] || [ "$rc" -ne 0 ]; then
            local why
            why=$(first_failure "$log")
            [ "$f" -gt 0 ] || { f=1; why="exit $rc${why:+; $why}"; }
            record "$cell" FAIL "$p" "$f" "$secs" "$why"
            tail -40 "$log" | sed 's/^/    | /'
        else
            record "$cell" ok "$p" 0 "$secs"
        fi
    }
    # the first line of LOG that names a failure, shortened
    first_failure() {
        grep -m1 -E '^ *(FAIL|not ok|VIOLATION)|\[ (fail|retry-fail) \]|\.\.\. FAILED|ERROR [0-9]+|[Ee]rror:' "$1" |
            sed -E 's/^ +//; s/[[:space:]]+/ /g' | cut -c1-160
    }
    # run CELL TIMEOUT CMD...: the command's output into OUTDIR/CELL.log
    run() {
        local cell=$1 limit=$2; shift 2
        local t0=$SECONDS rc
        # in the background: a TERM is handled at once
        timeout -k 30 "$limit" "$@" > "$out/$cell.log" 2>&1 < /dev/null &
        RUN_PID=$!; wait $RUN_PID; rc=$?; RUN_PID=
        [ $rc -eq 124 ] && echo "matrix: timed out after $limit s" >> "$out/$cell.log"
        LAST_RC=$rc; LAST_SECS=$((SECONDS - t0))
    }
    not_run() {  # CELL REASON: a suite that cannot run counts as failed
        record "$1" FAIL 0 1 0 "not run: $2"
    }
    want() { local s; for s in "${SUITES[@]}"; do [ "$s" == "$1" ] && return 0; done; return 1; }
    SUITES=("$@")

    if [ "$kind" == pg ]; then
        echo "  $("${PG_CONFIG:-pg_config}" --version 2>/dev/null), pg_config $(command -v "${PG_CONFIG:-pg_config}")"
        if want core; then
            run core 1800 make -C core check
            summary core "$out/core.log" $LAST_RC $LAST_SECS core lm service fuzz-lm model
        fi
        local built=1
        run build 900 sh -c 'make -C pg_ext && make -C pg_ext install'
        if [ $LAST_RC -eq 0 ]; then
            record build ok 1 0 $LAST_SECS
        else
            built=0
            record build FAIL 0 1 $LAST_SECS "make -C pg_ext install: exit $LAST_RC; $(first_failure "$out/build.log")"
            tail -40 "$out/build.log" | sed 's/^/    | /'
        fi
        local cluster=0
        if [ $built -eq 1 ] && { want pg_regress || want scenarios; }; then
            if "$ROOT/scripts/pg_cluster.sh" start "$tmp/pg" "$port" > "$out/cluster.log" 2>&1; then
                cluster=1
            else
                sed 's/^/    | /' "$out/cluster.log"
            fi
        fi
        local s
        for s in pg_regress scenarios; do
            want $s || continue
            if [ $built -eq 0 ]; then not_run $s "the build failed"; continue; fi
            if [ $cluster -eq 0 ]; then not_run $s "the cluster did not start (cluster.log)"; continue; fi
            if [ $s == pg_regress ]; then
                PGHOST=$tmp/pg PGPORT=$port run pg_regress 900 "$ROOT/scripts/pg_regress.sh" "$tmp/regress"
            else
                PGHOST=$tmp/pg PGPORT=$port PGUSER=postgres PGDATABASE=postgres \
                    run scenarios 1200 /usr/bin/python3 regress/scenarios/run.py
            fi
            summary $s "$out/$s.log" $LAST_RC $LAST_SECS $s
        done
        [ $cluster -eq 1 ] && "$ROOT/scripts/pg_cluster.sh" stop "$tmp/pg"
        if want restart; then
            if [ $built -eq 0 ]; then not_run restart "the build failed"
            else
                RESTART_PORT=$((port + 1)) run restart 1500 regress/restart/run.sh
                summary restart "$out/restart.log" $LAST_RC $LAST_SECS restart
            fi
        fi
        if want torture; then
            if [ $built -eq 0 ]; then
                for s in fuzz torture torture-ha; do not_run $s "the build failed"; done
            else
                TORTURE_PORT=$((port + 2)) TORTURE_PORT2=$((port + 3)) \
                    run torture 1500 regress/torture/run.sh --quick --no-patroni
                # one exit code for three summaries: it counts against the
                # last one only when none of them counted a failure
                local rc=$LAST_RC
                grep -qE '^(fuzz|torture|torture-ha): [0-9]+ passed, [1-9][0-9]* failed' "$out/torture.log" && rc=0
                for s in fuzz torture; do
                    summary $s "$out/torture.log" 0 $LAST_SECS $s
                done
                summary torture-ha "$out/torture.log" $rc $LAST_SECS torture-ha
            fi
        fi
        if want packages; then
            if [ $built -eq 0 ]; then not_run packages "the build failed"
            else
                # this system's packages built (make deb), installed, used, purged
                PACKAGES_PG_PORT=$((port + 4)) PACKAGES_MY_PORT=$((port - 2000 + 5)) \
                    run packages 1500 regress/packages/run.sh
                summary packages "$out/packages.log" $LAST_RC $LAST_SECS packages
            fi
        fi
    else
        echo "  $(mariadbd --version 2>/dev/null | sed -E 's/^.*Ver //')"
        local built=1
        run build 600 make -C mysql_udf all
        if [ $LAST_RC -eq 0 ]; then
            record build ok 1 0 $LAST_SECS
        else
            built=0
            record build FAIL 0 1 $LAST_SECS "make -C mysql_udf: exit $LAST_RC; $(first_failure "$out/build.log")"
            tail -40 "$out/build.log" | sed 's/^/    | /'
        fi
        if want mysql; then
            if [ $built -eq 0 ]; then not_run mysql "the build failed"
            else
                MTR_BUILD_THREAD=${MATRIX_MTR_THREAD:?} run mysql 1800 regress/mysql/run.sh
                summary mysql "$out/mysql.log" $LAST_RC $LAST_SECS mysql
            fi
        fi
        if want mysql-torture; then
            if [ $built -eq 0 ]; then not_run mysql-torture "the build failed"
            else
                run mysql-torture 900 /usr/bin/python3 regress/torture/mysql_torture.py --quick --port "$port"
                summary mysql-torture "$out/mysql-torture.log" $LAST_RC $LAST_SECS mysql-torture
            fi
        fi
    fi
}

if [ "${1:-}" == "--inside" ]; then
    shift
    inside "$@"
    exit 0
fi

# ---------------------------------------------------------------------------
# the matrix
# ---------------------------------------------------------------------------
ARGS=("$@")
QUICK=0
DEB=0
ONLY=
while [ $# -gt 0 ]; do
    case $1 in
    --quick) QUICK=1 ;;
    --deb) DEB=1 ;;
    --only) ONLY=${2:?--only ROW,...}; shift ;;
    --only=*) ONLY=${1#--only=} ;;
    *) echo "usage: matrix.sh [--quick | --deb] [--only host,trixie,sid]" >&2; exit 2 ;;
    esac
    shift
done
[ "$(id -u)" -eq 0 ] || { echo "matrix.sh: run as root (debootstrap, chroot, mount)" >&2; exit 2; }

# Every process this script starts stays its descendant, also a server that
# daemonizes (pg_ctl's postmaster, a setsid mariadbd): the script makes
# itself a child subreaper, so that on any exit it finds them by pid.
if [ -z "${DLOCK_MATRIX_SUBREAPER:-}" ]; then
    export DLOCK_MATRIX_SUBREAPER=$$
    exec /usr/bin/python3 -c '
import ctypes, os, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER, kept across execve
os.execv("/bin/bash", ["/bin/bash"] + sys.argv[1:])' "$0" ${ARGS[@]+"${ARGS[@]}"}
fi

mkdir -p "$CACHE"
exec 9> "$CACHE/.lock"
flock -n 9 || { echo "matrix.sh: another make matrix is running (lock $CACHE/.lock)" >&2; exit 1; }

START=$SECONDS
WORK=$(mktemp -d /tmp/dlock-matrix.XXXXXX)
chmod 755 "$WORK"
LOGS=$WORK/logs
mkdir -p "$LOGS"
CELLS=$WORK/cells        # row <TAB> cell <TAB> status <TAB> passed <TAB> failed <TAB> seconds <TAB> note
: > "$CELLS"
TIMES=$WORK/times        # what <TAB> seconds
: > "$TIMES"
CURRENT=                 # the pid of the row or step running now

# descendants PID: every process below PID
descendants() {
    ps -e -o pid=,ppid= | awk -v root="$1" '
        { parent[$1] = $2 }
        END {
            mine[root] = 1; more = 1
            while (more) {
                more = 0
                for (p in parent) if (!(p in mine) && (parent[p] in mine)) { mine[p] = 1; more = 1 }
            }
            for (p in mine) if (p != root) print p
        }'
}
# the processes whose root directory is inside the cache (a chroot's)
chrooted() {
    local p r
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        case "$r" in "$CACHE"/*) echo "${p#/proc/}" ;; esac
    done
}
# stop every process left: servers first (a postmaster by SIGQUIT, an
# immediate shutdown; mariadbd by SIGTERM), then the rest; SIGKILL after 15 s
stop_processes() {
    local pids p comm left
    pids=$( { descendants $$; chrooted; } | sort -un)
    pids=$(for p in $pids; do [ "$p" != "$BASHPID" ] && kill -0 "$p" 2>/dev/null && echo "$p"; done)
    [ -n "$pids" ] || return 0
    for p in $pids; do
        comm=$(cat "/proc/$p/comm" 2>/dev/null)
        case "$comm" in
        postgres)
            # the postmaster: its parent is not a postgres process
            [ "$(cat "/proc/$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)/comm" 2>/dev/null)" != postgres ] &&
                kill -QUIT "$p" 2>/dev/null ;;
        mariadbd|mysqld) kill -TERM "$p" 2>/dev/null ;;
        esac
    done
    sleep 1
    for p in $pids; do kill -TERM "$p" 2>/dev/null; done
    for _ in $(seq 30); do
        left=$(for p in $pids; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
        [ -n "$left" ] || return 0
        sleep 0.5
    done
    for p in $left; do
        echo "matrix: SIGKILL of $p ($(tr '\0' ' ' 2>/dev/null < "/proc/$p/cmdline" | cut -c1-100))"
        kill -KILL "$p" 2>/dev/null
    done
    sleep 0.5
}
# undo every mount below the cache (ours, or debootstrap's if it was
# interrupted), deepest first
unmount_all() {
    local m
    findmnt -rn -o TARGET | grep -F "$CACHE/" | awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2- |
    while read -r m; do
        m=$(printf '%b' "$m")  # findmnt -r escapes blanks as \x20
        umount "$m" 2>/dev/null || { echo "matrix: $m busy, lazy unmount"; umount -l "$m"; }
    done
}
cleanup() {
    local rc=$?
    trap '' INT TERM
    trap - EXIT
    # the running row first: its runner ends its suite, whose own traps
    # stop its servers; then whatever is left, by pid
    local p runners=
    for p in $(descendants $$); do
        tr '\0' ' ' 2>/dev/null < "/proc/$p/cmdline" | grep -q 'matrix.sh --inside ' && runners="$runners $p"
    done
    [ -n "$CURRENT" ] && kill -TERM "$CURRENT" 2>/dev/null
    for p in $runners; do kill -TERM "$p" 2>/dev/null; done
    for _ in $(seq 60); do
        local alive=
        for p in $runners; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -n "$alive" ] || break
        sleep 0.5
    done
    stop_processes
    unmount_all
    if findmnt -rn -o TARGET | grep -qF "$CACHE/"; then
        echo "matrix: mounts left behind:"; findmnt -rn -o TARGET | grep -F "$CACHE/"
        rc=1
    fi
    if [ "${KEEP_LOGS:-0}" -eq 1 ] || [ $rc -ne 0 ]; then
        rm -rf "$WORK/host" "$WORK/host-pg"
        echo "matrix: logs kept in $LOGS"
    else
        rm -rf "$WORK"
    fi
    exit $rc
}
trap cleanup EXIT
trap 'echo "matrix: interrupted"; exit 130' INT TERM
# leftovers of a run that was killed (no trap ran): processes in the
# chroots, mounts below the cache
stop_processes
unmount_all

# bg CMD...: run in the background and wait, so that a signal is handled at
# once (the step is ended by cleanup)
bg() {
    "$@" 9>&- &
    CURRENT=$!
    wait $CURRENT; local rc=$?
    CURRENT=
    return $rc
}
timing() { printf '%s\t%d\n' "$1" "$2" >> "$TIMES"; }
add_cell() {  # row cell status passed failed seconds note
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$CELLS"
}

# ---------------------------------------------------------------------------
# the systems
# ---------------------------------------------------------------------------
# in_chroot SUITE CMD...: a command in that chroot, clean environment
in_chroot() {
    local r=$CACHE/$1; shift
    chroot "$r" /usr/bin/env -i PATH=$CHROOT_PATH HOME=/root LANG=C.UTF-8 LC_ALL=C.UTF-8 \
        TERM=dumb DEBIAN_FRONTEND=noninteractive "$@"
}
# mount_chroot SUITE: /proc, a tmpfs on /dev/shm, a private devpts
mount_chroot() {
    local r=$CACHE/$1
    mountpoint -q "$r/proc" || mount -t proc proc "$r/proc" || return 1
    mkdir -p "$r/dev/shm" "$r/dev/pts"
    mountpoint -q "$r/dev/shm" || mount -t tmpfs -o mode=1777,nosuid,nodev shm "$r/dev/shm" || return 1
    mountpoint -q "$r/dev/pts" || mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$r/dev/pts" || return 1
}
# prepare SUITE PG_MAJOR [PACKAGE...]: the chroot, made if absent, set up,
# with the packages (deps.sh's for PG_MAJOR, and PACKAGE...) and the tree
prepare() {
    local suite=$1 major=$2; shift 2
    local r=$CACHE/$suite log=$LOGS/prepare-$suite.log t0=$SECONDS
    : > "$log"
    if [ ! -d "$r" ]; then
        echo "  debootstrap --variant=minbase $suite (log $log)"
        rm -rf "$r.tmp"
        command -v debootstrap >/dev/null ||
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } >> "$log" 2>&1 ||
            { echo "  could not install debootstrap"; return 1; }
        debootstrap --variant=minbase "$suite" "$r.tmp" "$MIRROR" >> "$log" 2>&1 ||
            { echo "  debootstrap failed:"; tail -20 "$log" | sed 's/^/    | /'; unmount_all; return 1; }
        unmount_all
        mv "$r.tmp" "$r" || return 1
        timing "debootstrap $suite" $((SECONDS - t0))
    fi
    # services never start; no recommended packages; sid's Release may be
    # past its Valid-Until (a snapshot), allowed there only
    printf '#!/bin/sh\n# make matrix: no service starts in this chroot\nexit 101\n' > "$r/usr/sbin/policy-rc.d"
    chmod 755 "$r/usr/sbin/policy-rc.d"
    {
        echo 'APT::Install-Recommends "false";'
        echo 'APT::Install-Suggests "false";'
        echo 'Acquire::Languages "none";'
        [ "$suite" == sid ] && echo 'Acquire::Check-Valid-Until "false";'
    } > "$r/etc/apt/apt.conf.d/99dlock-matrix"
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$r/etc/hosts"
    cp -L /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null
    mount_chroot "$suite" || { echo "  mounting /proc, /dev/shm, /dev/pts failed"; return 1; }
    # leftovers of an interrupted run
    rm -rf "$r/tmp/"dlock* "$r/tmp/"dlockmtr* "$r$CHROOT_OUT"
    copy_tree "$r$CHROOT_SRC" || { echo "  copying the tree failed"; return 1; }
    local t1=$SECONDS
    in_chroot "$suite" dpkg --configure -a >> "$log" 2>&1
    if ! in_chroot "$suite" env DLOCK_PG_MAJOR="$major" "$CHROOT_SRC/scripts/deps.sh" \
            procps iproute2 "$@" >> "$log" 2>&1; then
        echo "  installing the packages failed:"; tail -20 "$log" | sed 's/^/    | /'
        return 1
    fi
    grep -q '^installing:' "$log" && timing "packages $suite" $((SECONDS - t1))
    return 0
}
# copy_tree DEST: the working tree, uncommitted changes included, without
# .git and build products
copy_tree() {
    local dest=$1
    rm -rf "$dest"; mkdir -p "$dest"; chmod 755 "$dest"
    if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$ROOT" && git ls-files -z -c -o --exclude-standard |
            tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$dest"
    else
        (cd "$ROOT" && tar --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - .) |
            tar -xf - -C "$dest"
    fi
}
# apt's candidate version of a package in a chroot
candidate() {
    in_chroot "$1" apt-cache policy "$2" 2>/dev/null | awk '$1 == "Candidate:" { print $2 }'
}
upstream() { echo "$1" | sed -E 's/^[0-9]+://; s/[-+].*$//'; }

MY_PACKAGES=(mariadb-server mariadb-client mariadb-test libmariadb-dev libmariadbd-dev python3-mysqldb)

# ---------------------------------------------------------------------------
# the rows
# ---------------------------------------------------------------------------
ROWS=()          # row ids in table order
declare -A LABEL SYSTEM KIND NOTE
if [ $DEB -eq 1 ]; then
    # make deb: each chroot's packages, built and tried there (the host's:
    # scripts/deb.sh)
    PG_SUITES=(packages)
    MY_SUITES=()
elif [ $QUICK -eq 1 ]; then
    PG_SUITES=(pg_regress scenarios)
    MY_SUITES=(mysql)
else
    PG_SUITES=(core pg_regress scenarios restart torture packages)
    MY_SUITES=(mysql mysql-torture)
fi
PG_CELLS=(core build pg_regress scenarios restart fuzz torture torture-ha packages)
MY_CELLS=(build mysql mysql-torture)
selected() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }

# run_row ROW SYSTEM KIND INDEX: one row's suites, on the host or in a chroot
run_row() {
    local row=$1 sys=$2 kind=$3 i=$4 t0=$SECONDS suites out rc
    if [ "$kind" == pg ]; then suites=("${PG_SUITES[@]}"); else suites=("${MY_SUITES[@]}"); fi
    # the host's packages are make check's packages suite: this row runs a
    # private PostgreSQL, and dpkg would install into the system's
    [ "$sys" == host ] && suites=("${suites[@]/packages}")
    printf '\n=== %s (%s) (at %d s)\n' "${LABEL[$row]}" "$sys" $((SECONDS - START))
    local env=(MATRIX_PORT=$((5600 + 10 * i)) MATRIX_MTR_THREAD=$((200 + i)))
    [ "$kind" == mariadb ] && env[0]=MATRIX_PORT=$((3600 + 10 * i))
    if [ "$sys" == host ]; then
        out=$LOGS/$row
        (cd "$WORK/host" && exec env "${env[@]}" PG_CONFIG="$HOST_PG_CONFIG" \
            bash scripts/matrix.sh --inside "$kind" "$out" "${suites[@]}") 9>&- &
        CURRENT=$!; wait $CURRENT; rc=$?; CURRENT=
    else
        out=$CACHE/$sys$CHROOT_OUT/$row
        in_chroot "$sys" env "${env[@]}" DLOCK_PG_MAJOR="$PG_MAJOR_OF_SYS" \
            bash "$CHROOT_SRC/scripts/matrix.sh" --inside "$kind" "$CHROOT_OUT/$row" "${suites[@]}" 9>&- &
        CURRENT=$!; wait $CURRENT; rc=$?; CURRENT=
        mkdir -p "$LOGS/$row"; cp -a "$out/." "$LOGS/$row/" 2>/dev/null
        # the packages the packages suite built there, for make deb
        if ls "$CACHE/$sys$CHROOT_SRC/deb/"*.deb >/dev/null 2>&1; then
            mkdir -p "$ROOT/deb/$sys"
            cp -a "$CACHE/$sys$CHROOT_SRC/deb/"*.deb "$ROOT/deb/$sys/"
        fi
        out=$LOGS/$row
    fi
    if [ -f "$out/results" ]; then
        while IFS=$'\t' read -r cell st p f s note; do
            add_cell "$row" "$cell" "$st" "$p" "$f" "$s" "$note"
        done < "$out/results"
    fi
    [ "$rc" -eq 0 ] || add_cell "$row" row FAIL 0 1 0 "the row's runner ended with exit $rc"
    timing "${LABEL[$row]} ($sys)" $((SECONDS - t0))
}
# row_failed ROW REASON: every cell of a row that could not run
row_failed() {
    local row=$1 reason=$2 cells c
    if [ "${KIND[$row]}" == pg ]; then cells=("${PG_CELLS[@]}"); else cells=("${MY_CELLS[@]}"); fi
    for c in "${cells[@]}"; do
        is_run "$row" "$c" && add_cell "$row" "$c" FAIL 0 1 0 "not run: $reason"
    done
}
# is_run ROW CELL: does this mode run that cell
is_run() {
    local c=$2 s list
    [ "$c" == build ] && return 0
    if [ "${KIND[$1]}" == pg ]; then list=("${PG_SUITES[@]}"); else list=("${MY_SUITES[@]}"); fi
    case "$c" in fuzz|torture-ha) c=torture ;; esac
    for s in "${list[@]}"; do [ "$s" == "$c" ] && return 0; done
    return 1
}

echo "make matrix$([ $QUICK -eq 1 ] && echo " (QUICK=1: build, pg_regress, scenarios, mysql-test)"): cache $CACHE, logs $LOGS"

# --- the host: PostgreSQL 15, MariaDB 10.11 --------------------------------
ROWS+=(host-pg host-my)
SYSTEM[host-pg]=host; KIND[host-pg]=pg
SYSTEM[host-my]=host; KIND[host-my]=mariadb
LABEL[host-pg]="PostgreSQL 15"; LABEL[host-my]="MariaDB 10.11"
if selected host && [ $DEB -eq 0 ]; then
    printf '\n=== host: dependencies, a copy of the tree, a private PostgreSQL 15\n'
    t0=$SECONDS
    ok=1
    bg env DLOCK_PG_MAJOR=15 "$ROOT/scripts/deps.sh" debootstrap > "$LOGS/prepare-host.log" 2>&1 || ok=0
    copy_tree "$WORK/host" || ok=0
    HOST_PG_CONFIG=$(env -u PG_CONFIG "$WORK/host/scripts/private_pg.sh" "$WORK/host-pg" 2>> "$LOGS/prepare-host.log") || ok=0
    [ -n "$HOST_PG_CONFIG" ] && LABEL[host-pg]=$("$HOST_PG_CONFIG" --version 2>/dev/null | sed 's/ (.*//')
    v=$(mariadbd --version 2>/dev/null | sed -nE 's/.*Ver ([0-9.]+)-MariaDB.*/\1/p')
    [ -n "$v" ] && LABEL[host-my]="MariaDB $v"
    timing "host set-up" $((SECONDS - t0))
    if [ $ok -eq 1 ]; then
        run_row host-pg host pg 0
        run_row host-my host mariadb 0
    else
        tail -20 "$LOGS/prepare-host.log" | sed 's/^/    | /'
        row_failed host-pg "the host's set-up failed (prepare-host.log)"
        row_failed host-my "the host's set-up failed (prepare-host.log)"
    fi
fi

# --- Debian 13 trixie: PostgreSQL 17, MariaDB 11.8 -------------------------
# --- Debian sid: PostgreSQL 18, MariaDB if its release differs from trixie's
ROWS+=(trixie-pg trixie-my sid-pg sid-my)
SYSTEM[trixie-pg]=trixie; KIND[trixie-pg]=pg; LABEL[trixie-pg]="PostgreSQL 17"
SYSTEM[trixie-my]=trixie; KIND[trixie-my]=mariadb; LABEL[trixie-my]="MariaDB 11.8"
SYSTEM[sid-pg]=sid; KIND[sid-pg]=pg; LABEL[sid-pg]="PostgreSQL 18"
SYSTEM[sid-my]=sid; KIND[sid-my]=mariadb; LABEL[sid-my]="MariaDB (sid)"
TRIXIE_MY=
i=0
for sys in trixie sid; do
    i=$((i + 1))
    selected "$sys" || continue
    if [ $sys == trixie ]; then PG_MAJOR_OF_SYS=17; else PG_MAJOR_OF_SYS=18; fi
    printf '\n=== %s: the Debian system, its packages, the tree (at %d s)\n' "$sys" $((SECONDS - START))
    t0=$SECONDS
    # MariaDB in sid only when its upstream release differs from trixie's
    my=$((1 - DEB))
    prepare_args=("${MY_PACKAGES[@]}")
    if [ $sys == sid ]; then
        bg prepare sid 18 || { row_failed sid-pg "the sid system could not be prepared"
                               row_failed sid-my "the sid system could not be prepared"; unmount_all; continue; }
        sid_my=$(candidate sid mariadb-server)
        [ -n "$TRIXIE_MY" ] || TRIXIE_MY=$( [ -d "$CACHE/trixie" ] && candidate trixie mariadb-server)
        if [ -n "$sid_my" ] && [ -n "$TRIXIE_MY" ] && [ "$(upstream "$sid_my")" == "$(upstream "$TRIXIE_MY")" ]; then
            my=0
            LABEL[sid-my]="MariaDB $(upstream "$sid_my")"
            NOTE[sid-my]="not run: sid's MariaDB is trixie's upstream release ($sid_my in sid, $TRIXIE_MY in trixie)"
            echo "  sid's mariadb-server $sid_my is trixie's upstream release ($TRIXIE_MY): MariaDB is tested on trixie only"
        else
            echo "  sid's mariadb-server ${sid_my:-?}, trixie's ${TRIXIE_MY:-?}: MariaDB tested in sid too"
            bg prepare sid 18 "${MY_PACKAGES[@]}" ||
                { row_failed sid-my "its packages could not be installed"; my=0; }
        fi
    else
        bg prepare trixie 17 "${prepare_args[@]}" ||
            { row_failed trixie-pg "the trixie system could not be prepared"
              row_failed trixie-my "the trixie system could not be prepared"; unmount_all; continue; }
        TRIXIE_MY=$(candidate trixie mariadb-server)
    fi
    timing "$sys set-up" $((SECONDS - t0))
    v=$(in_chroot $sys pg_config --version 2>/dev/null | sed 's/ (.*//')
    [ -n "$v" ] && LABEL[$sys-pg]=$v
    run_row "$sys-pg" $sys pg $i
    if [ $my -eq 1 ]; then
        v=$(in_chroot $sys mariadbd --version 2>/dev/null | sed -nE 's/.*Ver ([0-9.]+)-MariaDB.*/\1/p')
        [ -n "$v" ] && LABEL[$sys-my]="MariaDB $v"
        run_row "$sys-my" $sys mariadb $i
    fi
    stop_processes
    unmount_all
done
for row in "${ROWS[@]}"; do
    selected "${SYSTEM[$row]}" || row_failed "$row" "not selected (--only $ONLY)"
done

# ---------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------
ALL_CELLS=(core build pg_regress scenarios restart fuzz torture torture-ha packages mysql mysql-torture)
printf '\n=== the matrix (%s)\n' "$([ $QUICK -eq 1 ] && echo "QUICK=1" || echo full)"
{
    printf '%-22s %-7s' version system
    for c in "${ALL_CELLS[@]}"; do printf ' %-11s' "$c"; done
    printf '\n'
    for row in "${ROWS[@]}"; do
        printf '%-22s %-7s' "${LABEL[$row]}" "${SYSTEM[$row]}"
        for c in "${ALL_CELLS[@]}"; do
            line=$(awk -F'\t' -v r="$row" -v c="$c" '$1 == r && $2 == c' "$CELLS" | tail -1)
            if [ -n "$line" ]; then
                IFS=$'\t' read -r _ _ st p f _ _ <<< "$line"
                if [ "$st" == ok ]; then cell="ok $p"; else cell="FAIL $f/$((p + f))"; fi
            elif { [ "${KIND[$row]}" == pg ] && [[ " ${PG_CELLS[*]} " == *" $c "* ]]; } ||
                 { [ "${KIND[$row]}" == mariadb ] && [[ " ${MY_CELLS[*]} " == *" $c "* ]]; }; then
                if [ -n "${NOTE[$row]:-}" ]; then cell="see note"
                elif [ "$row" == host-pg ] && [ "$c" == packages ]; then cell="make check"
                else cell="quick"; fi   # a suite make matrix QUICK=1 does not run
            else cell="-"; fi
            printf ' %-11s' "$cell"
        done
        printf '\n'
    done
} | tee "$WORK/table"
echo "ok N: passed, N checks; FAIL F/T: F of T failed; -: not that database's suite; quick: not part of QUICK=1"
# notes: rows not run, and every failure with its reason
for row in "${ROWS[@]}"; do
    [ -n "${NOTE[$row]:-}" ] && echo "note: ${LABEL[$row]} (${SYSTEM[$row]}): ${NOTE[$row]}"
done
awk -F'\t' '$3 != "ok" && $7 !~ /^not run: not selected/' "$CELLS" | while IFS=$'\t' read -r row cell st p f s note; do
    echo "failed: ${LABEL[$row]} (${SYSTEM[$row]}) $cell${note:+: $note} (log: $LOGS/$row/$cell.log)"
done
unselected=$(awk -F'\t' '$7 ~ /^not run: not selected/ { print $1 }' "$CELLS" | sort -u | tr '\n' ' ')
[ -n "$unselected" ] && echo "failed: not selected (--only $ONLY), every suite counted as failed: $unselected"

printf '\ntimings (s):'
while IFS=$'\t' read -r what s; do printf ' %s %d;' "$what" "$s"; done < "$TIMES"
printf ' total %d\n' $((SECONDS - START))
passed=$(awk -F'\t' '$3 == "ok"' "$CELLS" | wc -l)
failed=$(awk -F'\t' '$3 != "ok"' "$CELLS" | wc -l)
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] || KEEP_LOGS=1
[ "$failed" -eq 0 ]
