#!/bin/sh
# ovfwd preremove (deb: remove/upgrade; rpm: %preun with $1 = packages left).
# Stops and disables the service on removal only; on an upgrade it keeps
# running and postinstall restarts it onto the new binary.
set -e

case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl disable --now ovfwd.service >/dev/null 2>&1 || true
	fi
	;;
esac
exit 0
