# shellcheck shell=bash
# Installing what the tests need on a fresh Debian machine, as root or through sudo. Sourced by
# scripts/test-all.sh and the steps in scripts/test-all.d/ (it defines functions and runs nothing).

# A command as root: directly when this shell is root, else through sudo.
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Debian packages, the package lists updated once per run.
apt_updated=
apt_install() {
  [ -n "$apt_updated" ] || { as_root apt-get update -qq; apt_updated=1; }
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Python packages for python3, with pip installed first when it is missing. Debian's own Python
# refuses pip installs into it (PEP 668, "externally managed"): then they go in all the same,
# as they would into a virtual environment, since the tests run this python3.
pip_install() {
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
  python3 -m pip install -q "$@" 2>/dev/null || python3 -m pip install -q --break-system-packages "$@"
}

# Global npm packages (the system npm installs them under /usr, so as root).
npm_install_global() {
  if [ -w "$(npm prefix -g 2>/dev/null || echo /usr/local)" ]; then
    npm install -g --silent --no-audit --no-fund "$@"
  else
    as_root npm install -g --silent --no-audit --no-fund "$@"
  fi
}
