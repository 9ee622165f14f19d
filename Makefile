# Two commands on a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs what it needs; `make test` as root also installs
# ROS 1 from Debian's packages so that every integration test runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ROS_PACKAGES := ros-core python3-rospy python3-sensor-msgs python3-std-msgs python3-genpy

.PHONY: demo test unit lint ros1 clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "roboscale needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

demo: $(STAMP)
	$(BIN)/roboscale bench experiments/demo.yaml --quick --out results/demo

test: $(STAMP) ros1 lint
	$(BIN)/python -m pytest

unit: $(STAMP)
	$(BIN)/python -m pytest -m 'not ros1 and not netns and not slow and not zenoh'

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy --strict src

# ROS 1 comes from Debian. As root it is installed; otherwise say how, and the
# ros1 tests skip with that reason (outside CI only: in CI a skip is a failure).
ros1:
	@if command -v roscore >/dev/null && /usr/bin/python3 -c 'import rospy, sensor_msgs.msg' 2>/dev/null; then \
		echo "ros1: installed"; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(ROS_PACKAGES) >/dev/null; \
	else \
		echo "ros1: not installed and not root; run 'sudo make ros1' (ros1 tests will skip)"; \
	fi

clean:
	rm -rf $(VENV) results .mypy_cache .pytest_cache .ruff_cache
