# dlock — one entry point: build, install, run, check, bench.
.PHONY: all deps build install check matrix run stop ha ha-stop bench torture asan clean deb

all: build

deps:
	scripts/deps.sh

# the extension and the dlock command (clients/cli)
build:
	$(MAKE) -C pg_ext
	$(MAKE) -C clients/cli

install: build
	$(MAKE) -C pg_ext install
	$(MAKE) -C clients/cli install

# every suite on throwaway servers; the last line is "N passed, M failed"
check:
	scripts/check.sh

# every supported server version, from Debian's archive: PostgreSQL 15 and
# MariaDB 10.11 here, 17 and 11.8 in a Debian 13 chroot, 18 in a sid chroot
# (cached in $DLOCK_MATRIX_CACHE, default /var/cache/dlock-matrix); one table
# version x suite, the last line "N passed, M failed"; QUICK=1: the builds,
# pg_regress, the scenarios and the mysql-test suite only
matrix:
	scripts/matrix.sh $(if $(QUICK),--quick)

# the Debian packages: this system's (postgresql-15-dlock, dlock,
# mariadb-plugin-dlock) into deb/, then Debian 13's (postgresql-17-dlock,
# MariaDB 11.8's plugin) and sid's (postgresql-18-dlock) into deb/trixie/
# and deb/sid/, each built and tried in its own system (make matrix's)
deb:
	scripts/deb.sh
	scripts/matrix.sh --deb

# a throwaway server with dlock and a short demonstration; `make stop` ends it
run:
	scripts/demo.sh start

stop:
	scripts/demo.sh stop

# a three-node Patroni cluster (etcd, strict synchronous mode) on this
# machine with dlock; the last line is the multi-host connection string
# for clients; `make ha-stop` ends it
HA_DIR ?= /tmp/dlock-ha
ha:
	@scripts/deps.sh >/dev/null
	@$(MAKE) -s install >/dev/null
	@scripts/ha.sh start $(HA_DIR)

ha-stop:
	@scripts/ha.sh stop $(HA_DIR)

bench:
	@if [ -x bench/run.sh ]; then bench/run.sh $(if $(QUICK),--quick); \
	else echo "bench/run.sh is not there yet"; exit 1; fi

# the lock manager against its reference model (10 million random events),
# then the fencing-checked torture run with crashes, failover and network
# partitions (fuzzer, crash mode 10 min, HA mode 5 min, Patroni mode 10 min),
# the MariaDB plugin's (10 min) and its semi-synchronous pair's with network
# partitions (10 min); QUICK=1: about 8 min; HA=1: the HA, Patroni and
# MariaDB pair modes only; HA=0: none of them
torture: install
	$(MAKE) -C core test/test_model && core/test/test_model $(if $(QUICK),1000000,10000000)
	regress/torture/run.sh $(if $(QUICK),--quick) $(if $(filter 1,$(HA)),--ha-only) $(if $(filter 0,$(HA)),--no-ha)
	$(if $(filter 1,$(HA)),,/usr/bin/python3 regress/torture/mysql_torture.py $(if $(QUICK),--quick,--seconds 600))
	$(if $(filter 0,$(HA)),,/usr/bin/python3 regress/torture/mysql_torture.py --ha --netns $(if $(QUICK),--quick,--seconds 600) --port 3404)

# the core's tests, then the PostgreSQL suites with dlock built with
# AddressSanitizer and UBSan, installed into the private PostgreSQL copy
# ASAN_PG (never PG_CONFIG's)
ASAN_PG ?= /tmp/dlock-asan-pg
asan:
	$(MAKE) -C core asan
	ASAN_PG=$(ASAN_PG) regress/torture/sanitize.sh

clean:
	$(MAKE) -C pg_ext clean
	$(MAKE) -C core clean
	$(MAKE) -C clients/cli clean
