#!/bin/sh
# ovfwd postremove (deb: remove/purge/upgrade…; rpm: %postun with $1 =
# packages left). Purge removes everything ovfwd made at run time: its
# config directory, its state and its service user. rpm has no purge: an
# erase leaves /var/lib/ovfwd (it may hold the PKI) and rpm itself keeps a
# changed config as ovfwd.toml.rpmsave.
set -e

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi

if [ "$1" = purge ]; then
	rm -rf /etc/ovfwd /var/lib/ovfwd /run/ovfwd
	if getent passwd ovfwd >/dev/null; then
		userdel ovfwd || true
	fi
	if getent group ovfwd >/dev/null; then
		groupdel ovfwd || true
	fi
fi
exit 0
