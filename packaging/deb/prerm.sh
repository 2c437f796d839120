#!/bin/sh
# prerm for the switchboard .deb: stop the service before its files go away.
# On upgrade the service keeps running; postinst restarts it on the new binary.
set -e

if [ "$1" = "remove" ] && [ -d /run/systemd/system ]; then
	if command -v deb-systemd-invoke >/dev/null 2>&1; then
		deb-systemd-invoke stop switchboard.socket switchboard.service >/dev/null || true
	else
		systemctl stop switchboard.socket switchboard.service >/dev/null 2>&1 || true
	fi
fi

exit 0
