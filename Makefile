# Top-level commands. `make` builds; `make run` and `make test` also do all set-up.
BUILD ?= build
JOBS ?= $(shell nproc)
PY := .venv/bin/python
MODEL ?= smollm2
PROMPT ?= The three most useful things to know about the ocean are

.PHONY: all build setup run test test-unit test-python format format-all clean

all: build

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

setup:
	@bash scripts/setup.sh

run: setup build
	$(BUILD)/wick run -m $(MODEL) -p "$(PROMPT)" -n 96 --temp 0

test: setup build test-unit test-python

test-unit:
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-python:
	WICK=$(abspath $(BUILD))/wick $(PY) -m pytest -q tests/python

# The lines changed since HEAD (staged or not), by .clang-format;
# `make format-all` rewrites every file.
format:
	git clang-format -f --extensions c,h,cu,cuh

format-all:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD)
