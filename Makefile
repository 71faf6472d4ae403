# dlock — one entry point: build, install, run, check, bench.
.PHONY: all deps build install check run stop bench torture clean

all: build

deps:
	scripts/deps.sh

build:
	$(MAKE) -C pg_ext

install: build
	$(MAKE) -C pg_ext install

# every suite on throwaway servers; the last line is "N passed, M failed"
check:
	scripts/check.sh

# a throwaway server with dlock and a short demonstration; `make stop` ends it
run:
	scripts/demo.sh start

stop:
	scripts/demo.sh stop

bench:
	@if [ -x bench/run.sh ]; then bench/run.sh $(if $(QUICK),--quick); \
	else echo "bench/run.sh is not there yet"; exit 1; fi

# fencing-checked torture run with faults; QUICK=1 for 20 s
torture: install
	regress/torture/run.sh $(if $(QUICK),--quick)

clean:
	$(MAKE) -C pg_ext clean
	$(MAKE) -C core clean
