# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs what it needs; `make test` as root also installs
# ROS 1 from Debian's packages so that every integration test runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# ROS 1 for the ros1 backend; Erlang for the OTP baseline of bench/restart.py;
# iptables for link loss on emulated hosts. All from Debian's own packages.
SYSTEM_PACKAGES := ros-core python3-rospy python3-sensor-msgs python3-std-msgs python3-genpy \
	erlang-nox iptables

.PHONY: demo test unit lint system ros1 clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "roboscale needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

demo: $(STAMP)
	$(BIN)/roboscale bench experiments/demo.yaml --quick --out results/demo

test: $(STAMP) system lint
	$(BIN)/python -m pytest

unit: $(STAMP)
	$(BIN)/python -m pytest -m 'not ros1 and not netns and not slow and not zenoh'

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy --strict src

# System packages come from Debian. As root they are installed; otherwise say how,
# and the tests that need them skip with that reason (outside CI only: in CI a
# skip is a failure).
system:
	@if command -v roscore >/dev/null && command -v erl >/dev/null && command -v iptables >/dev/null \
		&& /usr/bin/python3 -c 'import rospy, sensor_msgs.msg' 2>/dev/null; then \
		echo "system packages: installed"; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null; \
	else \
		echo "system packages missing and not root; run 'sudo make system' (ROS 1, Erlang, iptables tests will skip)"; \
	fi

ros1: system

clean:
	rm -rf $(VENV) results .mypy_cache .pytest_cache .ruff_cache
