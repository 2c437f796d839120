#!/usr/bin/env bash
# Check the .deb packages that build.sh made: control data, file list, modes,
# that the binary is a static build for the package's arch, and that it runs
# (natively, or under qemu-user for arm64/armhf when qemu is installed).
#
#   packaging/check-debs.sh                 every dist/switchboard_*.deb
#   packaging/check-debs.sh FILE.deb ...
#
# Environment:
#   VERSION                        when set, `switchboard version` must print it
#   SWITCHBOARD_REQUIRE_EXTERNAL=1 fail instead of skipping when qemu-user is
#                                  missing for the arm64 package
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
debs=("$@")
if [[ ${#debs[@]} -eq 0 ]]; then
	shopt -s nullglob
	debs=("$root"/dist/switchboard_*.deb)
	shopt -u nullglob
fi
if [[ ${#debs[@]} -eq 0 ]]; then
	echo "check-debs: no packages found; run packaging/build.sh first" >&2
	exit 1
fi

failures=0
fail() {
	echo "check-debs: FAIL $deb: $*" >&2
	failures=$((failures + 1))
}

# expect_line NAME TEXT REGEX: TEXT must have a line matching REGEX.
expect_line() {
	grep -Eq -- "$3" <<<"$2" || fail "$1: no line matching /$3/"
}

# qemu_for prints the qemu-user emulator for a Debian arch, or nothing.
qemu_for() {
	local names
	case "$1" in
	arm64) names="qemu-aarch64-static qemu-aarch64" ;;
	armhf) names="qemu-arm-static qemu-arm" ;;
	*) return 0 ;;
	esac
	for n in $names; do
		if command -v "$n" >/dev/null 2>&1; then
			command -v "$n"
			return 0
		fi
	done
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for deb in "${debs[@]}"; do
	echo "check-debs: $deb"
	info=$(dpkg-deb --info "$deb")
	contents=$(dpkg-deb --contents "$deb")
	arch=$(dpkg-deb --field "$deb" Architecture)

	expect_line info "$info" '^ Package: switchboard$'
	expect_line info "$info" '^ Version: [0-9]'
	case "$deb" in
	*_"$arch".deb) ;;
	*) fail "file name does not end in _$arch.deb" ;;
	esac
	for script in postinst prerm postrm; do
		expect_line info "$info" " $script +#!/bin/sh"
	done
	conffiles=$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)
	expect_line conffiles "$conffiles" '^/etc/switchboard/switchboard\.env$'

	# mode, owner, path
	expect_line contents "$contents" '^-rwxr-xr-x root/root .* \./usr/bin/switchboard$'
	expect_line contents "$contents" '^-rw-r--r-- root/root .* \./usr/lib/systemd/system/switchboard\.service$'
	expect_line contents "$contents" '^-rw-r--r-- root/root .* \./usr/lib/systemd/system/switchboard\.socket$'
	expect_line contents "$contents" '^-rw------- root/root .* \./etc/switchboard/switchboard\.env$'
	expect_line contents "$contents" '^drwxr-xr-x root/root .* \./etc/switchboard/modules\.d/$'
	expect_line contents "$contents" '^-rw-r--r-- root/root .* \./usr/share/doc/switchboard/README\.md$'
	expect_line contents "$contents" '^-rw-r--r-- root/root .* \./usr/share/doc/switchboard/docs/configuration\.md$'
	if grep -q '\./usr/local/' <<<"$contents"; then
		fail "ships files under /usr/local (policy: postinst creates that directory)"
	fi

	bin="$work/switchboard_$arch"
	dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/bin/switchboard >"$bin"
	chmod +x "$bin"

	# The Go build info says how the binary was built; no readelf needed.
	case "$arch" in
	amd64) want_goarch=amd64 ;;
	arm64) want_goarch=arm64 ;;
	armhf) want_goarch=arm ;;
	*) fail "unexpected architecture $arch"; continue ;;
	esac
	buildinfo=$(go version -m "$bin")
	expect_line buildinfo "$buildinfo" $'^\tbuild\tCGO_ENABLED=0$'
	expect_line buildinfo "$buildinfo" $'^\tbuild\tGOARCH='"$want_goarch"'$'
	if [[ $arch == armhf ]]; then
		expect_line buildinfo "$buildinfo" $'^\tbuild\tGOARM=7$'
	fi
	goversion=$(head -n1 <<<"$buildinfo" | awk '{print $2}')

	runner=()
	if [[ $want_goarch != "$(go env GOHOSTARCH)" ]]; then
		emulator=$(qemu_for "$arch")
		if [[ -z $emulator ]]; then
			if [[ $arch == arm64 && ${SWITCHBOARD_REQUIRE_EXTERNAL:-0} == 1 ]]; then
				fail "no qemu-aarch64(-static) to run the arm64 binary (apt-get install qemu-user-static)"
			else
				echo "check-debs: skip running the $arch binary: no qemu-user emulator installed"
			fi
			continue
		fi
		runner=("$emulator")
	fi
	if ! out=$("${runner[@]}" "$bin" version 2>&1); then
		fail "\`switchboard version\` failed: $out"
		continue
	fi
	echo "check-debs:   $arch: $out"
	expect_line version "$out" '^switchboard '
	expect_line version "$out" "$goversion"
	if [[ -n ${VERSION:-} ]]; then
		expect_line version "$out" "$VERSION"
	fi
done

if [[ $failures -gt 0 ]]; then
	echo "check-debs: $failures check(s) failed" >&2
	exit 1
fi
echo "check-debs: ${#debs[@]} package(s) ok"
