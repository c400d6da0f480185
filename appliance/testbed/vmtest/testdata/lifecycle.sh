# Sourced by appliance.sh once its phases are done (ovfwd stopped, the
# veth config with the VPN server in /etc/ovfwd/ovfwd.toml, the PKI in
# /var/lib/ovfwd/pki): what an operator meets over a package's life.
# Upgrade to the next version with the service running and a client
# connected, two instances side by side, reloads the daemon rejects, the
# watchdog on a stalled data plane, and purge. /vmtest/next-version is the
# version of /vmtest/ovfwd-next.deb; /vmtest/ovfwd-stallseam is ovfwd built
# with the ovfwd_stallseam tag (SIGUSR2 stalls the heartbeats the watchdog
# judges).
next=$(cat /vmtest/next-version)
pkihash() { find /var/lib/ovfwd/pki -type f | sort | xargs sha256sum; }
runs() { journalctl -u ovfwd --no-pager | grep -c 'msg=running'; }
tunaddr() { inns client ip -4 -o addr show dev tun0 2>/dev/null | awk '{print $4}' | cut -d/ -f1; }

# --- upgrade N -> N+1 ----------------------------------------------------
upgrade_setup() {
	set -e
	runuser -u ovfwd -- ovfwd pki client /var/lib/ovfwd/pki mallory -remote 198.18.140.254:1194 >/dev/null
	crl=$(runuser -u ovfwd -- ovfwd pki revoke /var/lib/ovfwd/pki mallory | head -n 1)
	test -s "$crl"
	# The operator's edits to the conffile: pool persistence and the CRL.
	sed -i "/^\[vpn\]\$/a pool_persist = \"/var/lib/ovfwd/ipp.txt\"\ncrl = \"$crl\"" /etc/ovfwd/ovfwd.toml
	ovfwd check -c /etc/ovfwd/ovfwd.toml
	systemctl start ovfwd
	waitfor 60 active
	inns client ip route del 198.18.141.0/24 2>/dev/null || true
	rm -f /tmp/openvpn-client.log
	inns client openvpn --config /root/alice.ovpn --disable-dco --daemon ovpn-alice \
		--log /tmp/openvpn-client.log --writepid /tmp/openvpn-client.pid
	waitfor 60 grep -q "Initialization Sequence Completed" /tmp/openvpn-client.log
	inns client ping -c 2 -W 2 198.18.141.1
	waitfor 10 grep -q '^alice,' /var/lib/ovfwd/ipp.txt
}
step "upgrade: version N runs with an edited config (pool persistence, CRL), alice connected" upgrade_setup
fact upgrade.from "$(ovfwd version)"
addr_before=$(tunaddr)
pki_before=$(pkihash)
conf_before=$(sha256sum /etc/ovfwd/ovfwd.toml)
runs_before=$(runs)
inv_before=$(systemctl show -p InvocationID --value ovfwd)
restarts_before=$(systemctl show -p NRestarts --value ovfwd)

upgrade() {
	set -e
	dpkg -i /vmtest/ovfwd-next.deb </dev/null >/tmp/dpkg-upgrade.log 2>&1 || { cat /tmp/dpkg-upgrade.log; return 1; }
	cat /tmp/dpkg-upgrade.log
	not grep -qi "configuration file" /tmp/dpkg-upgrade.log
	test "$(dpkg-query -W -f='${Version}' ovfwd)" = "$next-1"
	test "$(ovfwd version)" = "ovfwd $next"
	test "$(sha256sum /etc/ovfwd/ovfwd.toml)" = "$conf_before"
	date +%s.%N >/tmp/upgraded-at
}
step "dpkg -i N+1 over N: no conffile prompt, the edited config kept byte for byte" upgrade
restarted_once() {
	set -e
	waitfor 60 active
	ovfwd status | head -n 1 | grep -q "^ovfwd $next,"
	test "$(systemctl show -p InvocationID --value ovfwd)" != "$inv_before"
	test "$(runs)" = "$((runs_before + 1))"
	test "$(systemctl show -p NRestarts --value ovfwd)" = "$restarts_before"
}
step "upgrade restarted the service exactly once, onto N+1" restarted_once
clients_back() {
	set -e
	# A second "Initialization Sequence Completed": the client was told to
	# restart and came back (30 s bound).
	waitfor 30 sh -c '[ "$(grep -c "Initialization Sequence Completed" /tmp/openvpn-client.log)" -ge 2 ]'
	waitfor 10 inns client ping -c 1 -W 1 198.18.141.1
	awk -v t0="$(cat /tmp/upgraded-at)" -v t1="$(date +%s.%N)" 'BEGIN {printf "%.1f\n", t1 - t0}' >/tmp/reconnect_s
	test "$(tunaddr)" = "$addr_before"
}
step "clients back within 30 s, alice with her persisted pool address" clients_back
fact upgrade.reconnect_s "$(cat /tmp/reconnect_s 2>/dev/null)"
state_kept() {
	set -e
	test "$(pkihash)" = "$pki_before"
	grep -q "^alice,$addr_before" /var/lib/ovfwd/ipp.txt
	grep -q "^crl = " /etc/ovfwd/ovfwd.toml
}
step "state kept: PKI and CRL unchanged, pool persistence holds alice's address" state_kept
[ -s /tmp/openvpn-client.pid ] && kill "$(cat /tmp/openvpn-client.pid)"
step "systemctl stop ovfwd (after the upgrade)" systemctl stop ovfwd

# --- two instances ---------------------------------------------------------
# Router-mode instances on device-model ports each make exception TAPs
# named ovx-<port index> (appliance/daemon/exception.go), which a second
# router-mode instance's would collide with: ovfwd@b is a bridge. Each
# instance needs its own metrics address (the default is one for all).
instconfig() { # instconfig NAME NET [extra TOML]: router on two sim ports
	cat >"/etc/ovfwd/$1.toml" <<TOML
[appliance]
mode = "router"

[[port]]
name = "s0"
driver = "mlx5-sim"
addresses = ["198.18.$2.254/24"]

[[port]]
name = "s1"
driver = "mlx5-sim"
addresses = ["198.18.$(($2 + 1)).254/24"]

[metrics]
listen = ""

[status]
socket = "/run/ovfwd-$1/ovfwd.sock"
$3
TOML
}
bridgeconfig() { # bridgeconfig NAME: bridge on two sim ports
	cat >"/etc/ovfwd/$1.toml" <<TOML
[appliance]
mode = "bridge"

[[port]]
name = "s0"
driver = "mlx5-sim"

[[port]]
name = "s1"
driver = "mlx5-sim"

[metrics]
listen = ""

[status]
socket = "/run/ovfwd-$1/ovfwd.sock"
TOML
}
ipid() { systemctl show -p MainPID --value "ovfwd@$1"; }
iactive() { systemctl is-active -q "ovfwd@$1" && ovfwd status -s "/run/ovfwd-$1/ovfwd.sock" >/dev/null; }
instances() {
	set -e
	instconfig a 180
	bridgeconfig b
	ovfwd check /etc/ovfwd/a.toml
	ovfwd check /etc/ovfwd/b.toml
	systemctl start ovfwd@a ovfwd@b
	waitfor 60 iactive a
	waitfor 60 iactive b
	test "$(ipid a)" != "$(ipid b)"
	ovfwd status -s /run/ovfwd-a/ovfwd.sock | head -n 1 | grep -q "config /etc/ovfwd/a.toml"
	ovfwd status -s /run/ovfwd-b/ovfwd.sock | head -n 1 | grep -q "config /etc/ovfwd/b.toml"
	test "$(systemctl show -p NRestarts --value ovfwd@a)" = 0 && test "$(systemctl show -p NRestarts --value ovfwd@b)" = 0
	test "$(stat -c %U /var/lib/ovfwd/a)" = ovfwd && test "$(stat -c %U /var/lib/ovfwd/b)" = ovfwd
	test "$(stat -c %U /run/ovfwd-a)" = ovfwd
}
step "ovfwd@a and ovfwd@b side by side: own config, run directory, status socket, state" instances
iactive a && iactive b || journalctl -u ovfwd@a -u ovfwd@b --no-pager | grep -v '^ ' | tail -n 20 | sed 's/^/  | journal: /'
apid=$(ipid a)

reloads() {
	set -e
	set -x # which command failed, should one
	instconfig a 180 '
[[route]]
prefix = "198.18.170.0/24"
via = "198.18.181.1"'
	systemctl reload ovfwd@a
	ovfwd status -s /run/ovfwd-a/ovfwd.sock | grep -q "198.18.170.0/24 via 198.18.181.1"
	cp /etc/ovfwd/a.toml /tmp/a.good
	# Does not load: systemctl reload fails, the daemon never hears of it.
	echo '[appliance' >>/etc/ovfwd/a.toml
	not systemctl reload ovfwd@a
	# Loads, but the daemon rejects it (a route on a port it does not run).
	instconfig a 180 '
[[port]]
name = "s2"
driver = "mlx5-sim"

[[route]]
prefix = "198.18.171.0/24"
port = "s2"'
	ovfwd check -c /etc/ovfwd/a.toml
	not systemctl reload ovfwd@a
	systemctl is-active -q ovfwd@a
	test "$(ipid a)" = "$apid"
	out=$(ovfwd status -s /run/ovfwd-a/ovfwd.sock)
	printf '%s\n' "$out" | grep -q "reloads: 1 ok, 1 rejected"
	printf '%s\n' "$out" | grep -q "198.18.170.0/24 via 198.18.181.1"
	# Route lines are indented; the rejection names the route too.
	not sh -c 'printf "%s\n" "$0" | grep -q "^  198.18.171.0/24"' "$out"
	# journald may not have taken the daemon's line in yet.
	waitfor 10 sh -c 'journalctl -u ovfwd@a --no-pager | grep -q "reload rejected; still running the previous config"'
	# The notifier's next pass (250 ms) carries the verdict to systemd.
	waitfor 5 sh -c "systemctl status ovfwd@a --no-pager | grep -q 'Status: \"ready: .*; reloads: 1 ok, 1 rejected\"'"
	cp /tmp/a.good /etc/ovfwd/a.toml
}
step "systemctl reload ovfwd@a: a broken and a rejected config fail the reload, the old config keeps running" reloads
systemctl status ovfwd@a --no-pager 2>&1 | sed -n '1,12p' | sed 's/^/  | /'

watchdog() {
	set -e
	mkdir -p /etc/systemd/system/ovfwd@b.service.d
	printf '[Service]\nExecStart=\nExecStart=/vmtest/ovfwd-stallseam run -c /etc/ovfwd/%%i.toml\n' \
		>/etc/systemd/system/ovfwd@b.service.d/stallseam.conf
	systemctl daemon-reload
	systemctl restart ovfwd@b
	waitfor 60 iactive b
	test "$(systemctl show -p WatchdogUSec --value ovfwd@b)" = 15s
	pid=$(ipid b)
	test "$(readlink /proc/$pid/exe)" = /vmtest/ovfwd-stallseam
	kill -USR2 "$pid"
	waitfor 90 sh -c "journalctl -u ovfwd@b --no-pager | grep -q 'Watchdog timeout'"
	waitfor 60 sh -c "p=\$(systemctl show -p MainPID --value ovfwd@b); [ \"\$p\" != 0 ] && [ \"\$p\" != $pid ]"
	waitfor 60 iactive b
	test "$(systemctl show -p NRestarts --value ovfwd@b)" -ge 1
	journalctl -u ovfwd@b --no-pager | grep -q 'watchdog pings stopped'
}
step "watchdog: ovfwd@b's stalled workers stop the pings, systemd restarts it" watchdog
journalctl -u ovfwd@b --no-pager | grep -E 'watchdog|Watchdog|stalled|Scheduled restart' | tail -n 6 | sed 's/^/  | journal: /'
# ovfwd@a ran through the watchdog step (longer than WatchdogSec) on the
# shipped binary: its pings kept it alive.
step "ovfwd@a kept running under its watchdog meanwhile" sh -c "test \"\$(systemctl show -p MainPID --value ovfwd@a)\" = $apid && ! journalctl -u ovfwd@a --no-pager | grep -q 'Watchdog timeout'"

# --- purge -------------------------------------------------------------------
pki_before=$(pkihash)
purge() {
	set -e
	rm -rf /etc/systemd/system/ovfwd@b.service.d
	dpkg -P ovfwd >/tmp/purge.log 2>&1 || { cat /tmp/purge.log; return 1; }
	cat /tmp/purge.log
	not systemctl is-active -q ovfwd@a
	test ! -e /usr/bin/ovfwd
	test ! -e /etc/ovfwd/ovfwd.toml
	test ! -e /usr/lib/systemd/system/ovfwd.service
	test ! -e /usr/lib/systemd/system/ovfwd@.service
	test ! -e /etc/systemd/system/multi-user.target.wants/ovfwd.service
	test ! -e /run/ovfwd && test ! -e /run/ovfwd-a
	not systemctl cat ovfwd
	# The keys stay, byte for byte, and so does their owner.
	test "$(pkihash)" = "$pki_before"
	test -s /var/lib/ovfwd/pki/ca.key
	grep -q "purge left /var/lib/ovfwd" /tmp/purge.log
	getent passwd ovfwd
}
step "dpkg -P: package files, unit and run directories gone; the PKI and its owner stay" purge
