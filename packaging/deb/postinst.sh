#!/bin/sh
# postinst for the switchboard .deb (written by hand: the package is built with
# nfpm, not debhelper, so this mirrors what dh_installsystemd would generate).
set -e

user=switchboard
state=/var/lib/switchboard
conf=/etc/switchboard

create_user() {
	if getent passwd "$user" >/dev/null; then
		return
	fi
	if command -v adduser >/dev/null 2>&1; then
		adduser --system --group --quiet --home "$state" --no-create-home \
			--shell /usr/sbin/nologin --gecos "Switchboard" "$user"
	else
		useradd --system --user-group --home-dir "$state" --no-create-home \
			--shell /usr/sbin/nologin --comment "Switchboard" "$user"
	fi
}

# LoadCredential= fails the unit when its file is missing, so the key must exist
# before the first start. It is made once and never replaced: the database's
# sealed webhook secrets can only be opened with the key that sealed them.
#
# It is readable by the service's group as well as root: the service holds the key
# anyway (as its credential), and the CLI run as the service user needs it to seal
# the secrets of webhooks it creates or rotates. Nobody else may read it.
create_secret_key() {
	key="$conf/secret.key"
	if [ ! -e "$key" ]; then
		tmp="$key.dpkg-new-$$"
		(
			umask 077
			head -c 32 /dev/urandom | base64 >"$tmp"
		)
		mv "$tmp" "$key"
	fi
	chown "root:$user" "$key"
	chmod 0640 "$key"
}

case "$1" in
configure)
	create_user
	# StateDirectory= would create this too, but the CLI (backup, todo add) may
	# run before the service ever started.
	install -d -m 0750 -o "$user" -g "$user" "$state"
	install -d -m 0755 "$conf" "$conf/modules.d"
	# Module executables: root-owned and not writable by the service, as the
	# module loader requires. Policy allows creating (not shipping) this dir.
	install -d -m 0755 /usr/local/libexec/switchboard
	create_secret_key
	;;
abort-upgrade | abort-remove | abort-deconfigure)
	;;
*)
	exit 0
	;;
esac

# Enable the service on first install; keep the admin's choice on upgrades
# (was-enabled defaults to true only for a unit never seen before).
if command -v deb-systemd-helper >/dev/null 2>&1; then
	deb-systemd-helper unmask switchboard.service >/dev/null || true
	if deb-systemd-helper --quiet was-enabled switchboard.service; then
		deb-systemd-helper enable switchboard.service >/dev/null || true
	else
		deb-systemd-helper update-state switchboard.service >/dev/null || true
	fi
	# The socket is opt-in; record it so purge cleans up after an admin enabled it.
	deb-systemd-helper update-state switchboard.socket >/dev/null || true
elif [ -z "$2" ] && command -v systemctl >/dev/null 2>&1; then
	systemctl enable switchboard.service >/dev/null 2>&1 || true
fi

# Start on install, restart on upgrade, but only when systemd is the running
# init (not in a chroot or a container build) and policy-rc.d allows it.
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
	if [ -n "$2" ]; then
		# Upgrade: replace the running binary. try-restart leaves a stopped
		# service stopped and also covers a socket-activated one.
		action=try-restart
	else
		action=start
	fi
	if command -v deb-systemd-invoke >/dev/null 2>&1; then
		deb-systemd-invoke "$action" switchboard.service >/dev/null || true
	else
		systemctl "$action" switchboard.service >/dev/null || true
	fi
fi

exit 0
