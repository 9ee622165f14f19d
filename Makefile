# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs what it needs, at the versions the lock files pin
# (requirements/*.lock, with hashes: `make lock` updates them); `make test` as root also
# installs ROS 1 from Debian's packages so that every integration test runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip --disable-pip-version-check
STAMP := $(VENV)/.installed
# demo.lock: what `make demo` needs; test.lock: that plus every extra, resolved first so
# that the packages both hold are the same versions.
LOCK_DEMO := requirements/demo.lock
LOCK_TEST := requirements/test.lock
UV_VERSION := 0.13.9
# ROS 1 for the ros1 backend; Erlang for the OTP baselines (restart, face tracker);
# iptables for link loss on emulated hosts; cyclonedds-tools for ddsperf, the DDS
# anchor; openssh-server for the SSH hosts test; stress-ng for the loaded-machine
# check; openssl for the TLS test's certificates; gcc and Python's headers for the dds
# backend's C part (setup.py; optional, ctypes without); chromium for the test that opens
# the report in a real browser. All from Debian's own packages.
SYSTEM_PACKAGES := ros-core python3-rospy python3-sensor-msgs python3-std-msgs python3-genpy \
	erlang-nox iptables cyclonedds-tools openssh-server stress-ng openssl gcc python3-dev util-linux \
	chromium
SYSTEM_COMMANDS := roscore roslaunch erl erlc iptables ddsperf sshd stress-ng openssl gcc \
	chromium prlimit setpriv
# make test installs the optional extras too (DDS, face tracker, bags); make demo does not.
EXTRAS := dev,dds,facetrack,data,notebook
comma := ,
EXTRAS_STAMP := $(VENV)/.extras

.PHONY: demo test unit test-loaded fuzz lint system ros1 extras lock native clean

BUILD_FILES := pyproject.toml setup.py src/roboscale/backends/_dds_take.c

# Exactly what the lock pins (--require-hashes), then roboscale itself without resolving
# anything (--no-deps) and built with the locked setuptools (--no-build-isolation).
$(STAMP): $(BUILD_FILES) $(LOCK_DEMO)
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "roboscale needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --require-hashes -r $(LOCK_DEMO)
	$(PIP) install --quiet --no-deps --no-build-isolation -e .
	@touch $@

$(EXTRAS_STAMP): $(STAMP) $(BUILD_FILES) $(LOCK_TEST)
	$(PIP) install --quiet --require-hashes -r $(LOCK_TEST)
	$(PIP) install --quiet --no-deps --no-build-isolation -e .
	@touch $@

# Update the lock files after a change of pyproject.toml: pins already there are kept
# where they still fit; `make lock UPGRADE=--upgrade` moves everything to the newest
# versions allowed. Then run `make test` (CI installs exactly these files).
UPGRADE ?=
LOCK_ARGS := --quiet --python-version 3.11 --generate-hashes pyproject.toml requirements/build.in
lock: $(STAMP)
	$(PIP) install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip compile $(LOCK_ARGS) $(UPGRADE) $(addprefix --extra ,$(subst $(comma), ,$(EXTRAS))) -o $(LOCK_TEST)
	$(BIN)/uv pip compile $(LOCK_ARGS) -c $(LOCK_TEST) -o $(LOCK_DEMO)

extras: $(EXTRAS_STAMP)

# The runtime bridge's per-message path in Rust (native/zbridge: pyo3 over the zenoh
# crate, every crate pinned by its Cargo.lock, from crates.io). Optional: without Rust's
# cargo (>= 1.88, rustup.rs) the bridge runs on zenoh-python and the extension's tests
# skip, saying so (in CI they fail). One release build; cargo rebuilds only on change.
CARGO ?= $(shell command -v cargo 2>/dev/null || ls $$HOME/.cargo/bin/cargo 2>/dev/null)
NATIVE_DIR := native/zbridge
NATIVE_TARGET ?= $(NATIVE_DIR)/target
NATIVE_SO = src/roboscale/runtime/_zbridge$(shell $(BIN)/python -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
native: $(STAMP)
	@if [ -z "$(CARGO)" ]; then \
		echo "make native: no Rust cargo (>= 1.88, https://rustup.rs): the bridge runs on zenoh-python"; \
		case "$${CI:-}" in 1|true|yes) exit 2;; esac; exit 0; fi; \
	start=$$(date +%s); \
	PYO3_PYTHON=$(abspath $(BIN)/python) CARGO_TARGET_DIR=$(abspath $(NATIVE_TARGET)) \
		$(CARGO) build --release --locked --manifest-path $(NATIVE_DIR)/Cargo.toml && \
	cp $(NATIVE_TARGET)/release/lib_zbridge.so $(NATIVE_SO) && \
	echo "make native: built $(NATIVE_SO) in $$(( $$(date +%s) - start )) s"

demo: $(STAMP)
	$(BIN)/roboscale bench experiments/demo.yaml --quick --out results/demo --replace

# system first: the extras' install builds the dds backend's C part with its compiler.
test: system $(EXTRAS_STAMP) native lint
	$(BIN)/python -m pytest

FAST_TESTS := not ros1 and not netns and not slow and not zenoh
unit: $(EXTRAS_STAMP)
	$(BIN)/python -m pytest -m '$(FAST_TESTS)'

# The fast tests again, with a CPU hog (stress-ng) busy on one core beside them: a
# test that waits on a guess of this machine's speed instead of an event fails here.
# The hog ends with the recipe, whatever happens (its own timeout bounds it even if
# this shell is killed).
HOG_TIMEOUT_S := 900
test-loaded: system $(EXTRAS_STAMP)
	@PATH=$$PATH:/usr/sbin; command -v stress-ng >/dev/null || \
		{ echo "test-loaded needs stress-ng: run 'sudo make system'"; exit 2; }; \
	stress-ng --cpu 1 --timeout $(HOG_TIMEOUT_S)s --quiet & hog=$$!; \
	trap 'kill $$hog 2>/dev/null; wait $$hog 2>/dev/null' EXIT INT TERM; \
	echo "stress-ng --cpu 1 (pid $$hog) beside: pytest -m '$(FAST_TESTS)'"; \
	$(BIN)/python -m pytest -q -m '$(FAST_TESTS)'

# The fuzz tests on fresh random examples (CI replays fixed ones: tests/conftest.py),
# FUZZ_ROUNDS times; a failure prints the example and the blob that reproduces it.
FUZZ_ROUNDS ?= 5
FUZZ_TESTS = $(shell grep -rl --include='test_*.py' '^from hypothesis' tests)
fuzz: $(EXTRAS_STAMP)
	for round in $$(seq $(FUZZ_ROUNDS)); do \
		echo "fuzz round $$round of $(FUZZ_ROUNDS)"; \
		HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest -q $(FUZZ_TESTS) || exit 1; \
	done

lint: $(EXTRAS_STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy --strict src

# System packages come from Debian. As root they are installed; otherwise say how,
# and the tests that need them skip with that reason (outside CI only: in CI a
# skip is a failure).
system:
	@if (PATH=$$PATH:/usr/sbin; for c in $(SYSTEM_COMMANDS); do command -v $$c >/dev/null || exit 1; done) \
		&& /usr/bin/python3 -c 'import rospy, sensor_msgs.msg' 2>/dev/null; then \
		echo "system packages: installed"; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null; \
	else \
		echo "system packages missing and not root; run 'sudo make system' (ROS 1, Erlang, DDS tools, sshd, iptables tests will skip)"; \
	fi

ros1: system

clean:
	rm -rf $(VENV) results .mypy_cache .pytest_cache .ruff_cache $(NATIVE_DIR)/target src/roboscale/runtime/_zbridge*.so
