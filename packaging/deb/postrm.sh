#!/bin/sh
# postrm for the switchboard .deb.
#
# remove: the configuration, the secret key and the database stay.
# purge:  the database (/var/lib/switchboard), the secret key and the rest of
#         /etc/switchboard go too; back up first (`switchboard backup --to FILE`).
#         The system user stays, as Debian policy advises: files it owns (backups,
#         copies) must not be handed to the next package that reuses the uid.
set -e

if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi

case "$1" in
remove)
	if command -v deb-systemd-helper >/dev/null 2>&1; then
		deb-systemd-helper mask switchboard.service switchboard.socket >/dev/null || true
	fi
	;;
purge)
	if command -v deb-systemd-helper >/dev/null 2>&1; then
		deb-systemd-helper purge switchboard.service switchboard.socket >/dev/null || true
		deb-systemd-helper unmask switchboard.service switchboard.socket >/dev/null || true
	fi
	rm -rf /var/lib/switchboard
	rm -f /etc/switchboard/secret.key
	rmdir /etc/switchboard/modules.d /etc/switchboard 2>/dev/null || true
	# Only if empty: modules an admin installed there are theirs to remove.
	rmdir /usr/local/libexec/switchboard 2>/dev/null || true
	;;
esac

exit 0
