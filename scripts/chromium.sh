#!/bin/sh
# chromium.sh makes sure Debian's chromium is installed, for the browser
# tests of hg serve: make test and .ci/run call it. It installs the package
# with apt-get when it is missing (as root, or through sudo), and fails
# with a clear message where it cannot.
set -eu
if command -v chromium >/dev/null 2>&1 || [ -n "${HG_CHROMIUM:-}" ]; then
	exit 0
fi
echo "chromium: not found; installing Debian's chromium for the browser tests of hg serve"
sudo=""
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		sudo="sudo -n"
	else
		echo "chromium: cannot install it (not root, no sudo): run 'apt-get install chromium', or set HG_CHROMIUM=/path/to/chromium" >&2
		exit 1
	fi
fi
if ! command -v apt-get >/dev/null 2>&1 ||
	! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null; }; then
	echo "chromium: apt-get install chromium failed: install Chromium, or set HG_CHROMIUM=/path/to/chromium" >&2
	exit 1
fi
command -v chromium
