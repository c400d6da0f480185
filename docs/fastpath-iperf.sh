#!/bin/bash
# fastpath-iperf.sh ROUNDS SECONDS NAME=BIN...: TCP (iperf3, default offloads
# on both hosts) from host A through ovfwd (fast_path = "xdp", two
# afxdp-copy veth ports) to host B, one ovfwd binary after the other in
# each round, each run as the unit runs it. Prints per run: throughput,
# ovfwd's CPU, fast-path counters.
set -u
rounds=$1 secs=$2; shift 2
A=xcs$$-a R=xcs$$-r B=xcs$$-b D=$(mktemp -d)
OVPID= IPID=
cleanup() { [ -n "$OVPID" ] && kill $OVPID 2>/dev/null; [ -n "$IPID" ] && kill $IPID 2>/dev/null; sleep 0.3; ip netns del $A; ip netns del $R; ip netns del $B; rm -rf $D; }
trap cleanup EXIT
ip netns add $A; ip netns add $R; ip netns add $B
ip link add a0 netns $A type veth peer p0 netns $R
ip link add b0 netns $B type veth peer p1 netns $R
for n in $A $R $B; do ip -n $n link set lo up; done
ip -n $A addr add 198.18.60.1/24 dev a0; ip -n $A link set a0 up; ip -n $A route add default via 198.18.60.254
ip -n $B addr add 198.18.61.1/24 dev b0; ip -n $B link set b0 up; ip -n $B route add default via 198.18.61.254
ip -n $R link set p0 up; ip -n $R link set p1 up
# Out of a veth the redirect needs NAPI on its peer (as in TestDaemonNetns).
ip netns exec $A ethtool -K a0 gro on >/dev/null; ip netns exec $B ethtool -K b0 gro on >/dev/null
cat > $D/ovfwd.toml <<EOT
[appliance]
mode = "router"
fast_path = "xdp"
[[port]]
name = "p0"
driver = "afxdp-copy"
ifname = "p0"
addresses = ["198.18.60.254/24"]
[[port]]
name = "p1"
driver = "afxdp-copy"
ifname = "p1"
addresses = ["198.18.61.254/24"]
[status]
socket = "$D/ovfwd.sock"
[log]
level = "warn"
EOT
ip netns exec $B iperf3 -s -B 198.18.61.1 >/dev/null 2>&1 & IPID=$!
hz=$(getconf CLK_TCK)
U=$(id -u ovfwd 2>/dev/null || id -u nobody) G=$(id -g ovfwd 2>/dev/null || id -g nobody)
CAPS=$(sed -n 's/^AmbientCapabilities=//p' "$(dirname "$0")/../packaging/ovfwd.service" | tr 'A-Z ' 'a-z\n' | sed 's/^cap_/+/' | paste -sd,)
ML=$(prlimit --pid $$ --memlock --raw --noheadings -o HARD) # bytes, or unlimited
NF=$(prlimit --pid $$ --nofile --raw --noheadings -o HARD); [ "$NF" = unlimited ] || [ "$NF" -gt 65536 ] && NF=65536 # the unit's, at most the hard limit
chown $U:$G $D; chmod 0750 $D; chmod 0644 $D/ovfwd.toml
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
for r in $(seq $rounds); do
  for nb in "$@"; do
    name=${nb%%=*} bin=${nb#*=}
    # As packaging/ovfwd.service runs it: its user (nobody where the
    # package's is absent), only its capabilities, no new privileges; its
    # memlock limit as far as this host's hard limit allows. Each step
    # execs the next, so the PID is the daemon's.
    ip netns exec $R prlimit --memlock=$ML:$ML --nofile=$NF:$NF \
      setpriv --reuid=$U --regid=$G --clear-groups --no-new-privs --inh-caps=-all,$CAPS --ambient-caps=-all,$CAPS \
      --bounding-set=-all,$CAPS $bin run -c $D/ovfwd.toml >$D/$name.log 2>&1 & OVPID=$!
    for i in $(seq 100); do ip netns exec $A ping -c1 -W1 198.18.61.1 >/dev/null 2>&1 && break; sleep 0.1; done
    sleep 0.5 # the fast path's maps follow the neighbour at the next control tick
    kill -0 $OVPID 2>/dev/null || { echo "ovfwd ($name) exited:"; tail -5 $D/$name.log; exit 1; }
    c0=$(cpu $OVPID) creds=$(awk '/^(Uid|CapEff|NoNewPrivs):/{printf "%s%s ", $1, $2}' /proc/$OVPID/status)
    bps=$(ip netns exec $A iperf3 -c 198.18.61.1 -t $secs -J 2>$D/iperf.err | tee $D/iperf-$name.json | jq '.end.sum_received.bits_per_second')
    c1=$(cpu $OVPID)
    st=$($bin status -s $D/ovfwd.sock -json 2>/dev/null | jq -c '.ports[0].backend | {fwd: .fast_forwarded, fin: .fast_csum_finished, partial: .fast_punt_csum_partial}')
    rx=$($bin status -s $D/ovfwd.sock -json 2>/dev/null | jq ".ports[0].rx.packets, .engine.csum_partial" | paste -sd/ )
    kill $OVPID; wait $OVPID 2>/dev/null; OVPID=
    gb=$(echo "scale=2; ${bps:-0}/1000000000" | bc -l); cpct=$(echo "scale=1; ($c1-$c0)*100/$hz/$secs" | bc -l)
    echo "round $r $name: $gb Gbit/s, ovfwd CPU $cpct % of a core; engine rx p0 / csum_partial: $rx; p0 fast path: $st; $creds"
  done
done
