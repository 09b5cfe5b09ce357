#!/usr/bin/env bash
# The emulated cluster, 2 nodes x 2 ranks (network namespaces, veth + bridge, tc):
# the MPI tests of collectives, process groups and a tensor-parallel layer pass across
# the emulated nodes (among them Comm.AnIdleLinkCarriesNoMoreThanItsRate: told the rate
# and the ranks per node, it checks an idle link bursts no faster than its rate); with
# --core-share 0.3 every rank counts its 0.3 of a core, and so does each of 4 ranks in one
# cgroup of 1.2 cores, or each in one of 0.5 below it (MachineCores.*); nothing (links, cgroups) is left behind. Exit 77 (skipped) without root/netns.
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
# A CPU quota: a cgroup per rank (--core-share 0.3), then 4 ranks of plain mpirun in one
# cgroup of 1.2 cores (0.3 each), then in cgroups of 0.5 below it (still 0.3 each);
# MachineCores.* checks what each rank counts.
cg=/sys/fs/cgroup/cpu
cgroups_before=$(ls -d $cg/axonn_cluster_* 2>/dev/null | wc -l)
if [ $rc -eq 0 ] && [ -w $cg/cgroup.procs ] && [ -e $cg/cpu.cfs_quota_us ]; then
  for attempt in 1 2; do
    AXONN_TEST_CGROUP_CORES=0.3 AXONN_TEST_CORE_SHARE=0.3 timeout 90 bash "$CLUSTER" --nodes 2 --gpus-per-node 2 \
      --rate 400mbit --core-share 0.3 --mpirun-arg -x --mpirun-arg AXONN_TEST_CGROUP_CORES --mpirun-arg -x \
      --mpirun-arg AXONN_TEST_CORE_SHARE -- "$TESTS" --gtest_filter='MachineCores.*'
    rc=$?
    [ $rc -ne 124 ] && break
    echo "emulated cluster run timed out (attempt $attempt)"
  done
  [ $rc -eq 0 ] || echo "FAIL: a cgroup per rank (rc $rc)"
  left=$(( $(ls -d $cg/axonn_cluster_* 2>/dev/null | wc -l) - cgroups_before ))
  [ "$left" -eq 0 ] || { echo "FAIL: $left cgroups left behind"; rc=1; }
  # One cgroup of 1.2 cores: the 4 ranks in it, then each in a cgroup of its own below
  # it with 0.5 (the ancestor's 0.3 each is the least part).
  for ranks_in in shared own; do
    [ $rc -eq 0 ] || break
    shared="$cg/axonn_smoke_$$"
    mkdir "$shared" && echo 100000 >"$shared/cpu.cfs_period_us" && echo 120000 >"$shared/cpu.cfs_quota_us"
    if [ $ranks_in = shared ]; then
      quotas=1.2 join='echo $$ >"$1/cgroup.procs"'
    else
      quotas=0.5,1.2 join='d=$1/rank$OMPI_COMM_WORLD_RANK && mkdir "$d" && echo 100000 >"$d/cpu.cfs_period_us" &&
        echo 50000 >"$d/cpu.cfs_quota_us" && echo $$ >"$d/cgroup.procs"'
    fi
    AXONN_TEST_CGROUP_CORES=$quotas AXONN_TEST_CORE_SHARE=0.3 timeout 90 mpirun --oversubscribe --allow-run-as-root -np 4 \
      -x AXONN_TEST_CGROUP_CORES -x AXONN_TEST_CORE_SHARE bash -c "$join"' && exec "$2" --gtest_filter="MachineCores.*"' \
      _ "$shared" "$TESTS"
    rc=$?
    [ $rc -eq 0 ] || echo "FAIL: 4 ranks in the cgroup of 1.2 cores, each in the $ranks_in one (rc $rc)"
    for _ in $(seq 20); do rmdir "$shared"/rank* 2>/dev/null; rmdir "$shared" 2>/dev/null && break; sleep 0.1; done
    [ ! -d "$shared" ] || { echo "FAIL: $shared left behind"; rc=1; }
  done
elif [ $rc -eq 0 ]; then
  echo "not run: the CPU quotas (no writable cgroup v1 cpu controller with CFS bandwidth control)"
fi
after=$(ip -o link | grep -c ' ax[0-9]' || true)
if [ $rc -ne 0 ]; then echo "FAIL: tests across emulated nodes (rc $rc)"; exit 1; fi
if [ "$after" -ne "$before" ]; then echo "FAIL: $((after - before)) links left behind"; exit 1; fi
echo "1 passed, 0 failed"
