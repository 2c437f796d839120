#!/usr/bin/env bash
# Build static switchboard binaries and .deb packages.
#
#   packaging/build.sh                 all arches: amd64 arm64 armv7
#   packaging/build.sh arm64           just one (names: amd64, arm64, armv7)
#
# Environment:
#   VERSION   stamped into main.version and the package; default: git describe
#   COMMIT    stamped into main.commit; default: the HEAD commit
#   SKIP_DEB  set to 1 to build binaries only
#   MAIN_PKG  package to build; default: the repository root
#   DIST      output directory; default: dist/ in the repository root
#
# Outputs dist/switchboard_linux_<arch> and dist/switchboard_<version>_<debarch>.deb.
# Everything is pure Go: CGO_ENABLED=0 and nfpm through `go run`, so a plain Go
# toolchain cross-builds every arch with no C compiler, Ruby or dpkg-dev.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

nfpm_module=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
dist=${DIST:-$root/dist}
main_pkg=${MAIN_PKG:-.}

if [[ -z "${VERSION:-}" ]]; then
	VERSION=$(git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)
fi
if [[ -z "${COMMIT:-}" ]]; then
	COMMIT=$(git rev-parse HEAD 2>/dev/null || echo unknown)
fi

# deb_version turns VERSION into something dpkg accepts and orders sensibly:
# v1.2.3 -> 1.2.3, v1.2.3-4-gabc-dirty -> 1.2.3+4.gabc.dirty (after 1.2.3),
# v1.3.0-rc.1 -> 1.3.0~rc.1 (before 1.3.0), an untagged abc1234-dirty ->
# 0.0.0~git.abc1234~dirty (before any release).
deb_version() {
	local v=${1#v}
	# A release tag looks like 1.2 or 1.2.3; a bare commit hash may start with a digit.
	if [[ ! $v =~ ^[0-9]+(\.[0-9]+)+ ]]; then
		v="0.0.0~git.$v"
	fi
	local head=${v%%-*} rest=""
	if [[ $v == *-* ]]; then
		rest=${v#*-}
		# Commits after a tag (-4-gabc) sort after it; a pre-release (-rc.1) before.
		if [[ ${rest%%-*} =~ ^[0-9]+$ ]]; then
			rest="+${rest//-/.}"
		else
			rest="~${rest//-/.}"
		fi
	fi
	# Anything else dpkg does not allow in an upstream version becomes a dot.
	printf '%s%s\n' "$head" "$rest" | tr -c 'A-Za-z0-9.+~\n' '.'
}

# set_target sets goarch, goarm and nfpm_arch for one of our arch names.
set_target() {
	goarm=""
	case "$1" in
	amd64) goarch=amd64 nfpm_arch=amd64 ;;
	arm64) goarch=arm64 nfpm_arch=arm64 ;;
	# ARMv7 with hardware float: Raspberry Pi 2 and later on a 32-bit OS.
	armv7) goarch=arm goarm=7 nfpm_arch=arm7 ;;
	*)
		echo "build.sh: unknown arch $1 (want amd64, arm64 or armv7)" >&2
		exit 1
		;;
	esac
}

if [[ $(go list -f '{{.Name}}' "$main_pkg" 2>/dev/null) != main ]]; then
	echo "build.sh: $main_pkg is not a main package (set MAIN_PKG)" >&2
	exit 1
fi

arches=("$@")
if [[ ${#arches[@]} -eq 0 ]]; then
	arches=(amd64 arm64 armv7)
fi

# Reproducible packages: file times in the .deb come from the commit, not the clock.
if [[ -z "${SOURCE_DATE_EPOCH:-}" ]]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

mkdir -p "$dist"
ldflags="-s -w -X main.version=$VERSION -X main.commit=$COMMIT"
pkg_version=$(deb_version "$VERSION")

for arch in "${arches[@]}"; do
	set_target "$arch"
	bin="$dist/switchboard_linux_$arch"
	echo "build.sh: $bin ($VERSION)"
	CGO_ENABLED=0 GOOS=linux GOARCH=$goarch GOARM=$goarm \
		go build -trimpath -ldflags "$ldflags" -o "$bin" "$main_pkg"

	if [[ ${SKIP_DEB:-0} == 1 ]]; then
		continue
	fi
	NFPM_ARCH=$nfpm_arch NFPM_VERSION=$pkg_version SWITCHBOARD_BINARY=$bin \
		go run "$nfpm_module" package \
		--config packaging/nfpm.yaml --packager deb --target "$dist/"
done

echo
echo "build.sh: binary sizes"
for arch in "${arches[@]}"; do
	f="$dist/switchboard_linux_$arch"
	stat -c %s "$f" | awk -v a="$arch" '{ printf "  %-6s %10d bytes  %5.1f MiB\n", a, $1, $1 / 1048576 }'
done
if [[ ${SKIP_DEB:-0} != 1 ]]; then
	ls -l "$dist"/switchboard_"$pkg_version"_*.deb
fi
