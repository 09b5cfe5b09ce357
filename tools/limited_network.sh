#!/usr/bin/env bash
# Runs a command in a fresh network namespace whose loopback is rate-limited with tc,
# so that MPI ranks on this machine talk over TCP at a chosen rate (a stand-in for a
# slow network when one machine must play a cluster). Needs root and `ip netns`.
#
#   tools/limited_network.sh RATE COMMAND...        e.g. RATE = 1gbit
#
# Inside, Open MPI must use TCP on lo (not shared memory), e.g.
#   mpirun --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo ...
# The namespace is removed on exit, whatever happens.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 RATE COMMAND..." >&2; exit 2; fi
rate=$1; shift
if [ "$(id -u)" -ne 0 ]; then echo "limited_network.sh: needs root (ip netns, tc)" >&2; exit 2; fi
command -v ip >/dev/null || { echo "limited_network.sh: ip (iproute2) not found" >&2; exit 2; }
ns="axonn_lim_$$"
ip netns add "$ns" || { echo "limited_network.sh: cannot create a network namespace" >&2; exit 2; }
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT INT TERM
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" tc qdisc add dev lo root tbf rate "$rate" burst 256kb latency 100ms
ip netns exec "$ns" "$@"
