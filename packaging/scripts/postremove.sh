#!/bin/sh
# ovfwd postremove (deb: remove/purge/upgrade…; rpm: %postun with $1 =
# packages left).
#
# Purge never deletes key material. The PKI stays where `ovfwd pki init`
# put it: /etc/ovfwd/pki (the paths the shipped ovfwd.toml names) or
# /var/lib/ovfwd/pki, with everything else the operator or the daemon
# wrote under /etc/ovfwd and /var/lib/ovfwd (pool persistence, CRL), as
# Debian's openvpn leaves /etc/openvpn/server. dpkg itself removes the
# conffile /etc/ovfwd/ovfwd.toml and /etc/ovfwd when nothing else is left.
# The ovfwd user and group stay too: they own those files, and a UID freed
# now could go to a later account that would then own the keys.
# What purge removes holds no keys: the run directory /run/ovfwd (the
# status socket), the links enabling instances, and /var/lib/ovfwd when it
# is empty. rpm has no purge: an erase
# leaves all of it and keeps a changed config as ovfwd.toml.rpmsave.
set -e

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi

if [ "$1" = purge ]; then
	# systemd removed each instance's /run/ovfwd-NAME when prerm stopped
	# it; a glob here would also take `ovfwd lab`'s /run/ovfwd-lab.
	rm -rf /run/ovfwd
	# Instances enabled by the operator (ovfwd@NAME links in *.wants);
	# drop-in directories (ovfwd@NAME.service.d) are theirs and stay.
	find /etc/systemd/system -type l -name 'ovfwd@*.service' -delete 2>/dev/null || true
	rmdir /var/lib/ovfwd 2>/dev/null || true
	for d in /etc/ovfwd /var/lib/ovfwd; do
		if [ -d "$d" ]; then
			echo "ovfwd: purge left $d (it may hold keys); remove it yourself once they are saved elsewhere" >&2
		fi
	done
fi
exit 0
