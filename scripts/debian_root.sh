# shellcheck shell=bash
# Source this file (do not run it): `. scripts/debian_root.sh`
#
# debian_root ARCH SUITE ROOT LOG PACKAGE...: a Debian root of SUITE for ARCH with PACKAGE...
# (and their dependencies) unpacked into ROOT, made once: ROOT/.dlbridge-ready marks a finished
# one, and a finished root is left as it is. Used by scripts/aarch64_smoke.sh (bookworm arm64)
# and scripts/py315_smoke.sh (unstable amd64, for its python3.15).
#
# No chroot and no kernel setting: debootstrap --foreign only downloads and unpacks the
# packages (its second stage would run the root's programs inside a chroot), and then every
# package is unpacked with dpkg-deb; Python needs none of their configuration scripts. The root
# is made in ROOT.tmp and moved into place once complete, so an interrupted run leaves nothing
# half-made. Needs root (debootstrap) and the Debian mirror, $DLBRIDGE_DEBIAN_MIRROR (default
# http://deb.debian.org/debian); the debootstrap log goes to LOG, whose tail is printed when
# it fails.
debian_root() {
    local arch="$1" suite="$2" root="$3" log="$4" deb
    shift 4
    [ -f "$root/.dlbridge-ready" ] && return 0
    rm -rf "$root.tmp" "$root"
    mkdir -p "$(dirname "$root")"
    local packages
    packages="$(IFS=,; printf '%s' "$*")"
    debootstrap --arch="$arch" --foreign --variant=minbase --include="$packages" \
        "$suite" "$root.tmp" "${DLBRIDGE_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$log" 2>&1 || {
        tail -n 20 "$log" >&2
        return 1
    }
    for deb in "$root.tmp"/var/cache/apt/archives/*.deb; do
        dpkg-deb -x "$deb" "$root.tmp"
    done
    rm -f "$root.tmp"/var/cache/apt/archives/*.deb
    touch "$root.tmp/.dlbridge-ready"
    mv "$root.tmp" "$root"
}

# debian_tools PROGRAM:PACKAGE...: install each PACKAGE whose PROGRAM is missing, when we may
# (root, or sudo without a password); fails, saying what to install, when we may not.
debian_tools() {
    local pair missing=()
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
    done
    [ "${#missing[@]}" = 0 ] && return 0
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo -n"
    if command -v apt-get >/dev/null && { [ -z "$sudo" ] || sudo -n true 2>/dev/null; }; then
        printf 'debian_root: apt-get install %s\n' "${missing[*]}"
        $sudo apt-get update -qq
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        printf 'debian_root: needs %s: apt-get install %s\n' "${missing[*]}" "${missing[*]}" >&2
        return 1
    fi
}
