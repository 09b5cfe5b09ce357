#!/usr/bin/env bash
# The emulated cluster, 2 nodes x 2 ranks (network namespaces, veth + bridge, tc):
# the MPI tests of collectives, process groups and a tensor-parallel layer pass across
# the emulated nodes (among them Comm.AnIdleLinkCarriesNoMoreThanItsRate: told the rate
# and the ranks per node, it checks an idle link bursts no faster than its rate); with
# --core-share 0.3 every rank reads its 0.3 of a core (MachineCores.*); nothing (links,
# cgroups) is left behind. Exit 77 (skipped) without root/netns.
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
if [ $rc -eq 0 ]; then
  if [ -w /sys/fs/cgroup/cpu/cgroup.procs ]; then
    AXONN_TEST_CORE_SHARE=0.3 timeout 90 bash "$CLUSTER" --nodes 2 --gpus-per-node 2 --rate 400mbit --core-share 0.3 \
      --mpirun-arg -x --mpirun-arg AXONN_TEST_CORE_SHARE -- "$TESTS" --gtest_filter='MachineCores.*'
    rc=$?
    [ $rc -eq 0 ] || echo "FAIL: the ranks' core share (rc $rc)"
    left=$(ls -d /sys/fs/cgroup/cpu/axonn_cluster_* 2>/dev/null | wc -l)
    [ "$left" -eq 0 ] || { echo "FAIL: $left cgroups left behind"; rc=1; }
  else
    echo "not run: --core-share (no writable cgroup v1 cpu controller)"
  fi
fi
after=$(ip -o link | grep -c ' ax[0-9]' || true)
if [ $rc -ne 0 ]; then echo "FAIL: tests across emulated nodes (rc $rc)"; exit 1; fi
if [ "$after" -ne "$before" ]; then echo "FAIL: $((after - before)) links left behind"; exit 1; fi
echo "1 passed, 0 failed"
