#!/bin/sh
# ovfwd preremove (deb: remove/upgrade; rpm: %preun with $1 = packages left).
# Stops the service and its instances on removal only (and disables
# ovfwd.service); on an upgrade they keep running and postinstall restarts
# them onto the new binary.
set -e

case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl disable --now ovfwd.service >/dev/null 2>&1 || true
		# Instances stay enabled until purge (postremove), as a removed
		# package's services do.
		systemctl stop 'ovfwd@*.service' >/dev/null 2>&1 || true
	fi
	;;
esac
exit 0
