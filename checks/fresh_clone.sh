#!/usr/bin/env bash
# A fresh clone, no ../shared beside it, no network: `make test` must pass on the data committed under tests/fixtures.
#
#   checks/fresh_clone.sh [REF]      (default: HEAD; only committed files are cloned)
#
# 1. clones this repository into a temporary folder holding nothing else (no ../shared, no data/);
# 2. `make install` there: the lock (requirements/cpu.txt), hash-checked (pip may use its cache);
# 3. `make test` inside a new network namespace with only loopback up (`unshare -n`, needs root): every download,
#    DNS lookup or remote connection fails; the local test servers on 127.0.0.1 still work. $ALFWORLD_DATA points at an
#    empty folder so no ALFWorld data of this machine is found.
# Prints the wall times of `make install` and `make test` and pytest's summary line (tests run and skipped).
set -euo pipefail
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse "${1:-HEAD}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q --no-local --no-checkout "$repo" "$work/scpo"
git -C "$work/scpo" checkout -q "$commit"
mkdir "$work/alfworld-empty"
test ! -e "$work/shared" && test ! -e "$work/scpo/data"
cd "$work/scpo"
unset SCPO_SHARED_DATA PYTHONPATH VIRTUAL_ENV
export ALFWORLD_DATA="$work/alfworld-empty"
install_start=$(date +%s)
make install
install_s=$(( $(date +%s) - install_start ))
start=$(date +%s)
set +e
unshare -n sh -c 'ip link set lo up && make test' 2>&1 | tee "$work/test.log"
status=${PIPESTATUS[0]}
set -e
echo "fresh clone of ${commit:0:10}: make install ${install_s} s wall; make test exit ${status}, $(( $(date +%s) - start )) s wall; $(grep -E '(passed|failed)' "$work/test.log" | tail -1)"
exit "$status"
