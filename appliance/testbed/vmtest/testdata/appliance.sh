#!/bin/bash
# Runs inside the appliance guest as the vmtest.service unit: installs the
# .deb and drives ovfwd through systemd the way an operator does. Every
# check prints "STEP name: ok|FAIL"; facts the host asserts on print as
# "FACT key value". Each wait is bounded.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C
exec >/dev/ttyS1 2>&1
echo "VMTEST start uptime $(cut -d' ' -f1 /proc/uptime)"

fails=0
step() { # step NAME CMD... : runs CMD, prints its output indented on failure
	local name=$1; shift
	local out rc t0 dt
	t0=$(cut -d' ' -f1 /proc/uptime)
	# Not in an if condition: bash ignores set -e in the functions a
	# condition calls, so a step function would count only its last command.
	out=$("$@" 2>&1)
	rc=$?
	dt=$(awk -v t0="$t0" '{printf "%.1f s", $1 - t0}' /proc/uptime)
	if [ "$rc" = 0 ]; then
		echo "STEP $name: ok ($dt)"
	else
		echo "STEP $name: FAIL (exit $rc, $dt)"
		printf '%s\n' "$out" | tail -n 30 | sed 's/^/  | /'
		fails=$((fails + 1))
	fi
}
# stepup: a step that needs the service running; once it has failed to
# come up these fail at once instead of each waiting out its bound.
up=0
stepup() {
	if [ "$up" = 1 ]; then
		step "$@"
	else
		echo "STEP $1: FAIL not run: ovfwd never became active"
		fails=$((fails + 1))
	fi
}
fact() { echo "FACT $1 $2"; }
# not CMD: fails when CMD succeeds. Under set -e, "! CMD" never stops a
# function (bash exempts inverted commands); a failing function call does.
not() { ! "$@"; }
waitfor() { # waitfor SECONDS CMD... : until CMD succeeds
	local n=$1; shift
	for _ in $(seq 1 "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
	"$@"
}
inns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
mainpid() { systemctl show -p MainPID --value ovfwd; }
xdp_ids() { ip -d link show "$1" | grep -o 'prog/xdp id [0-9]*' | awk '{print $3}'; }
journal_tail() { journalctl -u ovfwd --no-pager -n 40 | sed 's/^/  | journal: /'; }

step "load veth and tun" modprobe -a veth tun
step "dpkg -i the package" dpkg -i /vmtest/ovfwd.deb
step "package made the ovfwd user and group" getent passwd ovfwd
step "unit installed, not enabled" sh -c '! systemctl is-enabled ovfwd'

# Topology: client host --c0/p0-- appliance --p1/lan0-- LAN host, which
# also holds the "internet" host 198.18.150.1 (on its lo). The LAN host
# routes only the client hosts' net back to the appliance, never the VPN
# pool (198.18.142.0/24): what the VPN clients reach there, they reach
# through NAT. Every host keeps the kernel's default offloads.
topo() {
	set -e
	ip netns add client
	ip netns add lan
	ip link add p0 type veth peer name c0 netns client
	ip link add p1 type veth peer name lan0 netns lan
	ip addr add 198.18.140.254/24 dev p0
	ip addr add 198.18.141.254/24 dev p1
	ip link set p0 up
	ip link set p1 up
	sysctl -qw net.ipv4.ip_forward=0
	inns client ip link set lo up
	inns client ip link set c0 up
	inns client ip addr add 198.18.140.1/24 dev c0
	inns client ip route add 198.18.141.0/24 via 198.18.140.254
	inns lan ip link set lo up
	inns lan ip link set lan0 up
	inns lan ip addr add 198.18.141.1/24 dev lan0
	inns lan ip addr add 198.18.150.1/32 dev lo
	inns lan ip route add 198.18.140.0/24 via 198.18.141.254
}
step "two veth pairs to the client and LAN namespaces" topo

pki() {
	set -e
	install -d -o ovfwd -g ovfwd -m 0750 /var/lib/ovfwd
	runuser -u ovfwd -- ovfwd pki init /var/lib/ovfwd/pki
	runuser -u ovfwd -- ovfwd pki client /var/lib/ovfwd/pki alice -remote 198.18.140.254:1194 >/tmp/profile-path
	cp "$(cat /tmp/profile-path)" /root/alice.ovpn
}
step "ovfwd pki init and a client profile" pki

# Phase 1 runs the lifecycle on device-model ports (driver mlx5-sim: no
# kernel interface involved), so what systemd and the package do is tested
# apart from the AF_XDP data plane; phase 2 forwards real packets.
simconfig() { # simconfig [extra TOML]
	cat >/etc/ovfwd/ovfwd.toml <<TOML
# written by the vmtest appliance guest: device-model ports
[appliance]
mode = "router"

[[port]]
name = "s0"
driver = "mlx5-sim"
addresses = ["198.18.160.254/24"]

[[port]]
name = "s1"
driver = "mlx5-sim"
addresses = ["198.18.161.254/24"]

[status]
socket = "/run/ovfwd/ovfwd.sock"
$1
TOML
	ovfwd check -c /etc/ovfwd/ovfwd.toml
}
config() { # config [extra TOML]: router + VPN server on the veths
	cat >/etc/ovfwd/ovfwd.toml <<TOML
# written by the vmtest appliance guest
[appliance]
mode = "router"
mss_clamp = 1300

[[port]]
name = "p0"
driver = "afxdp-copy"
ifname = "p0"
addresses = ["198.18.140.254/24"]

[[port]]
name = "p1"
driver = "afxdp-copy"
ifname = "p1"
addresses = ["198.18.141.254/24"]

[vpn]
enabled = true
port = 1194
ca = "/var/lib/ovfwd/pki/ca.crt"
cert = "/var/lib/ovfwd/pki/server.crt"
key = "/var/lib/ovfwd/pki/server.key"
tls_crypt = "/var/lib/ovfwd/pki/tls-crypt.key"
pool_v4 = "198.18.142.0/24"
# No more clients than the pool has addresses (ovfwd check insists).
max_peers = 253
push_routes = ["198.18.141.0/24"]
# Full tunnel: the server pushes "redirect-gateway def1".
redirect_gateway = ["ipv4"]

# The pool reaches the internet host as the LAN port's own address.
[[nat]]
name = "vpn"
sources = ["198.18.142.0/24"]
port = "p1"

[[route]]
prefix = "198.18.150.0/24"
via = "198.18.141.1"

[status]
socket = "/run/ovfwd/ovfwd.sock"
$1
TOML
	ovfwd check -c /etc/ovfwd/ovfwd.toml
}
active() { systemctl is-active -q ovfwd && test -S /run/ovfwd/ovfwd.sock && ovfwd status >/dev/null; }
came_up() { # came_up NAME: the step, and whether later steps can run
	step "$1" waitfor 60 active
	if active; then up=1; else up=0; fi
}
report_down() {
	active && return
	journal_tail
	# For the report: the same config run by root outside systemd.
	systemctl stop ovfwd
	timeout -s TERM 15 ovfwd run -c /etc/ovfwd/ovfwd.toml 2>&1 | grep -v '^[[:space:]]' | head -n 20 | sed 's/^/  | as root outside systemd: /'
}

# --- phase 1: the service lifecycle under systemd -----------------------
step "write /etc/ovfwd/ovfwd.toml (device-model ports)" simconfig ""
step "systemctl enable --now ovfwd" systemctl enable --now ovfwd
came_up "ovfwd is active (device-model ports)"
report_down
pid=$(mainpid)
fact pid1 "$pid"
st=$(cat "/proc/$pid/status" 2>/dev/null)
printf '%s\n' "$st" | grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' | while read -r k v; do fact "status.${k%:}" "$(echo $v)"; done
fact user "$(getent passwd "$(printf '%s\n' "$st" | awk '/^Uid:/{print $2}')" | cut -d: -f1)"
fact unit_user "$(systemctl show -p User --value ovfwd)"
fact unit_caps "$(systemctl show -p AmbientCapabilities --value ovfwd)"

useradd -m -G ovfwd opal
useradd -m bob
stepup "ovfwd status as root" ovfwd status
stepup "ovfwd status as a member of the ovfwd group" runuser -u opal -- ovfwd status
# Refused for lack of permission, not because nothing listens.
stepup "ovfwd status refused to others" sh -c '! out=$(runuser -u bob -- ovfwd status 2>&1) && echo "$out" | grep -qi "permission denied"'
runuser -u bob -- ovfwd status 2>&1 | head -3 | sed 's/^/  | bob: /'

reload() {
	set -e
	simconfig '
[[route]]
prefix = "198.18.170.0/24"
via = "198.18.161.1"'
	systemctl reload ovfwd
	waitfor 20 sh -c 'ovfwd status | grep -q "198.18.170.0/24 via 198.18.161.1"'
	ovfwd status | grep -q "reloads: 1 ok"
	test "$(mainpid)" = "$pid"
}
stepup "systemctl reload with a new route: status shows it, same PID" reload

restart() {
	set -e
	systemctl restart ovfwd
	waitfor 60 active
	test "$(mainpid)" != "$pid"
	ovfwd status | grep -q "198.18.170.0/24"
}
stepup "systemctl restart" restart
pid=$(mainpid)

kill9() {
	set -e
	kill -9 "$pid"
	waitfor 60 sh -c "p=\$(systemctl show -p MainPID --value ovfwd); [ \"\$p\" != 0 ] && [ \"\$p\" != $pid ]"
	waitfor 60 active
	test "$(systemctl show -p NRestarts --value ovfwd)" -ge 1
}
stepup "kill -9 of the main PID: systemd restarts it" kill9
stepup "systemctl stop" sh -c 'systemctl stop ovfwd && ! systemctl is-active -q ovfwd && test ! -e /run/ovfwd/ovfwd.sock'
stepup "journal has the start line" sh -c 'journalctl -u ovfwd --no-pager | grep -q "msg=running"'
stepup "journal has the reload line" sh -c 'journalctl -u ovfwd --no-pager | grep -q "msg=reloaded"'
stepup "journal has systemd restarting it after kill -9" sh -c 'journalctl -u ovfwd --no-pager | grep -q "Scheduled restart job"'

# --- phase 2: forwarding on the veths, the VPN server, kill -9 ----------
step "write /etc/ovfwd/ovfwd.toml (router + VPN server on the veths)" config ""
step "systemctl start ovfwd (veth ports)" systemctl start ovfwd
came_up "ovfwd is active (veth ports)"
report_down
pid=$(mainpid)
stepup "routed ping client host -> LAN host" waitfor 20 inns client ping -c 1 -W 1 198.18.141.1
stepup "routed ping LAN host -> client host" inns lan ping -c 3 -W 2 198.18.140.1

vpn() {
	set -e
	ip netns exec client ip route del 198.18.141.0/24
	# A host's default route: redirect-gateway needs one to redirect.
	ip netns exec client ip route add default via 198.18.140.254
	ip netns exec client openvpn --config /root/alice.ovpn --disable-dco --daemon ovpn-alice \
		--log /tmp/openvpn-client.log --writepid /tmp/openvpn-client.pid
	waitfor 60 grep -q "Initialization Sequence Completed" /tmp/openvpn-client.log
	ip netns exec client ip route get 198.18.141.1 | grep -q 'dev tun'
	ip netns exec client ping -c 3 -W 2 198.18.141.1
}
stepup "stock openvpn client connects and pings the LAN host through the tunnel" vpn

# --- NAT44: the full-tunnel client reaches the internet host -------------
# The internet host (198.18.150.1, in the lan namespace) has no route to
# the pool, so its replies come back only through ovfwd's NAT; it serves
# TCP and UDP with socat and answers with the peer address it sees.
inet() {
	set -e
	not inns lan ip route get 198.18.142.2
	cat >/tmp/inet-tcp.sh <<'SH'
echo "tcp $SOCAT_PEERADDR:$SOCAT_PEERPORT" >>/tmp/inet-peers
echo "$SOCAT_PEERADDR:$SOCAT_PEERPORT $(sha256sum | cut -d' ' -f1)"
SH
	cat >/tmp/inet-udp.sh <<'SH'
echo "udp $SOCAT_PEERADDR:$SOCAT_PEERPORT" >>/tmp/inet-peers
echo "$SOCAT_PEERADDR:$SOCAT_PEERPORT"
SH
	inns lan socat TCP4-LISTEN:8000,bind=198.18.150.1,reuseaddr,fork SYSTEM:"sh /tmp/inet-tcp.sh" </dev/null >/dev/null 2>&1 &
	echo $! >/tmp/inet-tcp.pid
	inns lan socat UDP4-RECVFROM:8001,bind=198.18.150.1,fork SYSTEM:"sh /tmp/inet-udp.sh" </dev/null >/dev/null 2>&1 &
	echo $! >/tmp/inet-udp.pid
	waitfor 10 sh -c 'ip netns exec lan ss -Hltn "sport = 8000" | grep -q . && ip netns exec lan ss -Hlun "sport = 8001" | grep -q .'
}
stepup "NAT: internet host has no route to the pool, serves TCP and UDP" inet
natping() {
	set -e
	inns client ip route show 0.0.0.0/1 | grep -q 'dev tun'
	inns client ip route show 128.0.0.0/1 | grep -q 'dev tun'
	inns client ip route get 198.18.150.1 | grep -q 'dev tun'
	inns client ping -c 3 -W 2 198.18.150.1
}
stepup "NAT: full-tunnel client (redirect-gateway def1) pings the internet host" natping
nattcp() {
	set -e
	head -c 262144 /dev/urandom >/tmp/blob
	got=$(inns client socat -t 20 -T 30 - TCP4:198.18.150.1:8000,connect-timeout=20 </tmp/blob)
	echo "internet host replied: $got"
	test "${got#* }" = "$(sha256sum </tmp/blob | cut -d' ' -f1)"
	peer=${got%% *}
	test "${peer%:*}" = 198.18.141.254
	test "${peer#*:}" -ge 1024 && test "${peer#*:}" -le 32767
}
stepup "NAT: 256 KiB over TCP to the internet host, intact, from the outside address" nattcp
# udpask WORD: one datagram from the client's port 40000 to the internet
# host, the answer (socat waits 1 s for it; a few tries, same flow).
udpask() {
	local got
	for _ in 1 2 3 4 5 6 7 8; do
		got=$(echo "$1" | inns client socat -t 1 - UDP4:198.18.150.1:8001,sourceport=40000,reuseaddr)
		[ -n "$got" ] && break
	done
	echo "$got"
}
natudp() {
	set -e
	got=$(udpask hello)
	echo "internet host replied: $got"
	test "${got%:*}" = 198.18.141.254
	echo "${got#*:}" >/tmp/udp-outside-port
}
stepup "NAT: UDP datagram to the internet host and back, from the outside address" natudp
[ -s /tmp/inet-peers ] && sed 's/^/  | internet host saw: /' /tmp/inet-peers
# The internet host's veth offloads checksums (the default): its TCP and
# UDP leave it with the pseudo-header sum only, which ovfwd completes
# before NAT rewrites addresses and ports. The client's kernel checks
# what comes out of its tun, so the answers above arriving is the proof;
# csum_partial (which also counts the client's own offloaded datagrams)
# shows the engine saw such packets.
natcsum() {
	set -e
	inns lan ethtool -k lan0 | grep -E '^(tx-checksumming|tcp-segmentation-offload):'
	inns lan ethtool -k lan0 | grep -q '^tx-checksumming: on'
	n=$(ovfwd status | sed -n 's/^engine:.* csum_partial=\([0-9]*\).*/\1/p')
	echo "engine csum_partial=$n"
	test "${n:-0}" -gt 0
}
stepup "NAT: the internet host kept checksum offload on (engine csum_partial > 0)" natcsum
fact nat.lan0_offloads "$(inns lan ethtool -k lan0 | grep -E '^(tx-checksumming|tcp-segmentation-offload|generic-segmentation-offload):' | tr '\n' ' ')"
fact nat.engine "$(ovfwd status | grep '^engine:')"
natstatus() {
	set -e
	out=$(runuser -u opal -- ovfwd status)
	printf '%s\n' "$out" | sed -n '/^nat:/,/^$/p'
	pool=$(inns client ip -4 -o addr show dev tun0 | awk '{print $4}' | cut -d/ -f1)
	printf '%s\n' "$out" | awk '/^nat: sessions/ {n = $4 + $6 + $8} END {exit !(n > 0)}'
	printf '%s\n' "$out" | grep -q "client $pool (alice): 198.18.141.254 ports"
	waitfor 20 sh -c "journalctl -u ovfwd --no-pager | grep -q 'msg=\"nat block\" event=allocate client=$pool common_name=alice rule=vpn outside=198.18.141.254 ports='"
	journalctl -u ovfwd --no-pager | grep 'msg="nat block"'
}
stepup "NAT: ovfwd status (ovfwd group) shows sessions and alice's block; journal has the block line" natstatus
ovfwd status | sed -n '/^nat:/,/^$/p' | sed 's/^/  | status: /'
journalctl -u ovfwd --no-pager | grep 'msg="nat block"' | sed 's/^/  | journal: /'
pid=$(mainpid)
st=$(cat "/proc/$pid/status" 2>/dev/null)
printf '%s\n' "$st" | grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' | while read -r k v; do fact "nat.status.${k%:}" "$(echo $v)"; done
fact nat.user "$(getent passwd "$(printf '%s\n' "$st" | awk '/^Uid:/{print $2}')" | cut -d: -f1)"
natreload() {
	set -e
	before=$(ovfwd status)
	created=$(printf '%s\n' "$before" | grep -o 'sessions_created=[0-9]*')
	reloads=$(printf '%s\n' "$before" | grep -o 'reloads: [0-9]*' | cut -d' ' -f2)
	systemctl reload ovfwd
	waitfor 20 sh -c "ovfwd status | grep -q 'reloads: $((reloads + 1)) ok'"
	test "$(mainpid)" = "$pid"
	got=$(udpask again)
	echo "after reload: $got (before: 198.18.141.254:$(cat /tmp/udp-outside-port)), $created"
	test "$got" = "198.18.141.254:$(cat /tmp/udp-outside-port)"
	test -n "$created"
	ovfwd status | grep -qw "$created"
	not sh -c "journalctl -u ovfwd --no-pager | grep -q 'event=release'"
}
stepup "NAT: systemctl reload, rule unchanged: the UDP mapping and its session stay" natreload
for f in /tmp/inet-tcp.pid /tmp/inet-udp.pid; do [ -s "$f" ] && kill "$(cat "$f")"; done
[ -s /tmp/openvpn-client.log ] && tail -n 15 /tmp/openvpn-client.log | sed 's/^/  | openvpn: /'
[ -s /tmp/openvpn-client.pid ] && kill "$(cat /tmp/openvpn-client.pid)"
ip netns exec client ip route replace 198.18.141.0/24 via 198.18.140.254

fact xdp_before_kill "p0=$(xdp_ids p0) p1=$(xdp_ids p1)"
kill9veth() {
	set -e
	kill -9 "$pid"
	waitfor 60 sh -c "p=\$(systemctl show -p MainPID --value ovfwd); [ \"\$p\" != 0 ] && [ \"\$p\" != $pid ]"
	waitfor 60 active
	waitfor 20 ip netns exec client ping -c 1 -W 1 198.18.141.1
	# One program per port, the new instance's.
	test "$(xdp_ids p0 | wc -l)" = 1 && test "$(xdp_ids p1 | wc -l)" = 1
}
stepup "kill -9 with veth ports: restarted, forwarding, one XDP program per port" kill9veth
fact xdp_after_kill "p0=$(xdp_ids p0) p1=$(xdp_ids p1)"

step "systemctl stop (veth ports)" systemctl stop ovfwd
step "stopped: no XDP program left on the ports" sh -c "! ip -d link show p0 | grep -q prog/xdp && ! ip -d link show p1 | grep -q prog/xdp"
step "stopped: no pinned neighbour or BPF object left" sh -c '[ -z "$(ip neigh show nud permanent)" ] && [ -z "$(ls -A /sys/fs/bpf 2>/dev/null)" ]'
journal_tail

# Upgrade, instances, reload verdicts, watchdog and purge.
. /vmtest/lifecycle.sh

echo "VMTEST done fails=$fails"
echo "VMTEST end uptime $(cut -d' ' -f1 /proc/uptime)"
sync
systemctl poweroff --force --force
