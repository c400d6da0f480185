#!/bin/sh
# ovfwd preremove (deb: remove/upgrade; rpm: %preun with $1 = packages left).
# Stops and disables the service and its instances on removal only; on an
# upgrade they keep running and postinstall restarts them onto the new
# binary.
set -e

case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl disable --now ovfwd.service >/dev/null 2>&1 || true
		for u in $(systemctl list-units --all --plain --no-legend 'ovfwd@*.service' | awk '{print $1}'); do
			systemctl disable --now "$u" >/dev/null 2>&1 || true
		done
	fi
	;;
esac
exit 0
