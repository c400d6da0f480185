#!/bin/sh
# ovfwd postinstall (deb: configure; rpm: %post). Creates the service user
# and tells systemd and udev about the new files. Does not enable or start
# the service (the default config needs the operator's ports first); on an
# upgrade a running service is restarted onto the new binary.
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
	systemctl try-restart ovfwd.service || true
fi
if command -v udevadm >/dev/null && [ -S /run/udev/control ]; then
	udevadm control --reload || true
	udevadm trigger --subsystem-match=vfio || true
fi
exit 0
