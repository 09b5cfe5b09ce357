#!/usr/bin/env bash
# The emulated cluster, 2 nodes x 2 ranks (network namespaces, veth + bridge, tc):
# the MPI tests of collectives, process groups and a tensor-parallel layer pass across
# the emulated nodes (among them Comm.AnIdleLinkCarriesNoMoreThanItsRate: told the rate
# and the ranks per node, it checks an idle link bursts no faster than its rate), and
# nothing is left behind. Exit 77 (skipped) without root/netns.
set -uo pipefail
CLUSTER=$1 TESTS=$2
if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "skipped: needs root and ip netns"; exit 77
fi
before=$(ip -o link | grep -c ' ax[0-9]' || true)
for attempt in 1 2; do  # a bounded retry of an occasional launch hang (see calibrate_test.sh)
  # 400mbit = 50e6 bytes/s; mpirun's -x hands the variables to every rank
  AXONN_TEST_LINK_BYTES_PER_S=50000000 AXONN_TEST_RANKS_PER_NODE=2 \
    timeout 90 bash "$CLUSTER" --nodes 2 --gpus-per-node 2 --rate 400mbit \
    --mpirun-arg -x --mpirun-arg AXONN_TEST_LINK_BYTES_PER_S --mpirun-arg -x --mpirun-arg AXONN_TEST_RANKS_PER_NODE -- \
    "$TESTS" --gtest_filter='Comm.*:Grid.*:Linear.*'
  rc=$?
  [ $rc -ne 124 ] && break
  echo "emulated cluster run timed out (attempt $attempt)"
done
after=$(ip -o link | grep -c ' ax[0-9]' || true)
if [ $rc -ne 0 ]; then echo "FAIL: tests across emulated nodes (rc $rc)"; exit 1; fi
if [ "$after" -ne "$before" ]; then echo "FAIL: $((after - before)) links left behind"; exit 1; fi
echo "1 passed, 0 failed"
