#!/bin/sh
# ovfwd postinstall (deb: configure; rpm: %post). Creates the service user
# and tells systemd and udev about the new files. Does not enable or start
# the service (the default config needs the operator's ports first).
#
# On an upgrade every running instance (ovfwd.service, ovfwd@NAME.service)
# is restarted once onto the new binary, which drops and re-establishes its
# tunnels (clients get a RESTART notice and reconnect at once). An operator
# who restarts at a time of their choosing creates /etc/ovfwd/upgrade-no-restart:
# then the old binary keeps running until they do.
set -e

if ! getent group ovfwd >/dev/null; then
	groupadd --system ovfwd
fi
if ! getent passwd ovfwd >/dev/null; then
	useradd --system --gid ovfwd --home-dir /var/lib/ovfwd --no-create-home \
		--shell /usr/sbin/nologin --comment "ovfwd daemon" ovfwd
fi

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
	if [ -e /etc/ovfwd/upgrade-no-restart ]; then
		echo "ovfwd: /etc/ovfwd/upgrade-no-restart exists; running instances keep the old binary until restarted" >&2
	else
		systemctl try-restart ovfwd.service 'ovfwd@*.service' || true
	fi
fi
if command -v udevadm >/dev/null && [ -S /run/udev/control ]; then
	udevadm control --reload || true
	udevadm trigger --subsystem-match=vfio || true
fi
exit 0
